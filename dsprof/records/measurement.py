"""The `Measurement` record and its file format: JSON Lines, one self-contained record per line.

Every line holds what was timed (model, block, `BlockSpec` string, variant, input shape, MACs),
how (backend, device, dtype, layout, batch, threads), where (environment id and fingerprint, device
state before and after), and the raw samples in seconds. Statistics are derived from the samples
(`Measurement.stats`), never stored instead of them. Lines are appended and flushed as they are
measured, so an interrupted run keeps everything it finished.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import warnings

try:
    import fcntl  # POSIX only
except ImportError:  # pragma: no cover - Windows: no lock, writes still all or nothing
    fcntl = None  # type: ignore[assignment]
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable

from ..device_context import CONTEXT_FIELDS, DeviceContext, compile_setting
from ..errors import DsprofError, MeasurementFileError, OutputPathError, WriteError  # noqa: F401  (defined once, in dsprof.errors)
from ..fields import (
    MAX_BATCH,
    MAX_CHANNELS,
    MAX_COUNT,
    MAX_THREADS,
    FieldError,
    check_count,
    check_environment,
    check_model_options,
    check_name,
    check_number,
    check_plain,
    check_samples,
    check_shape,
    check_text,
    check_token,
    plain,
    shown,
)
from ..io import read_text
from ..models import BlockSpec
from ..models.spans_text import format_spans, parse_spans
from .stats import SampleStats, Speedup, paired_speedup, summarize

__all__ = ["CALIBRATION", "CALIBRATION_SPANS", "CHECKSUM_FIELD", "IN_SITU_SCOPE", "MODEL_ROW_SUFFIX", "PROBE_NAME", "PROBE_SCOPE", "SCHEMA", "SESSION_AGAIN", "Measurement", "MeasurementFile", "MeasurementFileError", "MeasurementWriter",
           "calibration_name", "calibration_plan", "is_session_pair", "original_in_group", "paired_with_original", "read_measurement_file", "read_measurements", "record_checksum", "session_pair_name",
           "speedups"]

SCHEMA = "dsprof.measurement/1"
#: The drift probe's records (`dsprof.profiler.probe`): this scope, this name (the reference the runs time:
#: MobileNetV2's expand-depthwise-project block, 32 -> 192 -> 32 channels at 56 x 56, about 2 ms on one core).
PROBE_SCOPE = "probe"
PROBE_NAME = "probe-ir32x56"
#: The scope of a record timed in situ: the whole model with one block (or piece) swapped, in one group with the
#: whole model (`Workloads(in_situ=...)` and `Workloads(calibrate=True)` of `dsprof.measure`). Files keep the word older
#: dsprof wrote.
IN_SITU_SCOPE = "context"
#: The variant of the calibration group's model (`dsprof.workflows.calibrate`): the whole model, scope ``model``,
#: with every block linearised and merged where the run's entries say it pays.
CALIBRATION = "calibration"
#: Where the calibration group timed the front's k = 0 plan with spans (a run that measured spans, issue #46), its
#: record's name is the model's, this word, the spans and the lone blocks left unmerged (`calibration_name`:
#: ``mobilenet_v2 spans 0-1 3-4 unmerged 2``), so that the LUT keeps it under its own workload and the pricing side
#: prices that very plan (`calibration_plan`). A record named after the model alone (every file before it) timed
#: every block linearised alone, merged where the run's entries say it pays.
CALIBRATION_SPANS = " spans "
#: A session pair (`dsprof.workflows.calibrate`, issue #46): the whole model twice in one group, scope
#: `IN_SITU_SCOPE`, ``original`` and this variant (a second session of the same model, built anew), named
#: `session_pair_name`. Their paired ratio is 1 but for how two sessions of one model differ and the rounds' noise:
#: what one later check of a plan carries, and what every piece timed inside the model carries beside its saving.
SESSION_AGAIN = "again"
_UNMERGED = " unmerged "
#: How a whole model's variant is shown where models are rows (a custom model under its own name).
MODEL_ROW_SUFFIX = {"merged": " (all blocks merged)", CALIBRATION: " (calibration: every block linearised)"}
CHECKSUM_FIELD = "sha256"  # each record's checksum (`record_checksum`); not a field of `Measurement`


_SESSION_PAIR = re.compile(r"\(session ([0-9]+)\)")


def session_pair_name(number: int) -> str:
    """The name of the ``number``-th session pair (from 1): ``(session 3)`` (a block's in-situ groups go by its
    module path, which a model would have to name so)."""
    return f"(session {number})"


def is_session_pair(name: str) -> bool:
    """Whether ``name`` is a session pair's (`session_pair_name`)."""
    return _SESSION_PAIR.fullmatch(name) is not None


