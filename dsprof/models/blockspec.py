"""`BlockSpec`: what a block *is*, independent of its weights, with one canonical string form.

The string form is the key that measurement files and latency tables use, so it must be
stable and parse back exactly: ``BlockSpec.from_str(spec.to_str()) == spec``.

Examples::

    inverted_residual(cin=24,hidden=144,cout=32,k=3,s=2,pad=symmetric,res=0,in=112x112)
    inverted_residual(cin=40,hidden=240,cout=80,k=3,s=2,pad=symmetric,res=0,in=28x28,act=hardswish)
    chain(convs=32x64k1s1g1-64x64k3s1g1,pad=symmetric,res=1,in=16x16,act=silu)
    ghost(convs=16x8k1s1g1-8x8k3s1g8c16,pad=symmetric,res=1,in=32x32)

The four named kinds keep the form they had before generic chains existed (so existing measurement
files and LUTs stay valid); ``,act=NAME`` is appended only when the block's removable activation is
not the kind's usual one (ReLU6 for the mobile kinds, ReLU for the ResNet kinds and chains). A
``chain`` lists every convolution as ``{cin}x{cout}k{kernel}s{stride}g{groups}`` joined by ``-``;
its ``res`` is ``0`` (no skip), ``1`` (identity skip), ``proj`` (a 1x1 projection on the skip) or, for a skip path
of other convolutions (GhostNet's depthwise kxk then 1x1), those convolutions written as the chain's are.
A convolution whose output is concatenated after its own input and cut to ``n`` channels (a Ghost module's cheap
operation: ``cat([x, conv(x)])[:, :n]``) ends in ``c{n}``; a chain with one is a ``ghost`` block, written as a chain.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Iterable

from ..errors import UsageError

__all__ = ["BlockSpec", "ConvShape", "BLOCK_KINDS", "CHAIN_KINDS", "PADDING_STYLES", "ACTIVATION_NAMES", "classify_convs",
           "composed"]

#: Block kinds dsprof knows. ``inverted_residual`` is pw-dw-pw (MobileNetV2, EfficientNet);
#: ``depthwise_separable`` is dw-pw (the expansion-1 block); ``bottleneck`` and ``basic`` are
#: the ResNet blocks; ``chain`` is any other chain of convolutions found in a traced graph; ``ghost`` is a chain
#: with a Ghost module's concatenation in it (GhostNet: a convolution's output concatenated after its input);
#: ``conv`` is one plain convolution (a dense replacement).
BLOCK_KINDS = ("inverted_residual", "depthwise_separable", "bottleneck", "basic", "chain", "ghost", "conv")
#: The kinds written convolution by convolution (``kind(convs=...)``).
CHAIN_KINDS = ("chain", "ghost")

#: ``symmetric``: k//2 zeros on every side (PyTorch convention). ``tf_same``: TensorFlow 'SAME',
#: which pads asymmetrically (more at the bottom/right) when the stride does not divide evenly.
PADDING_STYLES = ("symmetric", "tf_same")

#: The removable activations a block may have ("none": the block is linear already).
ACTIVATION_NAMES = ("relu", "relu6", "hardswish", "silu", "gelu", "leaky_relu", "hardtanh", "none")
_DEFAULT_ACT = {"inverted_residual": "relu6", "depthwise_separable": "relu6", "conv": "relu6"}  # others: relu

_NAMED = re.compile(
    r"^(?P<kind>[a-z_]+)\(cin=(?P<in_channels>\d+),hidden=(?P<hidden_channels>\d+),"
    r"cout=(?P<out_channels>\d+),k=(?P<kernel>\d+),s=(?P<stride>\d+),pad=(?P<padding>[a-z_]+),"
    r"res=(?P<residual>[01]),in=(?P<in_h>\d+)x(?P<in_w>\d+)(?:,act=(?P<act>[a-z0-9_]+))?\)$"
)
_CHAIN = re.compile(
    r"^(?P<kind>chain|ghost)\(convs=(?P<convs>[0-9xksgc-]+),pad=(?P<padding>[a-z_]+),res=(?P<res>0|1|proj|[0-9xksgc-]+),"
    r"in=(?P<in_h>\d+)x(?P<in_w>\d+)(?:,act=(?P<act>[a-z0-9_]+))?\)$"
)
_CONV = re.compile(r"^(\d+)x(\d+)k(\d+)s(\d+)g(\d+)(?:c(\d+))?$")


def _int(raw: str, text: str) -> int:
    if raw != str(int(raw)):  # one spec has exactly one string: no leading zeros
        raise UsageError(f"not a canonical BlockSpec string (leading zero in {raw!r}): {text!r}")
    return int(raw)


@dataclass(frozen=True)
class ConvShape:
    """One convolution of a block: channels in and out, square kernel, stride and groups.

    ``cat`` > 0: the output is ``cat([input, conv(input)], dim=1)[:, :cat]`` (a Ghost module's cheap operation after
    its primary convolution), so the next convolution reads ``cat`` channels (`out`); 0: the convolution's own."""

    cin: int
    cout: int
    kernel: int
    stride: int
    groups: int = 1
    cat: int = 0

    def to_str(self) -> str:
        cat = f"c{self.cat}" if self.cat else ""
        return f"{self.cin}x{self.cout}k{self.kernel}s{self.stride}g{self.groups}{cat}"

    @property
    def out(self) -> int:
        """The channels the next convolution reads: ``cat`` where the output is concatenated, else ``cout``."""
        return self.cat or self.cout

    @property
    def depthwise(self) -> bool:
        return self.groups > 1 and self.groups == self.cin == self.cout

    @property
    def pointwise(self) -> bool:
        return self.kernel == 1 and self.stride == 1 and self.groups == 1


