"""Block discovery on the traced graph, for networks nobody tuned dsprof for.

Every expected block list below comes from reading the architecture's source (the file and table
named in each comment), not from dsprof's output: the block's module name, its kind and whether its
input is added back. The rules applied in the reading (docs/any-cnn.md): a *unit* is a Conv2d with
its BatchNorm and removable activation; a *chain* is a run of units whose intermediate tensors each
have one consumer, optionally closed by the residual addition of its input; a chain of >= 2
convolutions owned by one module (plain Sequentials skipped), or by a run of whole children of an
nn.Sequential, is a block, split at module boundaries; a chain of >= 2 convolutions that no module owns
is a block named ``first..last`` after its convolutions; squeeze-excitation refuses the whole block, and
a module with >= 2 convolutions and no block in it is refused too. Random weights, nothing downloaded, 64x64 inputs.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import pytest
import timm
import torch
import torchvision.models as tvm

from dsprof.models import UnsupportedBlockWarning, discover_blocks, find_blocks, get_model, list_models
from models.csp import CSPClassifier

RES = (64, 64)
IR, DS, BOT, BASIC, CHAIN = "inverted_residual", "depthwise_separable", "bottleneck", "basic", "chain"
SE = "squeeze-excitation"


@dataclass(frozen=True)
class Expected:
    blocks: list[tuple[str, str, bool]]  # (module name, kind, residual), in execution order
    refused: list[tuple[str, str | tuple[str, ...] | None]]  # (module name, substring(s) of the reason or None), any order


def stages(prefix: str, repeats: list[int], kinds: list[str], first_residual: list[bool] | None = None):
    """Blocks ``{prefix}.{stage}.{i}``: a stage's first block changes channels or stride (no residual,
    unless ``first_residual`` says so), the repeats that follow keep both (residual)."""
    first_residual = first_residual or [False] * len(repeats)
    return [
        (f"{prefix}.{s}.{i}", kind, first if i == 0 else True)
        for s, (n, kind, first) in enumerate(zip(repeats, kinds, first_residual))
        for i in range(n)
    ]


def mbv2_torchvision(depths=(1, 2, 3, 4, 3, 3, 1)) -> Expected:
    # torchvision/models/mobilenetv2.py: features.0 is the stem (one conv, feeds only features.1, so no
    # block: chains split at module boundaries), then one InvertedResidual per row of the (t, c, n, s)
    # table; t=1 (stage 0) has no expansion conv (dw -> pw). use_res_connect = stride 1 and inp == oup:
    # false for each stage's first block (channels change: 32->16, 16->24, ..., 64->96 at stride 1).
    names = [f"features.{i + 1}" for i in range(sum(depths))]
    flags = [(DS if s == 0 else IR, i > 0) for s, n in enumerate(depths) for i in range(n)]
    return Expected([(name, kind, res) for name, (kind, res) in zip(names, flags)], [])


def timm_ds_ir(repeats: list[int]) -> Expected:
    # timm/models/efficientnet.py _gen_mobilenet_v2 / _gen_efficientnet_lite / _gen_mnasnet_b1: stage 0 is
    # one 'ds' block (DepthwiseSeparableConv, stem 32 -> 16: no skip), the others 'ir' stages; has_skip =
    # stride 1 and in == out (and not noskip): the repeats after each stage's first block. The stem
    # (conv_stem, bn1) are children of the EfficientNet module, not of a Sequential: one conv, no block.
    return Expected(stages("blocks", repeats, [DS] + [IR] * (len(repeats) - 1)), [])


def lite_repeats(depth_multiplier: float) -> list[int]:
    # _gen_efficientnet_lite: repeats 1,2,2,3,3,4,1; decode_arch_def(..., fix_first_last=True) keeps the
    # first and last stage, _scale_stage_depth scales the others with ceil (lite0..4: 1.0 1.1 1.2 1.4 1.8).
    scaled = {1.0: [2, 2, 3, 3, 4], 1.1: [3, 3, 4, 4, 5], 1.2: [3, 3, 4, 4, 5], 1.4: [3, 3, 5, 5, 6], 1.8: [4, 4, 6, 6, 8]}
    return [1, *scaled[depth_multiplier], 1]


LITE_DEPTH = {0: 1.0, 1: 1.1, 2: 1.2, 3: 1.4, 4: 1.8}
# Paper Tab. 8 has 16 entries for EfficientNet-Lite0 and 24 for Lite3: the reading agrees.
assert sum(lite_repeats(1.0)) == 16 and sum(lite_repeats(1.4)) == 24


def resnet(layers: list[int], kind: str) -> Expected:
    # torchvision/models/resnet.py: the stem conv1 ends at the max-pool; every BasicBlock (conv1 3x3 ->
    # conv2 3x3) and Bottleneck (1x1 -> 3x3 -> 1x1) adds its input back (identity or the downsample
    # conv+BN projection), then a ReLU; the block's output is read twice by the next block.
    return Expected([(f"layer{L + 1}.{i}", kind, True) for L, n in enumerate(layers) for i in range(n)], [])


def vgg(cfg: list, batch_norm: bool) -> Expected:
    # torchvision/models/vgg.py make_layers: features is one flat Sequential of conv(, BN), ReLU and
    # max-pool children; a max-pool ends a chain, so each run of >= 2 convs between pools is a block
    # named by its slice of children (conv 3x3 -> conv 3x3, no residual: kind chain).
    per_conv = 3 if batch_norm else 2
    blocks, index, run_start, run_convs = [], 0, 0, 0
    for v in cfg + ["M"]:
        if v == "M":
            if run_convs >= 2:
                blocks.append((f"features[{run_start}:{index}]", CHAIN, False))
            index, run_start, run_convs = index + 1, index + 1, 0
        else:
            index, run_convs = index + per_conv, run_convs + 1
    return Expected(blocks, [])


VGG_CFGS = {  # torchvision/models/vgg.py cfgs "A" (VGG-11) and "B" (VGG-13)
    "vgg11": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "vgg13": [64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
}
RESNET_LAYERS = {18: [2, 2, 2, 2], 34: [3, 4, 6, 3], 50: [3, 4, 6, 3], 101: [3, 4, 23, 3], 152: [3, 8, 36, 3]}


def zoo_expected(name: str) -> Expected:
    """The reading for each model of `dsprof.models.list_models()`."""
    if name == "mobilenet_v2":
        return mbv2_torchvision()
    if name in ("mobilenetv2_100", "mobilenetv2_140"):  # _gen_mobilenet_v2: depth multiplier 1.0
        return timm_ds_ir([1, 2, 3, 4, 3, 3, 1])
    if name.removeprefix("tf_").startswith("efficientnet_lite"):
        return timm_ds_ir(lite_repeats(LITE_DEPTH[int(name[-1])]))
    if name.startswith("resnet"):
        depth = int(name.removeprefix("resnet"))
        return resnet(RESNET_LAYERS[depth], BASIC if depth < 50 else BOT)
    if name.startswith("vgg"):
        return vgg(VGG_CFGS[name.removesuffix("_bn")], name.endswith("_bn"))
    raise AssertionError(f"no reading of {name!r} in this test: read its architecture and add one")


def mnasnet_torchvision() -> Expected:
    # torchvision/models/mnasnet.py MNASNet.__init__: layers[0:8] is a flat run of Sequential children
    # (conv 3x3 s2, BN, ReLU, depthwise 3x3, BN, ReLU, conv 1x1, BN): stem + depthwise + pointwise, 3 convs,
    # the first dense 3x3, so kind chain; then _stack(...) x6 with repeats 3,3,3,2,4,1 of _InvertedResidual
    # (1x1 -> dw -> 1x1 in a plain Sequential `layers`; apply_residual = in == out and stride 1, i.e. every
    # repeat after a stack's first). layers[14:17] (1x1 conv to 1280) is one conv before the mean: no block.
    stacks = [(f"layers.{8 + s}.{i}", IR, i > 0) for s, n in enumerate([3, 3, 3, 2, 4, 1]) for i in range(n)]
    return Expected([("layers[0:8]", CHAIN, False)] + stacks, [])


def mobilenet_v3(arch: str) -> Expected:
    # torchvision/models/mobilenetv3.py _mobilenet_v3_conf rows (input, kernel, expanded, out, use_se, act,
    # stride); features.0 is the stem, features.k the k-th row's InvertedResidual (expand conv only when
    # expanded != input, so rows with expanded == input are dw -> pw); use_res_connect = stride 1 and
    # input == out. use_se rows multiply by a Hardsigmoid gate of their own pooled tensor (block.2, after the expand
    # block.0 and the depthwise block.1): the gate and the projection after it stay, and the expand -> depthwise chain
    # before it is a block, the run block[0:2] of the row's Sequential (issue #47), kind chain, never residual. A
    # use_se row without expansion (small's first) has only its depthwise before the gate: the stem features.0 feeds
    # it alone, so stem -> depthwise is a chain that no module owns, features.0.0..features.1.block.0.0.
    rows = {
        "large": [(16, 16, 16, False, 1), (16, 64, 24, False, 2), (24, 72, 24, False, 1), (24, 72, 40, True, 2),
                  (40, 120, 40, True, 1), (40, 120, 40, True, 1), (40, 240, 80, False, 2), (80, 200, 80, False, 1),
                  (80, 184, 80, False, 1), (80, 184, 80, False, 1), (80, 480, 112, True, 1), (112, 672, 112, True, 1),
                  (112, 672, 160, True, 2), (160, 960, 160, True, 1), (160, 960, 160, True, 1)],
        "small": [(16, 16, 16, True, 2), (16, 72, 24, False, 2), (24, 88, 24, False, 1), (24, 96, 40, True, 2),
                  (40, 240, 40, True, 1), (40, 240, 40, True, 1), (40, 120, 48, True, 1), (48, 144, 48, True, 1),
                  (48, 288, 96, True, 2), (96, 576, 96, True, 1), (96, 576, 96, True, 1)],
    }[arch]
    blocks = []
    for k, (cin, expanded, cout, use_se, stride) in enumerate(rows, start=1):
        if use_se and expanded == cin:
            blocks.append(("features.0.0..features.1.block.0.0", CHAIN, False))
        elif use_se:
            blocks.append((f"features.{k}.block[0:2]", CHAIN, False))
        else:
            blocks.append((f"features.{k}", DS if expanded == cin else IR, stride == 1 and cin == cout))
    return Expected(blocks, [])


def shufflenet_v2_x1_0() -> Expected:
    # torchvision/models/shufflenetv2.py: stages_repeats [4, 8, 4]. A stride-2 unit runs branch1 (dw 3x3 s2,
    # BN; 1x1, BN, ReLU) then branch2 (1x1, BN, ReLU; dw 3x3; 1x1, BN, ReLU) on the same input and
    # concatenates them; a stride-1 unit chunks its input, runs branch2 on one half and concatenates.
    # chunk/cat/channel_shuffle end chains, each branch Sequential owns its chain exactly: one block per
    # branch, none with a residual; the units hold blocks, so nothing is refused. conv1 ends at the max-pool,
    # conv5 reads the shuffled output: single convs.
    blocks = []
    for stage, repeats in zip((2, 3, 4), (4, 8, 4)):
        blocks += [(f"stage{stage}.0.branch1", DS, False), (f"stage{stage}.0.branch2", IR, False)]
        blocks += [(f"stage{stage}.{i}.branch2", IR, False) for i in range(1, repeats)]
    return Expected(blocks, [])


def fbnetc_100() -> Expected:
    # timm/models/efficientnet.py _gen_fbnetc: stem 16, stages of 'ir' blocks (timm InvertedResidual: conv_pw
    # even at e1, then dw, then conv_pwl). has_skip = stride 1 and in == out: stage 0 (16 -> 16, s1) skips;
    # each later stage's first block changes channels (and stride), the rest keep them (stage 4's e3 block
    # too). Repeats 1, 1+2, 4, 1+1+2, 3+1, 4, 1.
    first = [True, False, False, False, False, False, False]
    return Expected(stages("blocks", [1, 3, 4, 4, 4, 4, 1], [IR] * 7, first), [])


def efficientnet_b0() -> Expected:
    # timm _gen_efficientnet: every block string carries se0.25 (SqueezeExcite: x * sigmoid(conv(mean(x)))), repeats
    # 1,2,2,3,3,4,1. The gate and the projection conv_pwl after it stay; before the gate (issue #47): in the 15 'ir'
    # blocks the chain conv_pw -> conv_dw, owned by no module (the block also holds the gate), so named first..last;
    # in the 'ds' block 0.0 only conv_dw, which conv_stem alone feeds: the chain conv_stem..blocks.0.0.conv_dw. The
    # last block's conv_pwl (no activation) alone feeds conv_head: a chain of two 1x1s, blocks.6.0.conv_pwl..conv_head.
    # Nothing is refused.
    irs = [name for name, _, _ in stages("blocks", [1, 2, 2, 3, 3, 4, 1], [IR] * 7)][1:]
    return Expected([("conv_stem..blocks.0.0.conv_dw", CHAIN, False)]
                    + [(f"{name}.conv_pw..{name}.conv_dw", CHAIN, False) for name in irs]
                    + [("blocks.6.0.conv_pwl..conv_head", CHAIN, False)], [])


def ghostnet_100() -> Expected:
    # timm/models/ghostnet.py cfgs (k, mid, out, se, stride) per stage, 16 GhostBottlenecks named blocks.{stage}.{i}:
    # ghost1 (GhostModule: primary 1x1 + BN + ReLU, cheap depthwise 3x3 + BN + ReLU, cat, slice) -> [conv_dw + bn_dw
    # at stride 2] -> [SE] -> ghost2 (the same, no activation) + shortcut (empty, or dw k s + BN + 1x1 + BN where the
    # shape changes). The concatenation after its own input is part of the chain (issue #47):
    # - no SE (0.0, 1.0, 2.0, 5.0, 6.0, 6.1, 6.2, 8.0, 8.2): the whole bottleneck, 4 convolutions (5 with conv_dw at
    #   stride 2) + its skip: the input, or (1.0, 5.0) the dw + 1x1 path, which merges with it;
    # - SE (3.0, 4.0, 6.3, 6.4, 7.0, 8.1, 8.3): ghost1 before the gate (at stride 2 conv_dw is alone between them) and
    #   ghost2 after it, each a block of its own (no skip: the addition reads the bottleneck's input); a dw + 1x1 skip
    #   path there (3.0, 6.3, 7.0) is a depthwise-separable chain of its own.
    # A Ghost bottleneck is kind "ghost" (a chain with a concatenation). Nothing is refused.
    G = "ghost"
    blocks: list[tuple[str, str, bool]] = []
    for name, se, projection in [("0.0", False, False), ("1.0", False, True), ("2.0", False, False),
                                 ("3.0", True, True), ("4.0", True, False), ("5.0", False, True), ("6.0", False, False),
                                 ("6.1", False, False), ("6.2", False, False), ("6.3", True, True), ("6.4", True, False),
                                 ("7.0", True, True), ("8.0", False, False), ("8.1", True, False), ("8.2", False, False),
                                 ("8.3", True, False)]:
        if se:
            blocks += [(f"blocks.{name}.ghost1", G, False), (f"blocks.{name}.ghost2", G, False)]
        else:
            blocks.append((f"blocks.{name}", G, True))
        if se and projection:
            blocks.append((f"blocks.{name}.shortcut", DS, False))
    return Expected(blocks, [])


def csp(sppf: bool = True) -> Expected:
    # tests/models/csp.py (its docstring walks through every part): backbone[0:2] is the stem Conv and the
    # first downsampling Conv (a chain of 2 whole Sequential children); each residual Bottleneck of the C3s
    # (repeats 1, 2, 3, 1) is 1x1 -> 3x3 plus its input. Each C3's cv3 with the Conv (or SPPF's cv1) it alone
    # feeds is a 2-conv chain split between two children of `backbone` that no module owns: a block named
    # after its first and last convolutions, gathered by graph surgery. SPPF, 2 convs and no block of its own
    # (its cv1 feeds the pool and the cat), is refused.
    blocks = [("backbone[0:2]", CHAIN, False)]
    for c3, n in zip((2, 4, 6, 8), (1, 2, 3, 1)):
        blocks += [(f"backbone.{c3}.m.{i}", CHAIN, True) for i in range(n)]
        if c3 < 8:
            blocks.append((f"backbone.{c3}.cv3.conv..backbone.{c3 + 1}.conv", CHAIN, False))
    if sppf:
        blocks.append(("backbone.8.cv3.conv..backbone.9.cv1.conv", CHAIN, False))
    return Expected(blocks, [("backbone.9", None)] if sppf else [])


def densenet121() -> Expected:
    # torchvision/models/densenet.py: features.denseblock1..4 (block_config 6, 12, 24, 16) hold _DenseLayers whose
    # bn_function runs torch.cat(inputs) -> norm1 -> relu1 -> conv1 (1x1), then forward norm2 -> relu2 -> conv2 (3x3):
    # the chain conv1 -> conv2 (1x1 -> 3x3, no skip) is a pre-activation layer's tail that the layer does not own
    # exactly (it also holds the cat and norm1 + relu1), so it is a chain no module owns, named conv1..conv2; the
    # transitions (BN, ReLU, one conv, pool) and conv0 are single convolutions, the dense blocks (nn.ModuleDict)
    # and `features` (nn.Sequential) containers. Nothing is refused.
    layers = [f"features.denseblock{b + 1}.denselayer{i + 1}" for b, n in enumerate([6, 12, 24, 16]) for i in range(n)]
    return Expected([(f"{layer}.conv1..{layer}.conv2", CHAIN, False) for layer in layers], [])


# Built with a 10-class head (torchvision's and timm's `num_classes`): every reading below is of the convolutions before
# the classifier, which the head's size leaves as they are; a 1000-class head only costs its random initialisation
OTHER_MODELS = {
    "tv_mnasnet0_5": (lambda: tvm.mnasnet0_5(weights=None, num_classes=10), mnasnet_torchvision),
    "tv_mnasnet1_0": (lambda: tvm.mnasnet1_0(weights=None, num_classes=10), mnasnet_torchvision),
    "tv_mobilenet_v3_small": (lambda: tvm.mobilenet_v3_small(weights=None, num_classes=10),
                              lambda: mobilenet_v3("small")),
    "tv_mobilenet_v3_large": (lambda: tvm.mobilenet_v3_large(weights=None, num_classes=10),
                              lambda: mobilenet_v3("large")),
    "tv_shufflenet_v2_x1_0": (lambda: tvm.shufflenet_v2_x1_0(weights=None, num_classes=10), shufflenet_v2_x1_0),
    # _gen_mnasnet_b1: ds (noskip) + ir repeats 3,3,3,2,4,1 (the last noskip).
    "timm_mnasnet_100": (lambda: timm.create_model("mnasnet_100", pretrained=False, num_classes=10),
                         lambda: timm_ds_ir([1, 3, 3, 3, 2, 4, 1])),
    "timm_fbnetc_100": (lambda: timm.create_model("fbnetc_100", pretrained=False, num_classes=10), fbnetc_100),
    "timm_efficientnet_b0": (lambda: timm.create_model("efficientnet_b0", pretrained=False, num_classes=10),
                             efficientnet_b0),
    "timm_mobilenetv2_100": (lambda: timm.create_model("mobilenetv2_100", pretrained=False, num_classes=10),
                             lambda: timm_ds_ir([1, 2, 3, 4, 3, 3, 1])),
    "timm_efficientnet_lite0": (lambda: timm.create_model("efficientnet_lite0", pretrained=False, num_classes=10),
                                lambda: timm_ds_ir(lite_repeats(1.0))),
    "tv_densenet121": (lambda: tvm.densenet121(weights=None, num_classes=10), densenet121),
    "timm_ghostnet_100": (lambda: timm.create_model("ghostnet_100", pretrained=False, num_classes=10),
                          ghostnet_100),
    "csp": (lambda: CSPClassifier(num_classes=10), csp),
    "csp_no_sppf": (lambda: CSPClassifier(num_classes=10, sppf=False), lambda: csp(sppf=False)),
}
# zoo entries that are the same torchvision/timm builders as OTHER_MODELS are read there once; a model file another
# test module registered when it was imported first (``file:...``) is no zoo entry
ZOO_CASES = {
    name: (name, {}) for name in list_models()
    if f"tv_{name}" not in OTHER_MODELS and f"timm_{name}" not in OTHER_MODELS and not name.startswith("file:")
} | {
    "mobilenet_v2-1.4": ("mobilenet_v2", {"width": 1.4}),
    "mobilenet_v2-0.5-shallow": ("mobilenet_v2", {"width": 0.5, "depths": [2, 1, 2, 1, 1, 2, 1]}),
    "resnet18-0.5": ("resnet18", {"width": 0.5}),
}


def check(model: torch.nn.Module, expected: Expected) -> None:
    model.eval()
    found = discover_blocks(model, input_size=RES)
    got = [(b.name, b.spec.kind, bool(b.spec.residual)) for b in found.blocks]
    assert [g[0] for g in got] == [e[0] for e in expected.blocks], "block names / order"
    assert got == expected.blocks, "block kinds / residual flags"
    assert sorted(r.name for r in found.refusals) == sorted(name for name, _ in expected.refused), "refused modules"
    for refusal in found.refusals:
        assert refusal.reason.strip() and refusal.node, f"refusal of {refusal.name} gives no reason or node"
    for name, substring in expected.refused:
        if substring is not None:
            parts = (substring,) if isinstance(substring, str) else substring
            reasons = [r.reason for r in found.refusals if r.name == name]
            assert any(all(p in reason for p in parts) for reason in reasons), f"{name}: {reasons}"
    # Each block's module is the named submodule (or, for a run of Sequential children, holds their convs).
    for block in found.blocks:
        if ".." in block.name:  # a chain no module owns: its module runs the model's own convolutions
            first, last = block.name.split("..")
            convs = [m for m in block.module.modules() if isinstance(m, torch.nn.Conv2d)]
            assert convs[0] is model.get_submodule(first) and convs[-1] is model.get_submodule(last)
        elif "[" not in block.name:
            assert block.module is model.get_submodule(block.name)


@pytest.mark.parametrize("key", sorted(OTHER_MODELS))
def test_discovery_other_models(key, one_thread):
    build, expected = OTHER_MODELS[key]
    torch.manual_seed(0)
    check(build(), expected())


@pytest.mark.parametrize("key", sorted(ZOO_CASES))
def test_discovery_zoo(key, one_thread):
    name, options = ZOO_CASES[key]
    if name == "mobilenet_v2" and "depths" in options:
        expected = mbv2_torchvision(options["depths"])
    else:
        expected = zoo_expected(name)
    check(get_model(name, resolution=RES[0], **options), expected)


def test_find_blocks_warns_with_the_refusals_and_strict_raises(one_thread):
    # tests/models/mynet.py: blocks.3 (depthwise -> squeeze-excitation -> project, no expansion) has no chain before
    # its gate: refused (issue #47 keeps only such gates refused)
    from models.mynet import build

    model = build().eval()
    with pytest.warns(UnsupportedBlockWarning) as caught:
        blocks = find_blocks(model, (32, 32))
    assert [b.name for b in blocks] == ["blocks.0", "blocks.1", "blocks.2", "blocks.4", "flat_expand.0..flat_project.0",
                                        "blocks_tail"]
    message = "\n".join(str(w.message) for w in caught)
    assert SE in message and "blocks.3" in message
    with pytest.raises(Exception) as info:
        find_blocks(model, (32, 32), strict=True)
    assert SE in str(info.value) and "blocks.3" in str(info.value)


def test_a_refused_chain_is_said_once_not_again_as_the_module_around_it():
    """timm's DLA-34 (dla.py): the first DlaBasic of the level2, level3 and level4 trees halves the map, and its tree
    adds back its input through `project` (MaxPool2d, then a 1x1 Conv2d and BatchNorm2d), which cannot merge with
    the conv1 -> conv2 chain. Each is refused once, as that chain; before, the DlaBasic around it was refused again
    ("no mergeable chain: followed by add")."""
    model = timm.create_model("dla34", pretrained=False).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsupportedBlockWarning)
        found = discover_blocks(model, input_size=RES)
    firsts = ["level2.tree1", "level3.tree1.tree1", "level4.tree1.tree1"]
    assert sorted(r.name for r in found.refusals) == [f"{m}.conv1..{m}.conv2" for m in firsts]
    assert all("skip path (MaxPool2d -> Conv2d -> BatchNorm2d)" in r.reason for r in found.refusals)


def test_find_blocks_is_silent_without_refusals(one_thread):
    model = tvm.mnasnet1_0(weights=None).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnsupportedBlockWarning)
        blocks = find_blocks(model, RES, strict=True)
    assert len(blocks) == 17  # layers[0:8] + 16 _InvertedResidual (repeats 3,3,3,2,4,1)


# BlockSpec strings (the LUT keys) of a few blocks, read off the sources at a 64x64 input. Channels:
# torchvision MNASNet _get_depths(1.0) = 32,16,24,40,80,96,192,320 and _InvertedResidual mid = in * expansion;
# MobileNetV3 rows as above; ShuffleNetV2 x1.0 stage widths 24,116,232 (branch width half of that);
# timm fbnetc stem 16, mnasnet_100 stem 32. Sizes: each stride-2 layer halves the map (64 -> 32 -> ...).
# The key names the block's removable activation when it is not the kind's usual one (ReLU6 for these
# kinds): nn.ReLU in MNASNet, ShuffleNetV2 and timm's default act_layer, "RE"/"HS" rows in MobileNetV3.
SPEC_READINGS = {
    "tv_mnasnet1_0": {
        "layers.8.0": "inverted_residual(cin=16,hidden=48,cout=24,k=3,s=2,pad=symmetric,res=0,in=32x32,act=relu)",
        "layers.12.3": "inverted_residual(cin=192,hidden=1152,cout=192,k=5,s=1,pad=symmetric,res=1,in=2x2,act=relu)",
    },
    "tv_mobilenet_v3_large": {
        "features.1": "depthwise_separable(cin=16,hidden=16,cout=16,k=3,s=1,pad=symmetric,res=1,in=32x32,act=relu)",
        "features.7": "inverted_residual(cin=40,hidden=240,cout=80,k=3,s=2,pad=symmetric,res=0,in=8x8,act=hardswish)",
    },
    "tv_shufflenet_v2_x1_0": {
        # branch1: no activation between its dw (BN only) and its 1x1; the ReLU after the 1x1 ends the block.
        "stage2.0.branch1": "depthwise_separable(cin=24,hidden=24,cout=58,k=3,s=2,pad=symmetric,res=0,in=16x16,act=none)",
        "stage3.1.branch2": "inverted_residual(cin=116,hidden=116,cout=116,k=3,s=1,pad=symmetric,res=0,in=4x4,act=relu)",
    },
    "timm_fbnetc_100": {
        "blocks.0.0": "inverted_residual(cin=16,hidden=16,cout=16,k=3,s=1,pad=symmetric,res=1,in=32x32,act=relu)",
    },
    # tests/models/csp.py at width 0.25: stem 3->16 (3x3 s2), Conv 16->32 (3x3 s2), first C3 hidden 16; a
    # chain key lists every conv as {cin}x{cout}k{k}s{s}g{groups}; SiLU is not a chain's usual ReLU.
    "csp": {
        "backbone[0:2]": "chain(convs=3x16k3s2g1-16x32k3s2g1,pad=symmetric,res=0,in=64x64,act=silu)",
        "backbone.2.m.0": "chain(convs=16x16k1s1g1-16x16k3s1g1,pad=symmetric,res=1,in=16x16,act=silu)",
    },
    "timm_mnasnet_100": {
        "blocks.0.0": "depthwise_separable(cin=32,hidden=32,cout=16,k=3,s=1,pad=symmetric,res=0,in=32x32,act=relu)",
    },
}


@pytest.mark.parametrize("key", sorted(SPEC_READINGS))
def test_spec_strings_of_new_models_use_the_existing_forms(key, one_thread):
    build, _ = OTHER_MODELS[key]
    specs = {b.name: b.spec.to_str() for b in discover_blocks(build().eval(), input_size=RES).blocks}
    for name, expected in SPEC_READINGS[key].items():
        assert specs[name] == expected


def test_a_block_whose_skip_path_pools_is_refused_with_its_reason():
    """ResNet-D's downsampling blocks average-pool before the 1x1 projection on the skip path: such a block can neither
    merge into one convolution nor run linear as merge deploys it, so discovery refuses it (issue #36: the held-out
    timm resnet18d failed in the middle of `measure --calibrate`), naming what stands on the skip path."""
    import warnings

    from torch import nn

    class Down(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(8, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16)
            self.conv2, self.bn2 = nn.Conv2d(16, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16)
            self.down = nn.Sequential(nn.AvgPool2d(2, 2), nn.Conv2d(8, 16, 1, bias=False), nn.BatchNorm2d(16))

        def forward(self, x):
            return (self.bn2(self.conv2(self.bn1(self.conv1(x)).relu())) + self.down(x)).relu()

    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), Down()).eval()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        blocks = find_blocks(net, (32, 32))
    assert [b.name for b in blocks] == []
    said = " ".join(str(w.message) for w in caught)
    assert "3 (Down): its skip path (AvgPool2d -> Conv2d -> BatchNorm2d) is neither the identity" in said


def test_a_projection_skip_path_is_accepted_with_its_batchnorm_folded():
    """BatchNorm folding (`fold_batchnorm`, what every timed model gets) leaves an `nn.Identity` after the skip path's
    1x1 convolution: ResNet-50's projection blocks are still blocks, so its stem and head are still timed."""
    from dsprof.merging.fold import fold_batchnorm
    from dsprof.models.split import split_model

    # ResNet-50's layout (Bottlenecks 3, 4, 6, 3, a 1x1 conv + BN projection where a stage starts) at a quarter of its
    # width and with 10 classes: the same 16 blocks and 4 projections, built in a fraction of the time
    net = get_model("resnet50", resolution=32, width=0.25, num_classes=10).eval()
    folded = fold_batchnorm(net, torch.zeros(1, 3, 32, 32)).eval()
    assert isinstance(folded.layer1[0].downsample[1], torch.nn.Identity)
    assert [b.name for b in find_blocks(folded, (32, 32))] == [b.name for b in find_blocks(net, (32, 32))]
    assert len(find_blocks(folded, (32, 32))) == 16 and split_model(folded) is not None


