"""Training data: any ImageFolder tree (ImageNet layout), or ``digits``, a small real data set shipped
inside scikit-learn (1,797 handwritten digits, 8x8 grey levels), upsampled to the chosen resolution.

Nothing is downloaded. ImageFolder layout: ``ROOT/train/CLASS/*.jpg`` and ``ROOT/val/CLASS/*.jpg``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils.data import Dataset, TensorDataset

from ..errors import InputFileError, UsageError

__all__ = ["DataSplits", "DIGITS", "IMAGENET_MEAN", "IMAGENET_STD", "digits", "image_folder", "load_data"]

DIGITS = "digits"
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
        raise ImportError("--data digits needs scikit-learn (pip install scikit-learn)") from exc
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


def image_folder(root: str | Path, resolution: int = 224) -> DataSplits:
    """``root/train`` and ``root/val`` as ImageFolder data sets with the usual ImageNet transforms:
    random-resized crop and flip for training; resize to resolution/0.875 and centre crop for validation."""
    from torchvision import datasets, transforms

    root = Path(root)
    missing = [s for s in ("train", "val") if not (root / s).is_dir()]
    if missing:
        raise InputFileError(
            f"{root} lacks {' and '.join(missing)}/: the ImageNet layout is ROOT/train/CLASS/*.jpg and "
            "ROOT/val/CLASS/*.jpg (or use --data digits)"
        )
    normalize = transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)
    train_tf = transforms.Compose(
        [transforms.RandomResizedCrop(resolution), transforms.RandomHorizontalFlip(), transforms.ToTensor(), normalize]
    )
    val_tf = transforms.Compose(
        [transforms.Resize(int(round(resolution / 0.875))), transforms.CenterCrop(resolution), transforms.ToTensor(), normalize]
    )
    train = datasets.ImageFolder(str(root / "train"), train_tf)
    val = datasets.ImageFolder(str(root / "val"), val_tf)
    if train.classes != val.classes:
        raise UsageError(f"{root}: train/ and val/ have different class folders")
    return DataSplits(train, val, len(train.classes), str(root))


def load_data(data: str | Path, resolution: int) -> DataSplits:
    """``"digits"`` or the root of an ImageFolder tree."""
    if str(data) == DIGITS:
        return digits(resolution)
    return image_folder(data, resolution)
