"""What gets timed: blocks in their variants, and whole models.

Variants of a block (DESIGN, "Workload"):

* ``original``: the block as built, eval mode, BatchNorm folded into its convolutions.
* ``merged``: one dense convolution with the block's input and output channels, kernel, stride and
  padding style, followed by ReLU6 (what the merge stage produces, paper Sec. 5 / Fig. 5).
* ``flops_matched``: one dense convolution of the block's kernel, stride and padding style whose
  channels are scaled so that its MACs match the block's within +-5 % (paper Sec. 3.2 / Tab. 1),
  followed by ReLU6. Rule (`flops_matched_channels`): input and output channels are scaled by one
  factor ``a = sqrt(MACs_block / (k^2 * cin * cout * Ho * Wo))``; the input channels are
  ``round(a * cin)``, then the output channels are chosen to the nearest integer that matches the
  block's MACs given those input channels, so the in/out ratio of the block is kept.
* ``fused-expand``, ``fused-project`` (a block of two removable activations, `dsprof.records.activations`): the
  block with one of them removed and the run of units beside it merged into one convolution, as `merge_model`
  deploys a plan at the level of activations (`deployed_partial`); a block without such a state has none. A block
  of more than two (up to `dsprof.records.activations.MAX_TIMED_ACTS`) has every partial state timed when either
  is asked, each named by the activations it keeps (``fused-010``: `dsprof.records.activations.partial_variant`).
* ``linear``: the block without its activations, not merged, as `merge_model` deploys it when it does not
  merge under a plan's default border and free activation (`deployed_linear`): its tail activation (ResNet's
  ReLU after the addition) or ReLU6 after it, and its padding back in place where that is exact (inverted
  residual, bottleneck), else done by its first convolution over a larger map (ResNet's basic block, VGG's
  3x3 pairs: the padding-in-front form, see docs/merging.md). Where that form is larger than the block as built
  (`dsprof.merging.block.deploys_alike` is False) and ``merged`` is timed, ``linear`` is timed too, asked or not:
  a plan that leaves the block unmerged runs that form, which its ``original`` entry does not price (MobileNetV4's
  blocks of two padded depthwise convolutions at 160 px on OpenVINO: up to twice the MACs; benchmarks/RESULTS.md,
  "Blocks left unmerged in a larger form"). So is a block holding an activation other than ReLU and ReLU6, which
  no runtime folds away for free (`dsprof.runtimes.FOLDED_ACTIVATIONS`: hardswish, SiLU).

Whole models: ``original`` (BatchNorm folded), ``merged`` (every block replaced by its merged
dense convolution) and ``flops_matched`` (every block replaced by a dense convolution, paper
Tab. 1). For the whole model the channels must chain from block to block, so the rule is one
factor ``a`` for the output channels of all blocks but the last (``round(a * cout_i)``; the last
keeps its channels so the head is untouched), chosen by bisection so that the model's total MACs
match the original's within +-5 %. Any other `nn.Module` can be timed as a whole model too.

BatchNorm is folded in every timed module, original and dense alike (DESIGN: fair timing).
"""

from __future__ import annotations

import contextlib
import copy
import io
import math
import warnings
from dataclasses import dataclass, field
from typing import Sequence

import torch
from torch import nn

from ..errors import MergeError, PlanError, UsageError
from ..merging.block import deployed_unmerged, deploys_alike, merge_linearized
from ..merging.fold import fold_batchnorm
from ..merging.linearize import linearize_block
from ..merging.model import merge_partial
from ..merging.partial import (PartialBlock, act_layout, act_layouts, crossing_modules, crossing_spec,
                               partial_block)
from ..merging.spans import SpanLinearized
from ..records.activations import (ActLayout, crossing_candidates, crossing_units, is_partial_variant, kept_runs,
                                   partial_states)
from ..models.spans import span_ranges, span_runs, span_spec
from ..names import BLOCK_VARIANTS, CROSSING_VARIANT, DEFAULT_BLOCK_VARIANTS, MODEL_VARIANTS
from ..runtimes import folds_activations
from ..models import (
    Block,
    BlockSpec,
    block_modules,
    replace_block,
    conv_macs,
    count_macs,
    count_params,
    find_blocks,
    first_conv_in_channels,
    input_size_of,
    own_chains,
    split_model,
)