def test_identity_skips_of_a_residual_bottleneck_network_are_blocks(one_thread):
    """timm's RegNet writes its identity shortcuts as ``downsample = nn.Identity()`` (timm/models/regnet.py
    create_shortcut: "identity shortcut (no downsample)"). Issue #47: 9 of its 13 blocks were refused as if their
    skip path computed something. Reading timm's `regnetx_002` (RegNetCfg depth=13, 4 stages of depths 1, 1, 4, 7
    from its quantised widths 24, 56, 152, 368): 13 Bottlenecks s{stage}.b{i} (1x1 -> grouped 3x3 -> 1x1, group
    width 8, so kind chain); each stage's first block changes width and stride and projects its skip (1x1 conv +
    BN), the other 9 add their input back through the Identity."""
    torch.manual_seed(0)
    model = timm.create_model("regnetx_002", pretrained=False).eval()
    found = discover_blocks(model, input_size=(32, 32))
    depths = [1, 1, 4, 7]
    names = [f"s{s + 1}.b{i + 1}" for s, n in enumerate(depths) for i in range(n)]
    assert [b.name for b in found.blocks] == names
    assert found.refusals == []
    projected = {f"s{s + 1}.b1" for s in range(4)}
    for b in found.blocks:
        assert b.spec.residual and b.spec.projection == (b.name in projected), b.name
        assert (b.shortcut == ()) == (b.name not in projected), b.name  # the Identity computes nothing
    assert [b.spec.stride for b in found.blocks] == [2 if b.name in projected else 1 for b in found.blocks]


