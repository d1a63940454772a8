"""File writing that never leaves a half-written file behind, and safe loading of our torch files."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["atomic_torch_save", "atomic_write_text", "load_torch_payload"]


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically: a reader sees the old file or the new one, never a mix.

    The text goes to a temporary file in the same folder, is flushed to disk, then renamed over
    ``path`` (``os.replace`` is atomic on POSIX and Windows). Parent folders are created.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_torch_save(path: str | Path, payload: dict) -> Path:
    """``torch.save(payload)`` to ``path`` atomically (a temporary file in the same folder, renamed)."""
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        torch.save(payload, tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load_torch_payload(path: str | Path, fmt: str, what: str, if_missing: str) -> dict:
    """The dict that `atomic_torch_save` wrote to ``path`` with ``"format": fmt``, loaded with
    ``weights_only=True`` (no code from the file runs). ``what`` names the file kind in errors;
    ``if_missing`` says what to do when there is no such file."""
    import torch

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{what} {path} does not exist; {if_missing}")
    payload = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(payload, dict) or payload.get("format") != fmt:
        raise ValueError(f"{path} is not a {what} (no format {fmt!r})")
    return payload