__all__ = [
    "BLOCK_VARIANTS",
    "MODEL_VARIANTS",
    "MACS_TOLERANCE",
    "Workload",
    "block_workloads",
    "dense_conv",
    "dense_counterpart_model",
    "flops_matched_channels",
    "deployed_linear",
    "crossing_workloads",
    "deployed_crossing",
    "deployed_partial",
    "model_workload",
    "model_workloads",
    "span_workloads",
    "stem_head_workloads",
]

#: The flops_matched variant matches the block's (or model's) MACs within this relative tolerance.
MACS_TOLERANCE = 0.05


@dataclass
class Workload:
    """A module to time and what it is.

    ``scope`` is ``"block"``, ``"model"``, ``"stem"`` or ``"head"``; ``name`` the block's module path
    (``features.3``) or the model's name; ``spec`` the *original* block's `BlockSpec` (None for a model): together
    with ``variant`` it is the key a latency table uses. ``input_shape`` is (C, H, W) of what is
    timed (without the batch), ``macs`` and ``params`` of the timed module for one image;
    ``channels`` (in, out) of a dense replacement.
    """

    scope: str
    name: str
    variant: str
    module: nn.Module = field(repr=False)
    input_shape: tuple[int, int, int]
    macs: int
    params: int
    spec: BlockSpec | None = None
    index: int = -1
    channels: tuple[int, int] | None = None