def calibration_name(model: str, spans: Iterable[tuple[int, int]], unmerged: Iterable[int] = ()) -> str:
    """The name of the calibration group's record whose plan linearises every block, merges ``spans`` ([start,
    stop) each) as one convolution each, and merges every other block alone but those in ``unmerged`` (block
    indices): ``model`` alone where there are no spans (the plan of every file before issue #46)."""
    spans = tuple(spans)
    if not spans:
        return model
    rest = " ".join(str(i) for i in sorted(unmerged))
    return f"{model}{CALIBRATION_SPANS}{format_spans(spans)}" + (f"{_UNMERGED}{rest}" if rest else "")


def calibration_plan(name: str, model: str) -> tuple[tuple[tuple[int, int], ...], tuple[int, ...]] | None:
    """(spans, unmerged lone blocks) of the plan a calibration record named ``name`` (of ``model``) timed, read back
    from `calibration_name`; None where ``name`` is not such a name (``model`` alone: every block linearised alone,
    merged where the entries say it pays; or text that does not parse)."""
    head = model + CALIBRATION_SPANS
    if not name.startswith(head):
        return None
    spans_text, _, rest = name[len(head):].partition(_UNMERGED)
    try:
        spans = parse_spans(spans_text)
    except DsprofError:
        return None
    if rest and not all(p.isdecimal() and len(p) <= 6 for p in rest.split(" ")):
        return None
    return spans, tuple(int(p) for p in rest.split(" ")) if rest else ()


def _canonical_json(data: dict[str, Any]) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)


def record_checksum(data: dict[str, Any]) -> str:
    """SHA-256 (hex) of a record's canonical JSON without its ``sha256`` field: keys sorted, no spaces, non-ASCII
    escaped, no NaN (``json.dumps(record, sort_keys=True, separators=(",", ":"), allow_nan=False)``), UTF-8.
    It covers every value of the record, not its formatting: a value changed after writing changes it.
    Raises ValueError for a value JSON cannot hold (NaN, infinity)."""
    body = {k: v for k, v in data.items() if k != CHECKSUM_FIELD}
    return hashlib.sha256(_canonical_json(body).encode("utf-8")).hexdigest()

# Fields that describe the settings of a run: a file being resumed must agree on all of them.
SETTINGS_FIELDS = ("model", "model_options") + CONTEXT_FIELDS


