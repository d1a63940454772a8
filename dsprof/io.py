"""File writing that never leaves a half-written file behind, and safe loading of our torch files."""

from __future__ import annotations

import contextlib
import os
import pickle
import tempfile
from pathlib import Path
from typing import Iterator

from .errors import BadFileError, InputFileError, OutputPathError

__all__ = ["atomic_output", "atomic_torch_save", "atomic_write_text", "check_output_path", "load_torch_payload", "make_parent_folders"]


def check_output_path(path: str | Path, what: str = "", instead: str = "choose another path", *,
                      folder: bool = False) -> None:
    """Raise `OutputPathError` ("cannot write {what}{path}: ...; {instead}") where ``path`` cannot be written:
    it is a folder (unless ``folder``: a folder to write into), a folder on its way is a file, or the nearest
    existing folder is not writable. Creates nothing: a command checks its outputs before it builds or writes."""
    path = Path(path)
    if path.is_dir() and not folder:
        raise OutputPathError(f"cannot write {what}{path}: it is a folder; {instead}")
    folders = [path, *path.parents] if folder else list(path.parents)
    blocking = next((p for p in reversed(folders) if p.exists() and not p.is_dir()), None)
    if blocking is not None:
        raise OutputPathError(f"cannot write {what}{path}: {blocking} is a file, not a folder; {instead}")
    nearest = next(p for p in folders if p.exists())  # "." or the root at worst
    if not os.access(nearest, os.W_OK | os.X_OK):
        raise OutputPathError(f"cannot write {what}{path}: no permission to write in {nearest}; {instead}")


def make_parent_folders(path: Path, what: str = "", instead: str = "choose another path") -> None:
    """Create the folders above ``path`` after `check_output_path`; raises `OutputPathError` as it does."""
    path = Path(path)
    check_output_path(path, what, instead)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # changed since the check, or refused beyond what os.access sees
        raise OutputPathError(f"cannot write {what}{path}: {exc.strerror or exc}; {instead}") from None


@contextlib.contextmanager
def atomic_output(path: str | Path) -> Iterator[Path]:
    """A temporary path in ``path``'s folder for a writer that takes a file name: renamed over ``path``
    (``os.replace``, atomic on POSIX and Windows) when the block ends, removed when it raises. A reader
    sees the old file or the new one, never a partial one. Parent folders are created; a parent that is
    a file raises `OutputPathError`."""
    path = Path(path)
    make_parent_folders(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (`atomic_output`), flushed to disk before the rename."""
    with atomic_output(path) as tmp, open(tmp, "w", encoding="utf-8", newline="") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    return Path(path)


def atomic_torch_save(path: str | Path, payload: dict) -> Path:
    """``torch.save(payload)`` to ``path`` atomically (`atomic_output`)."""
    import torch

    with atomic_output(path) as tmp:
        torch.save(payload, tmp)
    return Path(path)


def load_torch_payload(path: str | Path, fmt: str, what: str, if_missing: str) -> dict:
    """The dict that `atomic_torch_save` wrote to ``path`` with ``"format": fmt``, loaded with
    ``weights_only=True`` (no code from the file runs). ``what`` names the file kind in errors;
    ``if_missing`` says what to do when there is no such file."""
    import torch

    path = Path(path)
    if not path.is_file():
        raise InputFileError(f"{what} {path} does not exist; {if_missing}")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - an empty, cut or foreign file: EOFError, RuntimeError, UnpicklingError, ...
        if path.stat().st_size == 0:
            detail = "it is empty"
        elif isinstance(exc, pickle.UnpicklingError):  # torch's own advice (weights_only=False) would run code
            detail = "it is not a torch file, or it holds objects beyond tensors and plain data, which " \
                     "torch.load(weights_only=True) refuses"
        else:
            detail = f"a damaged or cut torch file: {type(exc).__name__}"
        raise BadFileError(f"{path} is not a readable {what} ({detail}); {if_missing}") from None
    if not isinstance(payload, dict) or payload.get("format") != fmt:
        raise BadFileError(f"{path} is not a {what} (no format {fmt!r}); {if_missing}")
    return payload