def _tf_same_pads(size: int, kernel: int, stride: int) -> tuple[int, int]:
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def dense_conv(
    cin: int, cout: int, kernel: int, stride: int, padding: str = "symmetric", in_hw: tuple[int, int] | None = None
) -> nn.Sequential:
    """One dense convolution (with bias, as after BatchNorm folding) followed by ReLU6.

    ``padding`` is ``symmetric`` (k//2 on every side) or ``tf_same`` (TensorFlow 'SAME', which needs
    the input size ``in_hw`` to place its asymmetric zeros; an explicit zero pad goes in front).
    """
    if padding == "symmetric":
        return nn.Sequential(nn.Conv2d(cin, cout, kernel, stride, kernel // 2, bias=True), nn.ReLU6())
    if padding == "tf_same":
        if in_hw is None:
            raise UsageError("tf_same padding needs the input size in_hw")
        top, bottom = _tf_same_pads(in_hw[0], kernel, stride)
        left, right = _tf_same_pads(in_hw[1], kernel, stride)
        layers: list[nn.Module] = []
        if (top, bottom) == (left, right) and top == bottom:
            layers.append(nn.Conv2d(cin, cout, kernel, stride, top, bias=True))
        else:
            layers += [nn.ZeroPad2d((left, right, top, bottom)), nn.Conv2d(cin, cout, kernel, stride, 0, bias=True)]
        return nn.Sequential(*layers, nn.ReLU6())
    raise UsageError(f"unknown padding style {padding!r}; known: symmetric, tf_same")


def flops_matched_channels(spec: BlockSpec, block_macs: int) -> tuple[int, int]:
    """(in, out) channels of the dense k x k convolution whose MACs match ``block_macs``; see the module docstring."""
    out = (spec.out_h, spec.out_w)
    scale = math.sqrt(block_macs / conv_macs(spec.in_channels, spec.out_channels, spec.kernel, out))
    cin = max(1, round(scale * spec.in_channels))
    cout = max(1, round(block_macs / conv_macs(cin, 1, spec.kernel, out)))  # MACs per output channel
    return cin, cout


def deployed_linear(block: Block, index: int = 0) -> nn.Module:
    """``block`` (a block of the model as built) linearised and left unmerged in the form `merge_model` deploys
    it under a plan's default border (padding in front) and free activation (`dsprof.merging.deployed_unmerged`:
    the padding back in place where that is exact, else done by the first convolution over a larger map),
    BatchNorm folded, in eval mode: what the ``linear`` variant times. Raises `MergeError` for a block that
    cannot be linearised (a padding mode other than zeros)."""
    param = next(block.module.parameters())
    deployed = deployed_unmerged(linearize_block(block, index=index).to(param.device).eval())
    spec = block.spec
    example = torch.zeros(1, spec.in_channels, spec.in_h, spec.in_w, dtype=param.dtype, device=param.device)
    return fold_batchnorm(deployed, example).eval()


def deployed_partial(block: Block, acts: tuple[int, ...], index: int = 0) -> nn.Module:
    """``block`` with the activations ``acts`` marks 0 removed and its runs merged, as `merge_model` deploys it under
    a plan's default border (padding in front), BatchNorm folded, in eval mode: what the ``fused-expand`` and
    ``fused-project`` variants time."""
    param = next(block.module.parameters())
    part = partial_block(block, acts, lambda run: linearize_block(run, free_activation=None, index=index), index=index)
    part = part.to(param.device).eval()
    merge_partial(part, block.name)
    spec = block.spec
    example = torch.zeros(1, spec.in_channels, spec.in_h, spec.in_w, dtype=param.dtype, device=param.device)
    return fold_batchnorm(part, example).eval()


def deployed_crossing(blocks: list[Block], acts: list[tuple[int, ...]], span: tuple[int, int]) -> nn.Module:
    """Blocks ``span`` = [start, stop) of a plan with ``acts`` whose span crosses block borders (its end blocks keep
    some activations), as `merge_model` deploys them under a plan's default border (padding in front) and free
    activation: the first block's units before its last run, the span's one convolution, the last block's units after
    its first run (`dsprof.merging.partial.crossing_modules`), merged, BatchNorm folded, in eval mode: what the
    ``crossing`` variant times. Raises `PlanError`/`MergeError` where the span is not linear."""
    start, stop = span
    param = next(blocks[start].module.parameters())
    layouts = act_layouts(blocks)
    crossing_units(layouts, acts, span, spans=[span])
    if span_runs(blocks[start:stop], (0,) * (stop - start)) != [list(range(stop - start))]:
        raise MergeError(f"blocks {start}..{stop - 1} cannot merge as one span")
    linear = {i: linearize_block(blocks[i], index=i) for i in range(start, stop) if not any(acts[i])}
    slots = crossing_modules(blocks, acts, kept_runs(layouts, acts), span, linear,
                             lambda run, i: linearize_block(run, free_activation=None, index=i))
    parts = []
    for i in range(start, stop):
        module = slots[i].to(param.device).eval()
        if isinstance(module, PartialBlock):
            merge_partial(module, blocks[i].name)
        elif isinstance(module, SpanLinearized):
            module = merge_linearized(module)[0]
        parts.append(module)
    spec = blocks[start].spec
    example = torch.zeros(1, spec.in_channels, spec.in_h, spec.in_w, dtype=param.dtype, device=param.device)
    return fold_batchnorm(nn.Sequential(*parts), example).eval()


def crossing_workloads(model: nn.Module, max_len: int, input_size: tuple[int, int] | None = None) -> list[Workload]:
    """The crossing spans of 2..``max_len`` blocks as they deploy (`deployed_crossing`), keyed by what they deploy
    (`dsprof.merging.partial.crossing_spec`, variant ``crossing``), one per distinct key: those that
    `dsprof.records.activations.crossing_candidates` lists and whose blocks can cross as one; named ``first+last``."""
    input_size = input_size or input_size_of(model)
    blocks = find_blocks(model, input_size)
    layouts = act_layouts(blocks)
    kept = [(1,) * layout.n_acts for layout in layouts]
    out, seen = [], set()
    for (start, stop), inside in crossing_candidates(layouts, max_len):
        acts = kept[:start] + list(inside) + kept[stop:]
        spec = crossing_spec(blocks, acts, (start, stop))
        if spec in seen:
            continue
        try:
            module = deployed_crossing(blocks, acts, (start, stop))
        except (PlanError, MergeError):  # the blocks cannot cross as one (padding, a skip that is not the identity)
            continue
        seen.add(spec)
        shape = (spec.in_channels, spec.in_h, spec.in_w)
        name = f"{blocks[start].name}+{blocks[stop - 1].name}"
        out.append(Workload("block", name, CROSSING_VARIANT, module, shape, count_macs(module, shape[1:], shape[0]),
                            count_params(module), spec, -1))
    return out


def _check_macs(what: str, got: int, want: int) -> None:
    if abs(got - want) > MACS_TOLERANCE * want:
        raise UsageError(f"{what}: FLOPs-matched MACs {got} are not within 5 % of {want}; the channels are too few to match")


def _block_variants(variants: Sequence[str], block: Block) -> tuple[str, ...]:
    """The variants timed of ``block``: ``variants``, with ``linear`` added where ``merged`` is among them and the block
    linearised and left unmerged runs unlike as built, which only its own entry prices: it deploys in a larger form
    (padding in front over a larger map: `deploys_alike`), or it loses an activation that no runtime folds away for
    free (`dsprof.runtimes.FOLDED_ACTIVATIONS`: hardswish, SiLU)."""
    unlike = not deploys_alike(block) or not folds_activations(block)
    if "merged" in variants and "linear" not in variants and unlike:
        return (*variants, "linear")
    return tuple(variants)


def _with_states(variants: Sequence[str], layout: ActLayout) -> list[tuple[str, tuple[int, ...] | None]]:
    """The variants timed of a block with ``layout``, each with its partial state (None for a variant that is not
    partial): the variants asked, in order, a partial one (``fused-expand``, ``fused-project``) as the block's state
    of that name where it has one; a block of more than two removable activations has all its partial states
    (``fused-010``...: `partial_states`) in place of the first partial variant asked."""
    states = partial_states(layout)
    first = next((v for v in variants if is_partial_variant(v)), None)
    out: list[tuple[str, tuple[int, ...] | None]] = []
    for variant in variants:
        if not is_partial_variant(variant):
            out.append((variant, None))
        elif layout.n_acts == 2:
            if variant in states:
                out.append((variant, states[variant]))
        elif variant == first:
            out += states.items()
    return out


def block_workloads(
    model: nn.Module,
    variants: tuple[str, ...] = DEFAULT_BLOCK_VARIANTS,
    input_size: tuple[int, int] | None = None,
    blocks: list[Block] | None = None,
) -> list[list[Workload]]:
    """For every block of ``model``, its workloads in ``variants``: one list per block, in block order.

    The model is BatchNorm-folded once (a copy); the block's original is taken from the folded copy.
    """
    unknown = [v for v in variants if v not in BLOCK_VARIANTS]
    if unknown:
        raise UsageError(f"unknown block variant(s) {unknown}; known: {', '.join(BLOCK_VARIANTS)}")
    input_size = input_size or input_size_of(model)
    blocks = blocks if blocks is not None else find_blocks(model, input_size)
    folded = fold_batchnorm(model, torch.zeros(1, first_conv_in_channels(model), *input_size)).eval()
    groups = []
    for index, (block, original) in enumerate(zip(blocks, block_modules(folded, [b.name for b in blocks]))):
        spec = block.spec
        in_shape = (spec.in_channels, spec.in_h, spec.in_w)
        block_macs = count_macs(original, (spec.in_h, spec.in_w), spec.in_channels)
        group = []
        for variant, acts in _with_states(_block_variants(variants, block), act_layout(block)):
            channels = None
            if variant == "original":
                module, shape = original, in_shape
            elif variant == "linear":
                try:
                    module, shape = deployed_linear(block, index), in_shape
                except MergeError as exc:  # it cannot be linearised, so it never runs unmerged either: say so
                    warnings.warn(f"block {block.name}: {exc}; its linear workload is skipped", UserWarning, stacklevel=2)
                    continue
            elif acts is not None:
                try:
                    module, shape = deployed_partial(block, acts, index), in_shape
                except MergeError as exc:
                    warnings.warn(f"block {block.name}: {exc}; its {variant} workload is skipped", UserWarning, stacklevel=2)
                    continue
            else:
                if variant == "merged":  # what the merge produces: the chain's composite kernel
                    cin, cout, kernel = spec.in_channels, spec.out_channels, spec.merged_kernel
                else:  # paper Tab. 1: the block's own kernel, channels scaled to its MACs
                    cin, cout = flops_matched_channels(spec, block_macs)
                    kernel = spec.kernel
                module = dense_conv(cin, cout, kernel, spec.stride, spec.padding, (spec.in_h, spec.in_w))
                shape, channels = (cin, spec.in_h, spec.in_w), (cin, cout)
            module = module.eval()
            macs = count_macs(module, shape[1:], shape[0])
            if variant == "flops_matched":
                try:
                    _check_macs(f"block {block.name}", macs, block_macs)
                except ValueError as exc:  # too few channels at this size: skip this one workload, say so
                    warnings.warn(f"{exc}; its flops_matched workload is skipped", UserWarning, stacklevel=2)
                    continue
            group.append(Workload("block", block.name, variant, module, shape, macs, count_params(module), spec, index, channels))
        groups.append(group)
    return groups


def dense_counterpart_model(
    model: nn.Module, variant: str = "flops_matched", input_size: tuple[int, int] | None = None
) -> nn.Module:
    """A BatchNorm-folded copy of ``model`` with every block replaced by one dense convolution + ReLU6.

    ``variant="merged"``: each dense convolution keeps its block's channels. ``"flops_matched"``:
    the output channels of all blocks but the last are scaled by one factor chosen so that the
    model's MACs match the original's within +-5 % (paper Tab. 1; module docstring).
    """
    if variant not in ("merged", "flops_matched"):
        raise UsageError(f"dense counterparts are 'merged' or 'flops_matched', not {variant!r}")
    input_size = input_size or input_size_of(model)
    in_ch = first_conv_in_channels(model)
    blocks = find_blocks(model, input_size)
    if not blocks:
        raise UsageError("the model has no blocks to replace")
    folded = fold_batchnorm(model, torch.zeros(1, in_ch, *input_size)).eval()

    def channels(scale: float | None) -> list[tuple[int, int]]:
        chain, cin = [], blocks[0].spec.in_channels
        for i, block in enumerate(blocks):
            s = block.spec
            last = i == len(blocks) - 1
            cout = s.out_channels if scale is None or last else max(1, round(scale * s.out_channels))
            chain.append((cin, cout))
            cin = cout
        return chain

    def build(scale: float | None) -> nn.Module:
        dense = own_chains(copy.deepcopy(folded), blocks)  # chains no module owns become modules
        for block, (cin, cout) in zip(blocks, channels(scale)):
            s = block.spec
            kernel = s.merged_kernel if scale is None else s.kernel
            replace_block(dense, block.name, dense_conv(cin, cout, kernel, s.stride, s.padding, (s.in_h, s.in_w)))
        return dense.eval()

    if variant == "merged":
        return build(None)
    if any(a.spec.out_channels != b.spec.in_channels for a, b in zip(blocks, blocks[1:])):
        raise UsageError(
            "a FLOPs-matched whole model scales the channels from block to block, so it needs blocks that follow one "
            "another (this model's blocks do not chain: branches or refused blocks sit between them)"
        )
    target = count_macs(folded, input_size, in_ch)
    # MACs outside the blocks (stem, head) stay; the blocks' dense MACs are plain arithmetic.
    outside = target - sum(count_macs(b.module, (b.spec.in_h, b.spec.in_w), b.spec.in_channels) for b in blocks)

    def macs(scale: float) -> int:
        return outside + sum(
            conv_macs(cin, cout, b.spec.kernel, (b.spec.out_h, b.spec.out_w)) for b, (cin, cout) in zip(blocks, channels(scale))
        )

    lo, hi = 0.01, 1.0
    while macs(hi) < target and hi < 64:
        hi *= 2
    best = hi
    for _ in range(60):
        mid = (lo + hi) / 2
        m = macs(mid)
        if abs(m - target) < abs(macs(best) - target):
            best = mid
        if abs(m - target) <= 0.001 * target:
            break
        lo, hi = (mid, hi) if m < target else (lo, mid)
    dense = build(best)
    outside_layer = _channel_break(dense, torch.zeros(1, in_ch, *input_size))
    if outside_layer is not None:
        raise UsageError(
            f"a FLOPs-matched whole model scales the channels from block to block, but {outside_layer}, which sits "
            "between two blocks and is no block itself (a part refused as a block, e.g. a squeeze-excitation, or "
            "convolutions no module owns), takes the original channels"
        )
    _check_macs("whole model", count_macs(dense, input_size, in_ch), target)  # counted, not trusted
    dense.dsprof_dense_scale = best
    return dense


def _channel_break(model: nn.Module, x: torch.Tensor) -> str | None:
    """The name of the layer where a forward pass of ``model`` on ``x`` fails (a shape mismatch), or None."""
    entered: list[str] = []
    hooks = [m.register_forward_pre_hook(lambda _m, _i, name=name: entered.append(name))
             for name, m in model.named_modules() if name and not any(True for _ in m.children())]
    try:  # a traced model's failure is printed by torch.fx to stderr before it raises: the caller says it in one line
        with torch.no_grad(), contextlib.redirect_stderr(io.StringIO()):
            model(x)
    except RuntimeError:
        return entered[-1] if entered else "a layer"
    finally:
        for h in hooks:
            h.remove()
    return None


def model_workload(
    module: nn.Module,
    name: str,
    variant: str = "original",
    input_size: tuple[int, int] | None = None,
    fold: bool = True,
) -> Workload:
    """Any ``nn.Module`` as a whole-model workload (BatchNorm folded unless ``fold=False``).

    Use it for a merged model from issue #4, a model built from a plan, or your own network.
    """
    input_size = input_size or input_size_of(module)
    in_ch = first_conv_in_channels(module)
    if fold:
        module = fold_batchnorm(module, torch.zeros(1, in_ch, *input_size))
    module = module.eval()
    return Workload(
        "model", name, variant, module, (in_ch, *input_size), count_macs(module, input_size, in_ch), count_params(module)
    )


def model_workloads(
    model: nn.Module,
    name: str,
    variants: tuple[str, ...] = ("original", "flops_matched"),
    input_size: tuple[int, int] | None = None,
) -> list[Workload]:
    """The whole ``model`` in ``variants`` (original, merged, flops_matched), one group to interleave."""
    unknown = [v for v in variants if v not in MODEL_VARIANTS]
    if unknown:
        raise UsageError(f"unknown model variant(s) {unknown}; known: {', '.join(MODEL_VARIANTS)}")
    input_size = input_size or input_size_of(model)
    out = []
    for variant in variants:
        if variant == "original":
            out.append(model_workload(model, name, "original", input_size))
        else:
            try:
                dense = dense_counterpart_model(model, variant, input_size)
            except ValueError as exc:  # e.g. blocks that do not chain: this variant cannot be built, say so
                warnings.warn(f"{name}: no whole-model {variant} variant: {exc}", UserWarning, stacklevel=2)
                continue
            out.append(model_workload(dense, name, variant, input_size, fold=False))
    return out


def stem_head_workloads(model: nn.Module, name: str, input_size: tuple[int, int] | None = None) -> list[Workload]:
    """The original model's stem and head (`dsprof.models.split_model`), BatchNorm folded, as
    workloads of scope ``stem`` and ``head``; none for an architecture without a known split."""
    input_size = input_size or input_size_of(model)
    in_ch = first_conv_in_channels(model)
    x = torch.zeros(1, in_ch, *input_size)
    folded = fold_batchnorm(model, x).eval()
    parts = split_model(folded, input_size)
    if parts is None:
        return []
    with torch.no_grad():  # the head's input: the last block's output (split_model checked they chain)
        h = parts.stem(x)
        for block in find_blocks(folded, input_size):  # the folded model's own blocks: their modules are its modules
            h = block.module(h)
    c, hh, ww = h.shape[1:]
    return [
        Workload("stem", name, "original", parts.stem, (in_ch, *input_size), count_macs(parts.stem, input_size, in_ch),
                 count_params(parts.stem)),
        Workload("head", name, "original", parts.head, (c, hh, ww), count_macs(parts.head, (hh, ww), c),
                 count_params(parts.head)),
    ]



def span_workloads(model: nn.Module, max_len: int, input_size: tuple[int, int] | None = None) -> list[Workload]:
    """The dense convolution (+ ReLU6, as every merged variant) that each span of 2..``max_len`` consecutive blocks
    merges into (`dsprof.merging.spans`), as ``merged`` block workloads keyed by the convolution's ``conv`` spec
    and named ``first+last``; one per distinct spec."""
    input_size = input_size or input_size_of(model)
    blocks = find_blocks(model, input_size)
    out, seen = [], set()
    for start, stop in span_ranges(blocks, (0,) * len(blocks), max_len):
        spec = span_spec([blocks[i].spec for i in range(start, stop)])
        if spec in seen:
            continue
        seen.add(spec)
        module = dense_conv(spec.in_channels, spec.out_channels, spec.kernel, spec.stride, spec.padding,
                            (spec.in_h, spec.in_w)).eval()
        shape = (spec.in_channels, spec.in_h, spec.in_w)
        name = f"{blocks[start].name}+{blocks[stop - 1].name}"
        out.append(Workload("block", name, "merged", module, shape, count_macs(module, shape[1:], shape[0]),
                            count_params(module), spec, -1, (spec.in_channels, spec.out_channels)))
    return out