def test_identity_skip_block_merges_exactly(one_thread):
    """An identity-skip RegNet block (the Identity dropped from its skip) merges into one convolution that computes
    the linearised block, float64, at an even and an odd size."""
    from conftest import randomise_bn
    from dsprof.merging import linearize_block, merge_linearized

    torch.manual_seed(0)
    model = randomise_bn(timm.create_model("regnetx_002", pretrained=False)).double().eval()
    block = next(b for b in discover_blocks(model, input_size=(32, 32)).blocks if b.name == "s3.b2")
    lin = linearize_block(block, border="in_front").double().eval()
    for size in (8, 7):  # padding in front: exact at any size
        merged, info = merge_linearized(lin, input_size=(size, size))
        x = torch.randn(2, 152, size, size, dtype=torch.float64, generator=torch.Generator().manual_seed(size))
        with torch.no_grad():
            ref, got = lin(x), merged(x)
        assert info.exact
        assert float((got - ref).abs().max() / ref.abs().max()) <= 1e-9


def test_the_modules_of_every_block_of_a_model_cost_one_trace(monkeypatch):
    # flatnet's six chains belong to no module: each is found again in the traced graph. All six together trace the
    # model once, not once a block (a loop over the blocks of a 21-block model traced it 21 times), and each is the
    # module found alone, running the model's own convolutions
    from models.flatnet import build
    from dsprof.models import block_module, block_modules
    import dsprof.models.graph as graph

    model = build().eval()
    names = [b.name for b in find_blocks(model)]
    assert names == [f"e{i}..p{i}" for i in range(6)]
    traced = []
    real = graph.discover_blocks
    monkeypatch.setattr(graph, "discover_blocks", lambda *a, **k: traced.append(1) or real(*a, **k))
    together = block_modules(model, names)
    assert len(traced) == 1
    for name, module in zip(names, together):
        alone = block_module(model, name)
        first, last = name.split("..")
        convs = [m for m in module.modules() if isinstance(m, torch.nn.Conv2d)]
        assert type(alone) is type(module) and convs[0] is model.get_submodule(first) and convs[-1] is model.get_submodule(last)
        assert [m for m in alone.modules() if isinstance(m, torch.nn.Conv2d)] == convs
    assert len(traced) == 1 + 6  # block_module: one trace a chain, as before


