"""`BlockSpec`: what a block *is*, independent of its weights, with one canonical string form.

The string form is the key that measurement files and latency tables use, so it must be
stable and parse back exactly: ``BlockSpec.from_str(spec.to_str()) == spec``.

Example::

    inverted_residual(cin=24,hidden=144,cout=32,k=3,s=2,pad=symmetric,res=0,in=112x112)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields

__all__ = ["BlockSpec", "BLOCK_KINDS", "PADDING_STYLES"]

#: Block kinds dsprof knows. ``inverted_residual`` is pw-dw-pw (MobileNetV2, EfficientNet);
#: ``depthwise_separable`` is dw-pw (the expansion-1 block); ``bottleneck`` and ``basic`` are
#: the ResNet blocks; ``conv`` is one plain convolution (a dense replacement, or a VGG layer).
BLOCK_KINDS = ("inverted_residual", "depthwise_separable", "bottleneck", "basic", "conv")

#: ``symmetric``: k//2 zeros on every side (PyTorch convention). ``tf_same``: TensorFlow 'SAME',
#: which pads asymmetrically (more at the bottom/right) when the stride does not divide evenly.
PADDING_STYLES = ("symmetric", "tf_same")

_PATTERN = re.compile(
    r"^(?P<kind>[a-z_]+)\(cin=(?P<in_channels>\d+),hidden=(?P<hidden_channels>\d+),"
    r"cout=(?P<out_channels>\d+),k=(?P<kernel>\d+),s=(?P<stride>\d+),pad=(?P<padding>[a-z_]+),"
    r"res=(?P<residual>[01]),in=(?P<in_h>\d+)x(?P<in_w>\d+)\)$"
)


@dataclass(frozen=True)
class BlockSpec:
    """Shape of one block: channels, kernel, stride, padding, residual and input size.

    ``hidden_channels`` is the width inside the block (the expanded width of an inverted
    residual block, the bottleneck width of a ResNet block, ``in_channels`` for a depthwise-
    separable block, ``out_channels`` for a plain conv). ``kernel`` is the spatial kernel of
    the block's main (depthwise or 3x3) convolution; ``in_h``/``in_w`` the block's input size.
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

    def __post_init__(self) -> None:
        if self.kind not in BLOCK_KINDS:
            raise ValueError(f"unknown block kind {self.kind!r}; known kinds: {', '.join(BLOCK_KINDS)}")
        if self.padding not in PADDING_STYLES:
            raise ValueError(
                f"unknown padding style {self.padding!r}; known styles: {', '.join(PADDING_STYLES)}"
            )
        for f in ("in_channels", "hidden_channels", "out_channels", "kernel", "stride", "in_h", "in_w"):
            value = getattr(self, f)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"BlockSpec.{f} must be a positive int, got {value!r}")
        if not isinstance(self.residual, bool):
            raise ValueError(f"BlockSpec.residual must be a bool, got {self.residual!r}")

    @property
    def out_h(self) -> int:
        """Output height, for both padding styles: ceil(in / stride)."""
        return -(-self.in_h // self.stride)

    @property
    def out_w(self) -> int:
        """Output width: ceil(in / stride)."""
        return -(-self.in_w // self.stride)

    def to_str(self) -> str:
        """The canonical string form (the key of measurement files and latency tables)."""
        return (
            f"{self.kind}(cin={self.in_channels},hidden={self.hidden_channels},"
            f"cout={self.out_channels},k={self.kernel},s={self.stride},pad={self.padding},"
            f"res={int(self.residual)},in={self.in_h}x{self.in_w})"
        )

    __str__ = to_str

    @classmethod
    def from_str(cls, text: str) -> "BlockSpec":
        """Parse the canonical string form; anything else is an error that shows the form."""
        match = _PATTERN.match(text.strip())
        if match is None:
            raise ValueError(
                f"not a BlockSpec string: {text!r}; expected e.g. "
                "'inverted_residual(cin=24,hidden=144,cout=32,k=3,s=2,pad=symmetric,res=0,in=112x112)'"
            )
        values = match.groupdict()
        kwargs: dict[str, object] = {}
        for f in fields(cls):
            raw = values[f.name]
            if f.name in ("kind", "padding"):
                kwargs[f.name] = raw
            elif f.name == "residual":
                kwargs[f.name] = raw == "1"
            else:
                # Reject leading zeros so that one spec has exactly one string.
                if raw != str(int(raw)):
                    raise ValueError(f"not a canonical BlockSpec string (leading zero in {f.name}): {text!r}")
                kwargs[f.name] = int(raw)
        return cls(**kwargs)  # type: ignore[arg-type]