@dataclass(frozen=True)
class Measurement:
    """One timed workload. Times in seconds. See the README ("Measurement records") for every field."""

    # what was timed
    model: str
    model_options: dict[str, Any]
    scope: str  # "block", "model", "stem"/"head" (the original model's parts outside its blocks), IN_SITU_SCOPE, "probe"
    name: str  # block module path (features.3) or model name
    index: int  # block index in execution order, -1 otherwise
    spec: str | None  # the original block's BlockSpec string; None otherwise
    variant: str  # original | merged | flops_matched | linear | custom
    input_shape: tuple[int, ...]  # (N, C, H, W) as timed
    macs: int  # of the timed module, one image
    params: int
    channels: tuple[int, int] | None  # (in, out) channels of a dense replacement
    # how
    backend: str
    device: str  # cpu, cuda:0
    device_name: str
    dtype: str
    layout: str  # nchw | channels_last | nhwc
    batch: int
    threads: int | None
    compile: str  # the torch-compile backend's mode, "" for the others (older files: a bool, read by `compile_setting`)
    # timing
    samples_s: tuple[float, ...]  # seconds per forward pass of one batch, in round order
    iterations_per_sample: int
    warmup_iterations: int
    stop_reason: str | None
    target_precision: float
    budget_s: float
    group: str  # records of one interleaved group share it; sample i of each comes from round i
    # where and when
    env_id: str
    environment: dict[str, Any] = field(repr=False)
    state_before: dict[str, Any] = field(repr=False)
    state_after: dict[str, Any] = field(repr=False)
    time_utc: str = ""
    error: str | None = None
    schema: str = SCHEMA
    # what the runtime reported while preparing the workload: compile_s (seconds compiling and running it once,
    # outside the samples), the settings a compiled model runs with; {} where the backend says nothing
    runtime_info: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.spec is not None:
            BlockSpec.from_str(self.spec)  # raises on a malformed key
        backend, mode = compile_setting(self.backend, self.compile)  # older files: backend torch, compile true
        object.__setattr__(self, "backend", backend)
        object.__setattr__(self, "compile", mode)

    # -- derived ---------------------------------------------------------------------------------
    @property
    def ok(self) -> bool:
        """True when the workload ran and has samples."""
        return self.error is None and len(self.samples_s) > 0

    @property
    def stats(self) -> SampleStats:
        """Median, mean, IQR, p90, p99, CoV and the noise flag of `samples_s` (seconds)."""
        return summarize(self.samples_s)

    @property
    def median_s(self) -> float:
        return self.stats.median

    @property
    def context(self) -> DeviceContext:
        """What this was timed on and how (environment, device, backend, dtype, layout, batch, threads, compile)."""
        return DeviceContext.of(self)

    @property
    def build_options(self) -> dict[str, Any]:
        """The model's build options (``width``, ``depths``...): `model_options` without the resolution."""
        return {k: v for k, v in self.model_options.items() if k not in ("resolution", "resolution_w")}

    @property
    def block_spec(self) -> BlockSpec | None:
        return BlockSpec.from_str(self.spec) if self.spec is not None else None

    @property
    def workload_key(self) -> tuple[str, str, str, str | None]:
        """(scope, name, variant, spec): what a resumed run skips when already in the file."""
        return (self.scope, self.name, self.variant, self.spec)

    def settings(self) -> dict[str, Any]:
        """The run settings a resumed file must agree on."""
        return {k: getattr(self, k) for k in SETTINGS_FIELDS}

    # -- (de)serialisation -----------------------------------------------------------------------
    def to_json(self) -> str:
        """One line of canonical JSON (no newline) with the record's checksum (`record_checksum`)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}  # plain values: no deep copy (`asdict`) needed
        return _canonical_json({**data, CHECKSUM_FIELD: record_checksum(data)})

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, environments: set[str] | None = None) -> "Measurement":
        """A record from its JSON fields; one with its ``sha256`` checksum is checked against it (a mismatch raises
        `MeasurementFileError`; `read_measurement_file` decides what to do with changed records). ``environments``:
        as `check_fields` takes it."""
        if data.get("schema") != SCHEMA:
            raise MeasurementFileError(f"not a {SCHEMA} record (schema {shown(data.get('schema'))})")
        if CHECKSUM_FIELD in data:
            data = dict(data)
            if data.pop(CHECKSUM_FIELD) != record_checksum(data):
                raise MeasurementFileError("the record was changed after it was written (its sha256 does not match)")
        names = {f.name for f in fields(cls)}
        missing = names - set(data) - {"time_utc", "error", "schema", "runtime_info"}
        if missing:
            raise MeasurementFileError(f"record lacks field(s) {sorted(missing)}")
        unknown = set(data) - names
        if unknown:
            raise MeasurementFileError(f"record has unknown field(s) {sorted(unknown)}")
        values = check_fields(dict(data), environments)
        if values["channels"] is not None:
            values["channels"] = tuple(values["channels"])
        return cls(**values)


def check_fields(values: dict[str, Any], environments: set[str] | None = None) -> dict[str, Any]:
    """The fields of a record read from a file (``from_dict``) or a device (`dsprof import`), checked by the rules
    of `dsprof.fields` (names, counts, samples, shape, model options); a bad one raises `dsprof.fields.FieldError`
    naming it. Returns ``values`` with the shape and the samples as tuples.

    ``environments``: the canonical JSON texts of environments found valid by earlier calls, which share the set
    (one per file read): an environment among them is not checked again, one that passes is added (up to
    `_ENVIRONMENTS_KEPT`). Every record of a run carries the same machine, and its check is most of a record's."""
    for name in ("env_id", "device", "backend", "dtype", "layout", "scope", "variant"):
        check_token(values.get(name), name)
    if not isinstance(values.get("compile"), bool) and values.get("compile") is not None:  # older files: a bool
        check_token(values.get("compile"), "compile", empty=True)
    check_name(values.get("device_name"), "device_name")
    check_count(values.get("batch"), "batch", 1, MAX_BATCH)
    check_count(values.get("threads"), "threads", 0, MAX_THREADS, none=True)
    for name in ("model", "name", "group"):
        check_text(values.get(name), name)
    check_text(values.get("time_utc", ""), "time_utc", limit=64)
    check_model_options(values.get("model_options"), "model_options")
    values["input_shape"] = check_shape(values.get("input_shape"))
    values["samples_s"] = check_samples(values.get("samples_s"))
    for name in ("macs", "params", "iterations_per_sample", "warmup_iterations"):
        check_count(values.get(name), name, 0, MAX_COUNT)
    check_count(values.get("index"), "index", -1, MAX_COUNT)
    for name in ("budget_s", "target_precision"):
        check_number(values.get(name), name, 0)
    if values.get("channels") is not None:
        if not isinstance(values["channels"], (list, tuple)) or len(values["channels"]) != 2:
            raise FieldError(f"field 'channels' must be null or two integers (in, out), got {shown(values['channels'])}")
        for i, c in enumerate(values["channels"]):
            check_count(c, f"channels[{i}]", 1, MAX_CHANNELS)
    check_text(values.get("stop_reason"), "stop_reason", limit=64, none=True)
    check_text(values.get("error"), "error", none=True, quoted=True)
    _check_environment(values.get("environment"), environments)
    for name in ("state_before", "state_after", "runtime_info"):
        if not isinstance(values.get(name) or {}, dict):
            raise FieldError(f"field {name!r} must be an object, got {type(values[name]).__name__}")
        check_plain(values.get(name), name)
    return values


