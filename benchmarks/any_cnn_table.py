"""The any-CNN table of docs/any-cnn.md: for each of 31 torchvision and timm models (random weights, nothing
downloaded), the blocks dsprof finds, by kind, and what it refuses, with the reason (issue #47).

    python benchmarks/any_cnn_table.py            # rewrites the table between the markers in docs/any-cnn.md
    python benchmarks/any_cnn_table.py --check    # exit 1 when the doc's table is not what the models give now

tests/test_any_cnn_table.py regenerates it in the suite and checks rows against counts read from the architectures.
Models are built at their smallest variant and discovered at 64 px; RepVGG and MobileOne are re-parameterised first
(`dsprof.models.reparameterize`, what ``--reparameterize`` does), the form they are deployed in.
"""

from __future__ import annotations

import argparse
import re
import sys
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

DOC = Path(__file__).resolve().parent.parent / "docs" / "any-cnn.md"
BEGIN, END = "<!-- any-cnn-table:begin (benchmarks/any_cnn_table.py writes this table) -->", "<!-- any-cnn-table:end -->"
RES = 64

# (label, source, name, re-parameterised first)
MODELS: list[tuple[str, str, str, bool]] = [
    ("MobileNetV2", "torchvision", "mobilenet_v2", False),
    ("MobileNetV2", "timm", "mobilenetv2_100", False),
    ("MobileNetV3-Small", "torchvision", "mobilenet_v3_small", False),
    ("MobileNetV3-Large", "torchvision", "mobilenet_v3_large", False),
    ("MobileNetV3-Large", "timm", "mobilenetv3_large_100", False),
    ("EfficientNet-B0", "torchvision", "efficientnet_b0", False),
    ("EfficientNet-B0", "timm", "efficientnet_b0", False),
    ("EfficientNet-Lite0", "timm", "efficientnet_lite0", False),
    ("EfficientNet-Lite0 (TF padding)", "timm", "tf_efficientnet_lite0", False),
    ("MnasNet-0.5", "torchvision", "mnasnet0_5", False),
    ("MnasNet-B1", "timm", "mnasnet_100", False),
    ("FBNet-C", "timm", "fbnetc_100", False),
    ("TinyNet-E", "timm", "tinynet_e", False),
    ("LCNet-0.5", "timm", "lcnet_050", False),
    ("MixNet-S", "timm", "mixnet_s", False),
    ("GhostNet", "timm", "ghostnet_100", False),
    ("ShuffleNetV2-0.5", "torchvision", "shufflenet_v2_x0_5", False),
    ("SqueezeNet-1.1", "torchvision", "squeezenet1_1", False),
    ("RegNetX-400MF", "torchvision", "regnet_x_400mf", False),
    ("RegNetY-400MF", "torchvision", "regnet_y_400mf", False),
    ("RegNetX-200MF", "timm", "regnetx_002", False),
    ("RegNetY-200MF", "timm", "regnety_002", False),
    ("ResNet-18", "torchvision", "resnet18", False),
    ("ResNet-50", "torchvision", "resnet50", False),
    ("ResNet-26", "timm", "resnet26", False),
    ("ResNet-18-D", "timm", "resnet18d", False),
    ("VGG-11-BN", "torchvision", "vgg11_bn", False),
    ("VGG-16", "torchvision", "vgg16", False),
    ("RepVGG-A0 (re-parameterised)", "timm", "repvgg_a0", True),
    ("MobileOne-S0 (re-parameterised)", "timm", "mobileone_s0", True),
    ("ConvNeXt-Atto", "timm", "convnext_atto", False),
]


@dataclass(frozen=True)
class Row:
    """One model's line: its blocks by kind, its refusals by reason (or why it could not be read at all)."""

    label: str
    source: str
    name: str
    blocks: int
    kinds: tuple[tuple[str, int], ...]
    refused: tuple[tuple[str, int], ...]
    note: str = ""

    def markdown(self) -> str:
        kinds = ", ".join(f"{n} {k}" for k, n in self.kinds) or "-"
        refused = "; ".join(f"{n} {r}" for r, n in self.refused) or ("-" if not self.note else self.note)
        return f"| {self.label} | {self.source} `{self.name}` | {self.blocks} | {kinds} | {refused} |"


def short_reason(reason: str) -> str:
    """A refusal's reason without node names: what the table groups by."""
    r = reason.removeprefix("no mergeable chain: ")
    if r.startswith("squeeze-excitation") or r.startswith("inside the squeeze-excitation"):
        return "squeeze-excitation"
    skip = re.match(r"its skip path \((.*?)\) is neither", r)
    if skip:
        return f"skip path {skip[1]}"
    read = re.match(r"tensor \S+ is read (\d+) times", r)
    if read:
        return f"a tensor read {read[1]} times"
    followed = re.match(r"followed by (\w+)", r)
    if followed:
        return f"followed by {followed[1]}"
    head = re.match(r"(concatenation|split|multiplication|dilated convolution|mixed padding styles)", r)
    if head:
        return head[1]
    return r.split(";")[0][:60]


def build(source: str, name: str, fuse: bool):
    """The model with random weights, eval mode; re-parameterised first where asked."""
    import torch

    torch.manual_seed(0)
    if source == "torchvision":
        import torchvision.models as tvm

        model = tvm.get_model(name, weights=None)
    else:
        import timm

        model = timm.create_model(name, pretrained=False)
    model.eval()
    if fuse:
        from dsprof.models import reparameterize

        model = reparameterize(model, name)
    return model


def row(label: str, source: str, name: str, fuse: bool) -> Row:
    """What discovery finds in one model at 64 px."""
    from dsprof.errors import GraphTraceError
    from dsprof.models import discover_blocks

    model = build(source, name, fuse)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = discover_blocks(model, (RES, RES))
    except GraphTraceError as exc:
        module = re.search(r"cannot trace \S+ \((\w+)\)", str(exc))
        return Row(label, source, name, 0, (), (), f"torch.fx cannot trace {module[1] if module else 'it'}")
    kinds = Counter(b.spec.kind for b in found.blocks)
    refused = Counter(short_reason(r.reason) for r in found.refusals)
    note = "" if found.blocks or found.refusals else (found.nothing or "")
    return Row(label, source, name, len(found.blocks), tuple(sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))),
               tuple(sorted(refused.items(), key=lambda kv: (-kv[1], kv[0]))), note)


def table(models: list[tuple[str, str, str, bool]] = MODELS, log: Callable[[str], None] | None = None) -> str:
    """The Markdown table of ``models``."""
    lines = ["| model | source | blocks | kinds | refused (reason) |", "|---|---|---:|---|---|"]
    for entry in models:
        lines.append(row(*entry).markdown())
        if log is not None:
            log(lines[-1])
    return "\n".join(lines)


def doc_table(text: str) -> str:
    """The table between the markers of docs/any-cnn.md."""
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{DOC}: no table markers ({BEGIN} ... {END})")
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the doc's table instead of writing it")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    new = table(log=lambda line: print(line, file=sys.stderr))
    text = DOC.read_text(encoding="utf-8")
    if args.check:
        same = doc_table(text) == new
        print("docs/any-cnn.md: the table is up to date" if same else "docs/any-cnn.md: the table differs; run "
              "python benchmarks/any_cnn_table.py")
        return 0 if same else 1
    before, rest = text.split(BEGIN, 1)
    after = rest.split(END, 1)[1]
    DOC.write_text(f"{before}{BEGIN}\n{new}\n{END}{after}", encoding="utf-8")
    print(f"wrote the table of {len(MODELS)} models to {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
