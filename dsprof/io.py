"""Files in and out: the one way to an output path (`output_path`: names from data slugged by `slug`, nothing
outside the output folder), writing that never leaves a half-written file behind (with the user's umask), CSV cells
that a spreadsheet cannot take for a formula (`csv_cell`), and the one way in for every file a command reads
(`read_text`, `read_json`, `read_csv`, `load_torch_payload`): any content -- another encoding, binary, empty, cut,
a file of another kind -- becomes one `DsprofError` that names the file and says what it is (`describe_file`) and
what to do."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import pickle
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Sequence

from .errors import BadFileError, DsprofError, InputFileError, OutputPathError
from .fields import plain, shown

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["SLUG_LIMIT", "atomic_output", "atomic_torch_save", "atomic_write_text", "check_output_path", "csv_cell",
           "csv_frame", "csv_row", "file_kind", "files_below", "KINDS", "MAX_TEXT_BYTES", "MAX_TORCH_BYTES",
           "describe_file", "load_torch", "load_torch_payload", "make_parent_folders", "one_or_many", "output_path",
           "read_csv", "read_json", "read_text", "slug", "sniff"]


def one_or_many(value: Any, single: tuple[type, ...] = (str, Path)) -> list:
    """``value`` as a list: one item of the ``single`` types (a path, by default) as a list of one, an iterable (a
    generator too, read once here) as its items. Anything else comes back as a list of one, for the caller's own
    type check to refuse in its words."""
    if isinstance(value, single) or not isinstance(value, Iterable):
        return [value]
    return list(value)


def files_below(folder: Path, pattern: str, keep: Callable[[Path], bool] | None = None) -> list[Path]:
    """The files below ``folder`` (searched recursively) whose names match ``pattern`` (and ``keep``), sorted. Their
    names below the folder are data (a results folder someone sent): one holding a backquote, which dsprof keeps for
    the commands its messages suggest and never writes in a name (`slug`), is refused in one line before any message
    could show it as a command."""
    found = sorted(p for p in folder.rglob(pattern) if keep is None or keep(p))
    for p in found:
        below = p.relative_to(folder).as_posix()
        if "`" in below:
            raise BadFileError(f"{plain(folder)} holds {plain(below)}, a name with a backquote, which dsprof keeps for "
                               "the commands its messages suggest: rename it, or move it out of the folder")
    return found


# -- where dsprof writes: one way to an output path ------------------------------------------------------------

#: The longest name component `slug` returns (characters); a longer one is cut and ends with a hash of the whole.
SLUG_LIMIT = 120
_NAME_MAX = 240  # a whole file name `output_path` writes (most file systems allow 255 bytes)


def slug(text: object, limit: int = SLUG_LIMIT) -> str:
    """``text`` as one safe file-name component: ASCII letters, digits, ``.`` and ``_`` kept, every other run of
    characters (separators, spaces, ``-``, quotes, control and non-ASCII characters) one ``-``; no run of dots (no
    ``..``), no ``-`` or ``.`` at either end (no hidden file); at most ``limit`` characters (a longer one is cut and
    ends with 8 hex digits of its SHA-256, so that two long names stay apart); ``unnamed`` when nothing is left.
    A name that is already safe comes back unchanged: ``mobilenet_v2_224px_onnxruntime_cpu_fp32_b1``."""
    text = str(text)
    out = re.sub(r"[^A-Za-z0-9._]+", "-", text)
    out = re.sub(r"\.{2,}", "-", out)
    out = re.sub(r"-{2,}", "-", out).strip("-.")
    if len(out) > limit:
        out = out[: limit - 9].rstrip("-.") + "-" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return out or "unnamed"


def output_path(folder: str | Path, *names: object, suffix: str = "", what: str = "a file") -> Path:
    """The path ``folder/NAME/.../NAME{suffix}`` that dsprof writes: every name component `slug`-ged (a name from a
    file's contents or a user's string cannot hold a separator or ``..``; dsprof's own names, ``plots`` or
    ``front_mbv2``, come back unchanged), ``suffix`` (dsprof's own extension, ``.png``) added to the last. Raises
    `OutputPathError` naming the file where the path resolves outside ``folder`` (a link on its way leads out,
    e.g. in a results folder someone sent). ``folder`` itself is the user's choice and is taken as it is.
    Creates nothing."""
    folder = Path(folder)
    parts = [slug(n, _NAME_MAX - len(suffix)) for n in names]
    if suffix:
        if not parts or "/" in suffix or "\\" in suffix or suffix != suffix.strip() or ".." in suffix:
            raise ValueError(f"output_path: suffix {suffix!r} must be a file extension added to a name")
        parts[-1] += suffix
    path = folder.joinpath(*parts)
    root = folder.resolve()
    real = path.resolve()
    if real != root and root not in real.parents:
        link = next((p for p in [path, *path.parents][: len(parts)] if p.is_symlink()), None)
        why = f"{link} is a link to {os.readlink(link)}" if link is not None else f"it resolves to {real}"
        raise OutputPathError(f"cannot write {what} {path}: {why}, outside the output folder {folder}; remove the "
                              "link or choose another output folder")
    return path


#: What a spreadsheet takes for the start of a formula (OWASP, CSV injection), besides tab and carriage return.
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """``value`` as a CSV file of dsprof holds it: text that starts with ``= + - @`` (or a tab, a carriage return)
    and is not a number gets a leading ``'``, so that a spreadsheet shows it as text rather than run it as a
    formula (OWASP's advice on CSV injection); numbers, ``-0.5``, ``-inf`` and other values unchanged. Every CSV
    writer of dsprof (LUT, report tables and plot data) passes its text cells through it."""
    if not isinstance(value, str) or not value.startswith(_FORMULA):
        return value
    try:
        float(value)
        return value
    except ValueError:
        return "'" + value


def csv_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row for `csv.DictWriter`: its keys and values through `csv_cell`."""
    return {csv_cell(k): csv_cell(v) for k, v in row.items()}


def csv_frame(frame: "pd.DataFrame") -> "pd.DataFrame":
    """A copy of ``frame`` to write as CSV: its column names and the cells of its columns that are not numeric through
    `csv_cell` (numbers keep their type and every digit)."""
    import pandas as pd

    safe = frame.copy()
    for i, column in enumerate(frame.columns):
        if not pd.api.types.is_numeric_dtype(frame.iloc[:, i]):
            safe.isetitem(i, frame.iloc[:, i].map(csv_cell))
    safe.columns = [csv_cell(c) for c in frame.columns]
    return safe


def check_output_path(path: str | Path, what: str = "", instead: str = "choose another path", *,
                      folder: bool = False, kind: str | None = None) -> None:
    """Raise `OutputPathError` ("cannot write {what}{path}: ...; {instead}") where ``path`` cannot be written:
    it is a folder (unless ``folder``: a folder to write into), a folder on its way is a file, the nearest
    existing folder is not writable, or (``kind``: the `file_kind` to be written) it holds a file of another kind,
    which `atomic_output` would refuse to replace anyway, but only once the work is done. Creates nothing: a
    command checks its outputs before it builds or writes."""
    path = Path(path)
    if path.is_dir() and not folder:
        raise OutputPathError(f"cannot write {what}{path}: it is a folder; {instead}")
    if kind is not None and path.is_file() and path.stat().st_size and file_kind(_head(path)) != kind:
        raise _other_kind(path, f"{what}{path}", kind)
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
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; a written file gets what open() would give it
    finally:
        os.close(fd)
    try:
        yield Path(tmp)
        _check_replaceable(path, Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _check_replaceable(path: Path, new: Path) -> None:
    """Raise `OutputPathError` where writing ``new`` over ``path`` would replace a file of another kind: a
    fine-tuned checkpoint by a merged model, a LUT or a measurement file by a front, a model's Python source by
    anything. A file is replaced only by one of its own kind (`file_kind`); an empty one by anything."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    if file_kind(_head(path)) != file_kind(_head(new)):
        raise _other_kind(path, str(path), sniff(_head(new))[0])


def _other_kind(path: Path, what: str, new: str) -> OutputPathError:
    """The refusal to replace the file ``path`` by one of the kind ``new`` (a `file_kind` or `sniff` name)."""
    kind = next((k for k in KINDS if k.id == new), None)
    return OutputPathError(f"cannot write {what}: it holds {sniff(_head(path))[0]}, which this would replace with "
                           f"{kind.name if kind else new}; choose another path, or move that file away first")


def file_kind(head: bytes) -> str:
    """The kind of a file that starts with ``head``, as coarse as a file may be replaced by another of it: one of
    dsprof's `KINDS`, else what `sniff` says without a CSV's header or where bytes stop being UTF-8 text ("a CSV
    file", "binary data", "JSON text", "Python source", "a PNG image", ...)."""
    name, kind = sniff(head)
    if kind is not None:
        return kind.id
    if name.startswith("not UTF-8 text"):
        return "binary data"
    return name.split(" with the header ")[0]


def _umask() -> int:
    """The process's umask (read by setting it and setting it back: POSIX has no read-only call)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


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


def load_torch(path: str | Path, what: str, hint: str) -> Any:
    """What ``torch.save`` wrote to ``path``, loaded with ``weights_only=True`` (no code from the file runs).
    ``what`` names the file kind expected ("a checkpoint"), ``hint`` what to do. A missing file raises
    `InputFileError`; an empty, cut or damaged file, a pickle with objects beyond tensors and plain data, or a
    file of another kind (text, a LUT, an image) raises `BadFileError` saying which."""
    import torch

    path = Path(path)
    if not path.is_file():
        raise InputFileError(f"{what} {path} does not exist; {hint}")
    if path.stat().st_size > MAX_TORCH_BYTES:
        raise BadFileError(f"{path} is larger than {_size(MAX_TORCH_BYTES)}, more than {_a(what)} dsprof reads may "
                           f"hold; {hint}")
    head = _head(path)
    name, kind = sniff(head)
    if head and not (name.startswith(("a PyTorch", "a ZIP", "a pickle")) or kind and kind.id in _TORCH_KINDS):
        raise _not_a(path, head, what, hint, BadFileError)  # text, an image, ...
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - an empty, cut or foreign file: EOFError, RuntimeError, UnpicklingError, ...
        if not head:
            detail = "it is empty"
        elif isinstance(exc, pickle.UnpicklingError):  # torch's own advice (weights_only=False) would run code
            detail = "it is not a torch file, or it holds objects beyond plain tensors and data, which " \
                     "torch.load(weights_only=True) refuses"
        else:
            detail = f"a damaged or cut torch file: {type(exc).__name__}"
        raise BadFileError(f"{path} is not a readable {what.removeprefix('a ')} ({detail}); {hint}") from None


def load_torch_payload(path: str | Path, fmt: str, what: str, if_missing: str) -> dict:
    """The dict that `atomic_torch_save` wrote to ``path`` with ``"format": fmt`` (`load_torch`). ``what``
    names the file kind in errors; ``if_missing`` says what to do when there is no such file."""
    payload = load_torch(path, what, if_missing)
    if not isinstance(payload, dict) or payload.get("format") != fmt:
        name, kind = sniff(_head(Path(path)))
        instead = f"it is {name}; {kind.goes}" if kind else f"it is {name}"
        raise BadFileError(f"{path} is not a {what} (no format {shown(fmt)}: {instead}); {if_missing}")
    return payload


# -- reading: one way in ---------------------------------------------------------------------------------------

#: The most bytes a text file dsprof reads (records, a LUT, a plan, a front, a manifest, results) may hold: 256 MiB,
#: a hundred times a long run's records; a larger file is refused before it is read in whole.
MAX_TEXT_BYTES = 256 << 20
#: The most bytes a PyTorch file dsprof reads (a merged model, a checkpoint) may hold.
MAX_TORCH_BYTES = 8 << 30

_HEAD = 1 << 16  # bytes a file's kind is told from


@dataclass(frozen=True)
class FileKind:
    """One of dsprof's own file kinds, told by a string it holds near its start."""

    id: str
    marker: bytes
    name: str  # what it is, with its article
    goes: str  # where such a file goes


KINDS = (
    FileKind("merged", b"dsprof.merged", "a dsprof merged model (PyTorch file)", "a merged model is timed by `dsprof.measure(plans=)`"),
    FileKind("training", b"dsprof.training", "a dsprof training checkpoint (PyTorch file)",
             "a checkpoint goes to `dsprof.merge(checkpoint=)`"),
    FileKind("measurement", b"dsprof.measurement/", "a dsprof measurement file (JSON Lines)",
             "measurement files go to `dsprof build-lut` and `dsprof report`"),
    FileKind("lut", b"dsprof.lut/", "a dsprof LUT (CSV)", "a LUT goes to `lut=`"),
    FileKind("plan", b"dsprof.plan", "a dsprof plan (JSON)", "a plan goes to `plan=`"),
    FileKind("manifest", b"dsprof.bundle/", "a bundle manifest (JSON)", "give `dsprof import` the bundle folder that holds it"),
    FileKind("results", b"dsprof.edge-results/", "a bundle runner's results file (JSON Lines)",
             "results go to `dsprof import BUNDLE RESULTS`"),
    FileKind("front", b"dsprof.front", "a planner's front (JSON)", "a front goes to `dsprof.report(fronts=)`"),
)
_TORCH_KINDS = ("merged", "training")
_MAGIC = (
    (b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19", "a PyTorch file (legacy format)"),
    (b"\x89PNG", "a PNG image"), (b"%PDF", "a PDF document"), (b"\x1f\x8b", "a gzip archive"),
    (b"\xff\xfe", "UTF-16 text"), (b"\xfe\xff", "UTF-16 text"), (b"\x7fELF", "a program (ELF)"),
)


def _size(n: int) -> str:
    """``n`` bytes in words: "256 MiB", "1000 bytes"."""
    return f"{n >> 20} MiB" if n >= 1 << 20 and not n % (1 << 20) else f"{n} bytes"


def _head(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.read(_HEAD)


def sniff(head: bytes) -> tuple[str, FileKind | None]:
    """(what a file that starts with ``head`` is, in words; which of dsprof's `KINDS` it is, or None)."""
    if not head:
        return "an empty file", None
    if head.startswith(b"PK\x03\x04"):
        if b"data.pkl" not in head:
            return "a ZIP archive", None
        kind = next((k for k in KINDS if k.id in _TORCH_KINDS and k.marker in head), None)
        return (kind.name, kind) if kind else ("a PyTorch file (torch.save)", None)
    for magic, name in _MAGIC:
        if head.startswith(magic):
            return name, None
    if head[1:200:2].count(0) > 50 or head[0:200:2].count(0) > 50:
        return "UTF-16 text", None
    if head.startswith(b"\x80") and len(head) > 1 and 2 <= head[1] <= 5:
        return "a pickle", None
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3 or b"\0" in head:  # not just a character cut at the end of the head
            return ("binary data" if b"\0" in head or exc.start < 64 else
                    f"not UTF-8 text (byte {exc.start + 1} is {head[exc.start]:#04x})"), None
        text = head[:exc.start].decode("utf-8")
    if "\0" in text:
        return "binary data", None
    kind = next((k for k in KINDS if k.id not in _TORCH_KINDS and k.marker.decode() in text[:8192]), None)
    if kind:
        return kind.name, kind
    first = text.lstrip().split("\n", 1)[0].strip()
    if first.startswith(("{", "[")):
        return ("JSON Lines" if text.lstrip().count("\n{") else "JSON") + " text", None
    if first.startswith(("import ", "from ", "def ", "class ", '"""', "#!")):
        return "Python source", None
    if "," in first:
        # quoted as a repr: a header from someone else's file puts no control character (a terminal escape) into
        # the line that names it
        return f"a CSV file with the header {first if len(first) <= 60 else first[:57] + '...'!r}", None
    return "text", None


def describe_file(path: str | Path) -> str:
    """What the file at ``path`` looks like, in words: "an empty file", "a dsprof merged model (PyTorch file)",
    "a PyTorch file (torch.save)", "UTF-16 text", "binary data", "a CSV file with the header '...'", ..."""
    return sniff(_head(Path(path)))[0]


def _a(what: str) -> str:
    return what if what.startswith(("a ", "an ")) else f"{'an' if what[:1] in 'aeiou' else 'a'} {what}"


def _not_a(path: Path, head: bytes, what: str, hint: str, error: type[DsprofError]) -> DsprofError:
    name, kind = sniff(head)
    return error(f"{path} is {name}, not {_a(what)}; {kind.goes + '; ' if kind else ''}{hint}")


def read_text(path: str | Path, what: str, hint: str, *, kind: str | None = None, if_missing: str | None = None,
              error: type[DsprofError] = BadFileError) -> str:
    """The text of the UTF-8 file ``path`` (a leading byte-order mark dropped): the one way in for text files.

    ``what`` names the file expected ("LUT file"), ``hint`` what to do ("build one with ..."), ``kind`` the id of
    the `KINDS` entry it is (a file of another dsprof kind is refused, saying where it goes). A missing file
    raises `InputFileError` ("WHAT PATH does not exist; IF_MISSING or HINT"); a folder, an unreadable file,
    bytes that are not UTF-8 text (binary, UTF-16, a PyTorch file) raise ``error`` saying what the file is."""
    path = Path(path)
    if not path.exists():
        raise InputFileError(f"{what} {path} does not exist; {if_missing or hint}")
    if path.is_dir():
        raise error(f"{path} is a folder, not {_a(what)}; {hint}")
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_TEXT_BYTES + 1)  # never more than the cap, whatever the file claims to be
    except OSError as exc:
        raise error(f"cannot read {path}: {exc.strerror or exc}; {hint}") from None
    if len(data) > MAX_TEXT_BYTES:
        raise error(f"{path} is larger than {_size(MAX_TEXT_BYTES)}, more than {_a(what)} dsprof reads may hold; {hint}")
    data = data.removeprefix(b"\xef\xbb\xbf")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _not_a(path, data[:_HEAD], what, hint, error) from None
    if "\0" in text:
        raise _not_a(path, data[:_HEAD], what, hint, error)
    found = sniff(data[:_HEAD])[1]
    if kind is not None and found is not None and found.id != kind:
        raise _not_a(path, data[:_HEAD], what, hint, error)
    return text


def read_json(path: str | Path, what: str, hint: str, *, kind: str | None = None,
              error: type[DsprofError] = BadFileError) -> Any:
    """The JSON value in the file ``path`` (`read_text`'s checks first); text that is not one JSON value
    raises ``error`` naming the line."""
    text = read_text(path, what, hint, kind=kind, error=error)
    try:
        return json.loads(text)
    except ValueError as exc:
        if not text.strip():
            raise error(f"{path} is an empty file, not {_a(what)}; {hint}") from None
        where = f", line {exc.lineno}" if isinstance(exc, json.JSONDecodeError) else ""
        detail = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise error(f"{path}{where}: not valid JSON ({detail}), so not {_a(what)}; {hint}") from None


def read_csv(path: str | Path, what: str, columns: Sequence[str], hint: str, *, kind: str | None = None,
             error: type[DsprofError] = BadFileError) -> "pd.DataFrame":
    """The CSV table in ``path`` as strings (`read_text`'s checks first), with at least ``columns``; a table
    that does not parse, or that lacks a column, raises ``error`` saying what the file holds."""
    import pandas as pd

    text = read_text(path, what, hint, kind=kind, error=error)
    if not text.strip():
        raise error(f"{path} is an empty file, not {_a(what)}; {hint}")
    try:
        frame = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
        detail = " ".join(str(exc).split())[:200]
        raise error(f"{path} is not a CSV table ({detail}), so not {_a(what)}; {hint}") from None
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        name, found = sniff(text[:_HEAD].encode())
        raise error(f"{path} is {name}, not {_a(what)}: it lacks the column(s) {', '.join(missing)} (needs "
                    f"{','.join(columns)}); {found.goes + '; ' if found else ''}{hint}")
    return frame