#: The most environments one `check_fields` set remembers: a hostile file of many cannot make it grow with the file.
_ENVIRONMENTS_KEPT = 16


def _check_environment(env: Any, environments: set[str] | None) -> None:
    """`check_environment` of ``env``, but once per value in ``environments`` (`check_fields`): the same value, the
    same result, as its canonical JSON text says (1, 1.0 and true apart)."""
    key = None
    if environments is not None and isinstance(env, dict):
        try:
            key = _canonical_json(env)
        except (ValueError, RecursionError):  # NaN, infinity, nested too deep for JSON: checked (and refused) below
            pass
    if key is not None and key in environments:
        return
    check_environment(env)
    if key is not None and len(environments) < _ENVIRONMENTS_KEPT:
        environments.add(key)


def _bad_line(path: Path, number: int, exc: Exception) -> MeasurementFileError:
    return MeasurementFileError(
        f"{path}, line {number}: not a dsprof measurement record ({plain(exc)}). Remove that line (the other lines are "
        "records of their own), or point to another file."
    )


@dataclass
class MeasurementFile:
    """What `read_measurement_file` found in one file: the records it uses, and the lines it could not check
    (no checksum: written by an older dsprof, or by hand) or found changed after writing (checksum mismatch)."""

    path: Path
    records: list[Measurement]
    modified_lines: list[int]  # left out unless accepted
    unchecked: int  # records without a checksum (left out unless accepted, as changed ones are)


def _check(data: Any, path: Path, number: int, found: MeasurementFile) -> bool:
    """Whether the parsed line ``data`` is intact: it carries its checksum and the checksum agrees (recorded in
    ``found`` otherwise)."""
    if not isinstance(data, dict):
        raise _bad_line(path, number, ValueError(f"a JSON {type(data).__name__}, not an object"))
    stored = data.pop(CHECKSUM_FIELD, None)
    if stored is None:
        found.unchecked += 1
        return False
    try:
        intact = stored == record_checksum(data)
    except ValueError:  # NaN or infinity: no record dsprof writes holds one
        intact = False
    if not intact:
        found.modified_lines.append(number)
    return intact