def test_a_model_is_traced_again_only_when_it_changed(monkeypatch):
    # A workflow's stages ask for one model's blocks several times (a measure run three times): the trace is kept.
    # A model changed since is traced again, and its blocks then equal those of a copy of it traced from scratch.
    import copy

    import dsprof.models.graph as graph

    model = tvm.mobilenet_v2(num_classes=10).eval()
    traced = []
    real = graph._discover
    monkeypatch.setattr(graph, "_discover", lambda *a: traced.append(a[1:]) or real(*a))

    def specs(found):
        return [(b.name, b.spec) for b in found.blocks]

    def fresh(m):  # another object: never a kept answer
        return specs(discover_blocks(copy.deepcopy(m), (64, 64)))

    first = discover_blocks(model, (64, 64))
    assert len(first.blocks) == 17  # torchvision's MobileNetV2: 17 inverted residual blocks
    first.blocks.clear()  # a caller's lists are its own
    assert len(discover_blocks(model, (64, 64)).blocks) == 17 and traced == [(64, 64)]
    discover_blocks(model, (96, 96))
    assert traced == [(64, 64), (96, 96)]

    model.features[2].conv[0][2] = torch.nn.Identity()  # block 2's first activation removed: a module replaced
    changed = discover_blocks(model, (64, 64))
    assert len(traced) == 3 and specs(changed) == fresh(model)
    model.features[14].conv[1][0].stride = (1, 1)  # block 14's depthwise at stride 1: a setting changed in place
    strided = discover_blocks(model, (64, 64))
    assert specs(strided) == fresh(model)
    assert (strided.blocks[13].spec.stride, changed.blocks[13].spec.stride) == (1, 2)
    assert strided.blocks[14].spec.in_h == 2 * changed.blocks[14].spec.in_h == 4  # 64 px / 16, not / 32


def test_a_kept_answer_keeps_no_model_alive():
    # the kept answers hold their models by weak reference: a model a caller lets go is freed with its weights, though
    # its answer is among the last three (here the only one)
    import gc
    import weakref

    model = tvm.mobilenet_v2(num_classes=10)
    block, weight = weakref.ref(model.features[1]), weakref.ref(model.features[1].conv[0][0].weight)
    blocks = len(discover_blocks(model, (32, 32)).blocks)  # (not inside an assert: pytest keeps what it shows)
    del model
    gc.collect()  # the model (in a reference cycle) goes, and its kept answer with it
    gc.collect()  # the answer's graph (a cycle too) at the next collection
    assert blocks == 17 and block() is None and weight() is None
