"""Training data: any ImageFolder tree (ImageNet layout); ``digits``, a small real data set shipped
inside scikit-learn (1,797 handwritten digits, 8x8 grey levels), upsampled to the chosen resolution; or
``shapes``, generated procedurally (no files, no scikit-learn; see `shapes`).

Nothing is downloaded. ImageFolder layout: ``ROOT/train/CLASS/*.jpg`` and ``ROOT/val/CLASS/*.jpg``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.data import Dataset, TensorDataset

from ..errors import InputFileError, UsageError
from ..fields import plain

__all__ = ["DataSplits", "DIGITS", "IMAGENET_MEAN", "IMAGENET_STD", "SHAPES", "digits", "image_folder", "load_data", "shapes"]

DIGITS = "digits"
SHAPES = "shapes"
SHAPE_NAMES = ("disk", "ring", "square", "frame", "plus")
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class DataSplits:
    """A training set, a validation set and the number of classes."""

    train: Dataset
    val: Dataset
    num_classes: int
    name: str


class _ShiftAugment(Dataset):
    """Random translation by up to ``shift`` pixels (zero fill) of a tensor data set (train only)."""

    def __init__(self, base: TensorDataset, shift: int) -> None:
        self.base, self.shift = base, shift

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, i: int):
        x, y = self.base[i]
        if self.shift:
            s = self.shift
            dx, dy = torch.randint(-s, s + 1, (2,)).tolist()
            x = torch.roll(F.pad(x, (s, s, s, s)), shifts=(dy, dx), dims=(1, 2))[:, s:-s, s:-s]
        return x, y


def digits(resolution: int = 32, *, val_fraction: float = 0.2, seed: int = 0, augment: bool = True) -> DataSplits:
    """scikit-learn's 8x8 digits, upsampled (bilinear) to ``resolution`` pixels, grey replicated to 3
    channels, scaled to [-1, 1]; a seeded split (``val_fraction`` for validation), the same on every rank."""
    try:
        from sklearn.datasets import load_digits
    except ImportError as exc:  # pragma: no cover - a dependency of dsprof
        raise ImportError("`data='digits'` needs scikit-learn (pip install scikit-learn)") from exc
    bunch = load_digits()
    images = torch.tensor(bunch.images, dtype=torch.float32).unsqueeze(1) / 16.0  # (N, 1, 8, 8) in [0, 1]
    images = F.interpolate(images, size=(resolution, resolution), mode="bilinear", align_corners=False)
    images = (images.clamp(0, 1) * 2 - 1).expand(-1, 3, -1, -1).contiguous()
    labels = torch.tensor(bunch.target, dtype=torch.long)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(seed))
    n_val = int(round(len(labels) * val_fraction))
    val_idx, train_idx = order[:n_val], order[n_val:]
    train = TensorDataset(images[train_idx], labels[train_idx])
    val = TensorDataset(images[val_idx], labels[val_idx])
    shift = max(1, resolution // 16) if augment else 0
    return DataSplits(_ShiftAugment(train, shift), val, 10, DIGITS)


def _draw_shapes(labels: torch.Tensor, resolution: int, gen: torch.Generator) -> torch.Tensor:
    """Images (N, 3, R, R) in [-1, 1] of the classes ``labels``: shape ``label % 5`` (`SHAPE_NAMES`), solid
    (``label < 5``) or filled with horizontal stripes; random centre, size and colour on a noisy background."""
    n, r = len(labels), float(resolution)
    u = lambda *shape: torch.rand(*shape, generator=gen)  # noqa: E731
    cy, cx = (0.3 + 0.4 * u(n, 1, 1)) * r, (0.3 + 0.4 * u(n, 1, 1)) * r
    size = (0.15 + 0.15 * u(n, 1, 1)) * r
    ys, xs = torch.meshgrid(torch.arange(r) + 0.5, torch.arange(r) + 0.5, indexing="ij")
    dy, dx = (ys - cy).abs(), (xs - cx).abs()
    radial, box = (dx**2 + dy**2).sqrt(), torch.maximum(dx, dy)
    masks = torch.stack([
        radial < size,
        (radial < size) & (radial > 0.55 * size),
        box < size,
        (box < size) & (box > 0.55 * size),
        ((dx < size / 3) & (dy < size)) | ((dy < size / 3) & (dx < size)),
    ])  # (5, N, R, R)
    shape = labels % 5
    mask = masks[shape, torch.arange(n)]
    period = max(2.0, r / 8)
    stripes = ((ys / period).floor() % 2 == 0).expand(n, -1, -1)
    mask = torch.where((labels >= 5).view(n, 1, 1), mask & stripes, mask).float().unsqueeze(1)
    colour = 0.5 + 0.5 * u(n, 3, 1, 1)
    background = 0.1 * torch.randn(n, 3, resolution, resolution, generator=gen)
    return (mask * colour + background).clamp(0, 1) * 2 - 1


def shapes(resolution: int = 32, *, n_train: int = 2000, n_val: int = 500, seed: int = 0) -> DataSplits:
    """A generated data set of 10 classes: five shapes (disk, ring, square, frame, plus), solid or striped,
    at a random place, size and colour on a noisy background (so that the classes need non-linear,
    translation-tolerant features), ``resolution`` pixels, balanced, the same for a given ``seed`` on every
    machine (torch's CPU generator). ``n_train`` training and ``n_val`` validation images."""
    gen = torch.Generator().manual_seed(seed)
    labels = torch.arange(n_train + n_val) % 10
    labels = labels[torch.randperm(len(labels), generator=gen)]
    images = _draw_shapes(labels, resolution, gen)
    train = TensorDataset(images[:n_train], labels[:n_train])
    val = TensorDataset(images[n_train:], labels[n_train:])
    return DataSplits(_ShiftAugment(train, 0), val, 10, SHAPES)


@functools.lru_cache(maxsize=2)
def _shapes_cached(resolution: int) -> DataSplits:
    """`shapes` with its defaults, drawn once per resolution in a process (searches fine-tune many times)."""
    return shapes(resolution)


def image_folder(root: str | Path, resolution: int = 224) -> DataSplits:
    """``root/train`` and ``root/val`` as ImageFolder data sets with the usual ImageNet transforms:
    random-resized crop and flip for training; resize to resolution/0.875 and centre crop for validation."""
    from torchvision import datasets, transforms

    root = Path(root)
    if not root.is_dir():
        raise InputFileError(f"{root} does not exist: give the root of an image folder (ROOT/train/CLASS/*.jpg and "
                             "ROOT/val/CLASS/*.jpg), or `data='digits'` or `data='shapes'`")
    missing = [s for s in ("train", "val") if not (root / s).is_dir()]
    if missing:
        raise InputFileError(
            f"{root} lacks {' and '.join(missing)}/: the ImageNet layout is ROOT/train/CLASS/*.jpg and "
            "ROOT/val/CLASS/*.jpg (or use `data='digits'`)"
        )
    normalize = transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)
    train_tf = transforms.Compose(
        [transforms.RandomResizedCrop(resolution), transforms.RandomHorizontalFlip(), transforms.ToTensor(), normalize]
    )
    val_tf = transforms.Compose(
        [transforms.Resize(int(round(resolution / 0.875))), transforms.CenterCrop(resolution), transforms.ToTensor(), normalize]
    )
    try:
        train = datasets.ImageFolder(str(root / "train"), train_tf, loader=_image)
        val = datasets.ImageFolder(str(root / "val"), val_tf, loader=_image)
    except FileNotFoundError as exc:  # a class folder without an image (torchvision's words name it)
        raise InputFileError(f"{root}: {plain(exc)}") from None
    if train.classes != val.classes:
        raise UsageError(f"{root}: train/ and val/ have different class folders")
    if len(train.classes) < 2:
        raise UsageError(f"{root}: train/ has {len(train.classes)} class folder ({plain(', '.join(train.classes))}); a model "
                         "learns nothing to tell apart from one: give two classes or more")
    return DataSplits(train, val, len(train.classes), str(root))


def _image(path: str) -> Any:
    """One image of an image folder, as RGB; a file that is no image PIL reads is named in one line, not in a
    traceback in the middle of an epoch."""
    from PIL import Image, UnidentifiedImageError

    try:
        with open(path, "rb") as f:
            return Image.open(f).convert("RGB")
    except (UnidentifiedImageError, OSError) as exc:
        raise InputFileError(f"{plain(path)} is not an image that can be read ({plain(exc)}); remove it from the image folder") from None


def load_data(data: str | Path, resolution: int) -> DataSplits:
    """``"digits"``, ``"shapes"`` or the root of an ImageFolder tree."""
    if str(data) == DIGITS:
        return digits(resolution)
    if str(data) == SHAPES:
        return _shapes_cached(resolution)
    return image_folder(data, resolution)