def read_measurement_file(path: str | Path, *, accept_modified: bool = False) -> MeasurementFile:
    """The records of a measurement file, in file order, checked line by line.

    A record whose checksum does not agree with its values (changed after it was written), or that carries none
    (written by an older dsprof, or by hand: nothing tells it from an edited one), is left out, with a warning
    naming the file and its lines, unless ``accept_modified``. The checksum catches accidents and edits, it does not
    prove who wrote a file. A last line cut short by an interrupted run (no final newline, not JSON) is skipped with
    a warning. Any other bad line, or a field out of its rules (`check_fields`), raises `MeasurementFileError`
    naming the file and the line."""
    path = Path(path)
    text = read_text(path, "measurement file", "give a .jsonl file that `dsprof measure` or `dsprof import` wrote",
                     kind="measurement", if_missing="run `dsprof.measure()` first", error=MeasurementFileError)
    found = MeasurementFile(path, [], [], 0)
    environments: set[str] = set()  # found valid in this file (`check_fields`)
    lines = text.splitlines()
    cut_last = bool(text) and not text.endswith("\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError as exc:
            if cut_last and number == len(lines):
                warnings.warn(f"{path}, line {number}: skipped a last line cut short by an interrupted run "
                              "(`dsprof.measure(resume=True)` repairs the file)", stacklevel=2)
                break
            raise _bad_line(path, number, exc) from None
        if not _check(data, path, number, found) and not accept_modified:
            try:  # left out, but a line that is no record at all, or a field out of its rules, is still a bad line
                Measurement.from_dict(data, environments=environments)
            except (ValueError, TypeError, AttributeError) as exc:  # FieldError among them
                raise _bad_line(path, number, exc) from None
            continue
        try:
            found.records.append(Measurement.from_dict(data, environments=environments))
        except (ValueError, TypeError, AttributeError) as exc:
            raise _bad_line(path, number, exc) from None
    what = ("used as they are (accepted)" if accept_modified else
            "left out; `dsprof.measure(resume=True)` measures them again, `accept_modified=True` (build-lut, report) "
            "uses them as they are")
    if found.modified_lines:
        shown = ", ".join(map(str, found.modified_lines[:10])) + (", ..." if len(found.modified_lines) > 10 else "")
        n = len(found.modified_lines)
        warnings.warn(f"{path}, line{'s' if n > 1 else ''} {shown}: {n} record{'s' if n > 1 else ''} changed after "
                      f"{'they were' if n > 1 else 'it was'} written (checksum mismatch), {what}", stacklevel=2)
    if found.unchecked:
        warnings.warn(f"{path}: {found.unchecked} record(s) carry no checksum (written by an older dsprof, or "
                      f"edited), {what}", stacklevel=2)
    return found


def read_measurements(path: str | Path, *, accept_modified: bool = False) -> list[Measurement]:
    """All intact records of a measurement file, in file order (`read_measurement_file`: records changed after
    writing are left out unless ``accept_modified``; a cut last line is skipped; a bad line raises
    `MeasurementFileError`)."""
    return read_measurement_file(path, accept_modified=accept_modified).records


def repair_truncated_tail(path: Path) -> bool:
    """Drop a last line cut short by an interrupted write (no final newline, not valid JSON).

    Returns True when something was dropped. Every complete line is left as it is.
    """
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return False
    cut = data.rfind(b"\n") + 1
    try:
        json.loads(data[cut:])
        with path.open("ab") as f:  # a complete record that only lacks its newline
            f.write(b"\n")
        return False
    except ValueError:
        with path.open("r+b") as f:
            f.truncate(cut)
        return True


class MeasurementWriter:
    """Appends records to a JSON Lines file, synced to disk, under an advisory lock.

    The lock (``fcntl.flock``, exclusive, on the file itself; POSIX only) is held from opening to
    `close`: a second writer of the same file is refused with an `OutputPathError` rather than
    interleaving its lines. Each `write` is all or nothing: when the disk is full, a file-size limit is
    reached or the write is interrupted, the file is cut back to what it held before the call (no half
    line) and a `WriteError` (or the interrupt) is raised.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:  # not through a link: a planted link would make the run append to the file it names
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o666)
        except OSError as exc:
            why = "it is a link" if self.path.is_symlink() else exc.strerror or str(exc)
            raise OutputPathError(f"cannot write the measurement file {self.path}: {why}; choose another output "
                                  "path") from None
        if fcntl is not None:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(self._fd)
                raise _busy_error(self.path) from None

    def truncate(self) -> None:
        """Empty the file (``overwrite=True``), keeping it, and its lock."""
        os.ftruncate(self._fd, 0)

    def write(self, records: Iterable[Measurement]) -> None:
        data = memoryview("".join(record.to_json() + "\n" for record in records).encode("utf-8"))
        before = os.fstat(self._fd).st_size
        try:
            while data:
                data = data[os.write(self._fd, data):]
            os.fsync(self._fd)
        except BaseException as exc:  # a full disk, a size limit, Ctrl-C midway: back to the last whole record
            if data or isinstance(exc, OSError):  # (Ctrl-C once every line is written keeps them)
                try:
                    os.ftruncate(self._fd, before)
                except OSError:
                    pass
            if isinstance(exc, OSError):
                raise WriteError(
                    f"cannot write {self.path}: {exc.strerror or exc}; the file keeps the {_count_lines(self.path)} "
                    "records written before. Free space (or raise the file-size limit), then run the same command "
                    "with `resume=True`"
                ) from None
            raise

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # releases the lock
            self._fd = -1

    def __enter__(self) -> "MeasurementWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _busy_error(path: Path) -> OutputPathError:
    return OutputPathError(
        f"{path} is being written by another dsprof run (it holds the file's lock); wait until that run ends, then "
        "run again with `resume=True`, or choose another `out=`"
    )


def check_not_busy(path: str | Path) -> None:
    """Raise `OutputPathError` when another process holds ``path``'s writer lock (`MeasurementWriter`)."""
    if fcntl is None:
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return  # no file (or not readable): nothing to wait for
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        raise _busy_error(Path(path)) from None
    finally:
        os.close(fd)


def _count_lines(path: Path) -> int:
    with path.open("rb") as f:
        return sum(1 for _ in f)


def speedups(records: Iterable[Measurement], baseline: str = "original", confidence: float = 0.95) -> dict[tuple[str, str, str], Speedup]:
    """Paired speed-up of every variant over ``baseline`` of its scope within each interleaved group.

    Keyed by (scope, name, variant). Only groups where both ran, with equal sample counts, appear.
    """
    by_group: dict[str, list[Measurement]] = {}
    for r in records:
        if r.ok:
            by_group.setdefault(r.group, []).append(r)
    out = {}
    for group in by_group.values():
        bases: dict[str, Measurement] = {}
        for r in group:
            if r.variant == baseline:
                bases.setdefault(r.scope, r)  # a variant pairs with the original of its own scope (a model, not the stem)
        for r in group:
            base = bases.get(r.scope)
            if base is not None and r is not base and len(r.samples_s) == len(base.samples_s):
                out[(r.scope, r.name, r.variant)] = paired_speedup(base.samples_s, r.samples_s, confidence)
    return out


def original_in_group(record: Measurement, records: Iterable[Measurement]) -> Measurement | None:
    """The ``original`` timed in ``record``'s interleaved group (same scope, as many rounds), or None: the pair that
    `paired_with_original` divides."""
    return next((b for b in records if b.ok and b is not record and b.group == record.group and b.scope == record.scope
                 and b.variant == "original" and len(b.samples_s) == len(record.samples_s)), None)


def paired_with_original(record: Measurement, records: Iterable[Measurement], confidence: float = 0.95) -> Speedup | None:
    """The speed-up of ``record`` (e.g. a plan's merged model) over the original timed in its group: the median of
    the per-round ratios and its distribution-free interval (`paired_speedup`: sample i of both comes from round i,
    so what the machine did in a round divides out); None where its group has no original."""
    base = original_in_group(record, records)
    return paired_speedup(base.samples_s, record.samples_s, confidence) if base is not None else None