def classify_convs(convs: tuple[ConvShape, ...], residual: bool, projection: bool, skip: tuple[ConvShape, ...] = ()) -> str:
    """The block kind of a chain of convolutions with its skip connection (see `BLOCK_KINDS`); ``skip``: the skip
    path's convolutions where they are not one 1x1 projection."""
    c = convs
    if any(x.cat for x in c):
        return "ghost"
    if skip:
        return "chain"
    identity = residual and not projection
    if len(c) == 3 and c[0].pointwise and c[1].depthwise and c[2].pointwise and not projection:
        return "inverted_residual"
    if len(c) == 2 and c[0].depthwise and c[1].pointwise and not projection:
        return "depthwise_separable"
    if residual and all(x.groups == 1 for x in c):
        # ResNet: a projection exactly where the shape changes (torchvision's downsample rule)
        changes = c[0].cin != c[-1].cout or any(x.stride > 1 for x in c)
        if projection == changes or identity and not changes:
            if len(c) == 3 and c[0].kernel == 1 and c[2].pointwise and c[1].cin == c[1].cout and c[0].stride == 1:
                return "bottleneck"
            if len(c) == 2 and c[0].kernel == c[1].kernel > 1 and c[1].stride == 1:
                return "basic"
    return "chain"


@dataclass(frozen=True)
class BlockSpec:
    """Shape of one block: channels, kernel, stride, padding, residual and input size.

    ``hidden_channels`` is the width inside the block (the expanded width of an inverted
    residual block, the bottleneck width of a ResNet block, ``in_channels`` for a depthwise-
    separable block, ``out_channels`` for a plain conv, the first convolution's output for a chain).
    ``kernel`` is the spatial kernel of the block's main (depthwise or 3x3) convolution -- the largest
    one of a chain; ``stride`` the block's total stride; ``in_h``/``in_w`` the block's input size.
    ``convs`` lists every convolution (derived for the named kinds, given for a ``chain``);
    ``projection`` is True when the skip connection has a convolution; ``act`` names the removable
    activation (None: the kind's usual one); ``skip`` the skip path's convolutions where they are not the one 1x1
    projection (``()`` for that one, for an identity skip and for none).
    """

    kind: str
    in_channels: int
    hidden_channels: int
    out_channels: int
    kernel: int
    stride: int
    padding: str
    residual: bool
    in_h: int
    in_w: int
    act: str | None = None
    convs: tuple[ConvShape, ...] = ()
    projection: bool = False
    skip: tuple[ConvShape, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in BLOCK_KINDS:
            raise UsageError(f"unknown block kind {self.kind!r}; known kinds: {', '.join(BLOCK_KINDS)}")
        if self.padding not in PADDING_STYLES:
            raise UsageError(
                f"unknown padding style {self.padding!r}; known styles: {', '.join(PADDING_STYLES)}"
            )
        for f in ("in_channels", "hidden_channels", "out_channels", "kernel", "stride", "in_h", "in_w"):
            value = getattr(self, f)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(f"BlockSpec.{f} must be a positive int, got {value!r}")
        if not isinstance(self.residual, bool):
            raise UsageError(f"BlockSpec.residual must be a bool, got {self.residual!r}")
        if self.act is not None and self.act not in ACTIVATION_NAMES:
            raise UsageError(f"unknown activation {self.act!r}; known: {', '.join(ACTIVATION_NAMES)}")
        if self.act == _DEFAULT_ACT.get(self.kind, "relu"):
            object.__setattr__(self, "act", None)  # one spec, one string
        skip = _plain_skip(tuple(self.skip), self.in_channels, self.out_channels, self.stride)
        object.__setattr__(self, "skip", skip)
        if skip and (self.kind not in CHAIN_KINDS or not self.projection):
            raise UsageError("a skip path of convolutions belongs to a chain or ghost BlockSpec with projection=True; "
                             "use BlockSpec.from_convs")
        if self.kind in CHAIN_KINDS:
            self._check_chain()
        else:
            object.__setattr__(self, "convs", self._derived_convs())
            if self.kind not in ("bottleneck", "basic"):
                object.__setattr__(self, "projection", False)
            else:  # torchvision's rule: a projection exactly where the shape changes
                object.__setattr__(self, "projection", self.in_channels != self.out_channels or self.stride > 1)

    def _derived_convs(self) -> tuple[ConvShape, ...]:
        cin, hid, cout, k, s = self.in_channels, self.hidden_channels, self.out_channels, self.kernel, self.stride
        if self.kind == "inverted_residual":
            return (ConvShape(cin, hid, 1, 1), ConvShape(hid, hid, k, s, hid), ConvShape(hid, cout, 1, 1))
        if self.kind == "depthwise_separable":
            return (ConvShape(cin, cin, k, s, cin), ConvShape(cin, cout, 1, 1))
        if self.kind == "bottleneck":
            return (ConvShape(cin, hid, 1, 1), ConvShape(hid, hid, k, s), ConvShape(hid, cout, 1, 1))
        if self.kind == "basic":
            return (ConvShape(cin, hid, k, s), ConvShape(hid, cout, k, 1))
        return (ConvShape(cin, cout, k, s),)

    def _check_chain(self) -> None:
        convs = tuple(self.convs)
        if len(convs) < 2 or not all(isinstance(c, ConvShape) for c in convs):
            raise UsageError(f"a {self.kind} BlockSpec needs two or more ConvShape convs; use BlockSpec.from_convs")
        if (self.kind == "ghost") != any(c.cat for c in convs):
            raise UsageError("a ghost BlockSpec has a concatenated convolution (cat > 0) and a chain has none; "
                             "use BlockSpec.from_convs")
        object.__setattr__(self, "convs", convs)
        derived = _summary(convs)
        got = (self.in_channels, self.hidden_channels, self.out_channels, self.kernel, self.stride)
        if got != derived:
            raise UsageError(f"chain summary {got} does not match its convs {derived}; use BlockSpec.from_convs")
        if self.projection and not self.residual:
            raise UsageError("a projection needs a skip connection (residual=True)")

    @classmethod
    def from_convs(
        cls,
        convs: tuple[ConvShape, ...] | list[ConvShape],
        *,
        padding: str,
        residual: bool,
        projection: bool,
        in_h: int,
        in_w: int,
        act: str | None = None,
        skip: tuple[ConvShape, ...] | list[ConvShape] = (),
    ) -> "BlockSpec":
        """The spec of a chain of convolutions, classified into its kind (named kinds keep their form); ``skip``: the
        convolutions of a projection skip path (one 1x1 is the plain ``proj``)."""
        convs = tuple(convs)
        stride = 1
        for c in convs:
            stride *= c.stride
        skip = _plain_skip(tuple(skip), convs[0].cin, convs[-1].out, stride) if convs else ()
        kind = classify_convs(convs, residual, projection, skip)
        cin, hidden, cout, kernel, stride = _summary(convs)
        if kind == "inverted_residual":
            hidden, kernel = convs[1].cin, convs[1].kernel
        elif kind == "depthwise_separable":
            hidden, kernel = convs[0].cin, convs[0].kernel
        elif kind == "bottleneck":
            hidden, kernel = convs[1].cin, convs[1].kernel
        elif kind == "basic":
            hidden, kernel = convs[0].cout, convs[0].kernel
        if kind not in CHAIN_KINDS:
            return cls(kind, cin, hidden, cout, kernel, stride, padding, residual, in_h, in_w, act)
        return cls(kind, cin, hidden, cout, kernel, stride, padding, residual, in_h, in_w, act, convs, projection, skip)

    @classmethod
    def one_conv(cls, cin: int, cout: int, kernel: int, stride: int, *, padding: str, in_h: int, in_w: int,
                 act: str | None = None) -> "BlockSpec":
        """One dense convolution from ``cin`` to ``cout`` channels with this square ``kernel``, ``stride`` and
        ``padding`` style at the input size ``in_h`` x ``in_w``, as a ``conv`` spec (no skip): the LUT key of what a
        span of blocks (`dsprof.models.spans.span_spec`), a crossing span or one unit of a block merges to (``act``:
        its removable activation where a block's own is kept after it)."""
        return cls("conv", cin, cout, cout, kernel, stride, padding, False, in_h, in_w, act)

    @property
    def out_h(self) -> int:
        """Output height, for both padding styles: ceil(in / stride)."""
        return -(-self.in_h // self.stride)

    @property
    def out_w(self) -> int:
        """Output width: ceil(in / stride)."""
        return -(-self.in_w // self.stride)

    @property
    def merged_kernel(self) -> int:
        """Kernel of the one convolution the block merges into (`composed`)."""
        return composed((c.kernel, c.stride) for c in self.convs)[0]

    def to_str(self) -> str:
        """The canonical string form (the key of measurement files and latency tables)."""
        act = f",act={self.act}" if self.act is not None else ""
        if self.kind in CHAIN_KINDS:
            res = "-".join(c.to_str() for c in self.skip) or ("proj" if self.projection else str(int(self.residual)))
            convs = "-".join(c.to_str() for c in self.convs)
            return f"{self.kind}(convs={convs},pad={self.padding},res={res},in={self.in_h}x{self.in_w}{act})"
        return (
            f"{self.kind}(cin={self.in_channels},hidden={self.hidden_channels},"
            f"cout={self.out_channels},k={self.kernel},s={self.stride},pad={self.padding},"
            f"res={int(self.residual)},in={self.in_h}x{self.in_w}{act})"
        )

    __str__ = to_str

    @classmethod
    def from_str(cls, text: str) -> "BlockSpec":
        """Parse the canonical string form; anything else is an error that shows the form."""
        text = text.strip()
        chain = _CHAIN.match(text)
        if chain is not None:
            convs = []
            for part in chain["convs"].split("-"):
                convs.append(_conv_shape(part, text))
            res = chain["res"]
            skip = [] if res in ("0", "1", "proj") else [_conv_shape(part, text) for part in res.split("-")]
            spec = cls.from_convs(
                convs, padding=chain["padding"], residual=res != "0", projection=res == "proj" or bool(skip),
                in_h=_int(chain["in_h"], text), in_w=_int(chain["in_w"], text), act=chain["act"], skip=skip,
            )
        else:
            match = _NAMED.match(text)
            if match is None:
                raise UsageError(
                    f"not a BlockSpec string: {text!r}; expected e.g. "
                    "'inverted_residual(cin=24,hidden=144,cout=32,k=3,s=2,pad=symmetric,res=0,in=112x112)'"
                )
            values = match.groupdict()
            kwargs: dict[str, object] = {}
            for f in fields(cls):
                raw = values.get(f.name)
                if f.name in ("kind", "padding", "act"):
                    kwargs[f.name] = raw
                elif f.name == "residual":
                    kwargs[f.name] = raw == "1"
                elif raw is not None:
                    kwargs[f.name] = _int(raw, text)
            spec = cls(**kwargs)  # type: ignore[arg-type]
        if spec.to_str() != text:
            raise UsageError(f"not a canonical BlockSpec string: {text!r} (canonical: {spec.to_str()!r})")
        return spec


def _conv_shape(part: str, text: str) -> ConvShape:
    m = _CONV.match(part)
    if m is None:
        raise UsageError(f"not a chain convolution {part!r} (expected e.g. 32x64k3s1g1) in {text!r}")
    return ConvShape(*(_int(v, text) for v in m.groups() if v is not None))


def _plain_skip(skip: tuple[ConvShape, ...], cin: int, cout: int, stride: int) -> tuple[ConvShape, ...]:
    """A skip path's convolutions, ``()`` where they are the one 1x1 projection (``proj``); checked against the block."""
    if not skip:
        return ()
    if not all(isinstance(c, ConvShape) for c in skip):
        raise UsageError("a skip path is a tuple of ConvShape")
    if skip == (ConvShape(cin, cout, 1, stride),):
        return ()
    total = 1
    for a, b in zip(skip, skip[1:]):
        if a.out != b.cin:
            raise UsageError(f"skip path convolutions do not chain: {a.to_str()} then {b.to_str()}")
    for c in skip:
        total *= c.stride
    if skip[0].cin != cin or skip[-1].out != cout or total != stride:
        raise UsageError(f"the skip path {'-'.join(c.to_str() for c in skip)} does not map {cin} channels to {cout} at "
                         f"stride {stride}")
    return skip


def composed(layers: Iterable[tuple[int, int]]) -> tuple[int, int]:
    """(kernel, stride) of the one convolution a chain of convolutions (kernel, stride), first to last, composes into:
    kernel 1 + sum((k_i - 1) * the stride before i), stride the product. The one rule for a block, a span and a
    crossing span (`dsprof.models.spans`)."""
    kernel, step = 1, 1
    for k, stride in layers:
        kernel += (k - 1) * step
        step *= stride
    return kernel, step


def _summary(convs: tuple[ConvShape, ...]) -> tuple[int, int, int, int, int]:
    """(in, hidden, out, kernel, stride) of a chain: hidden is the first conv's output (after its concatenation),
    kernel the largest, stride the product."""
    stride = 1
    for c in convs:
        stride *= c.stride
    return convs[0].cin, convs[0].out, convs[-1].out, max(c.kernel for c in convs), stride
