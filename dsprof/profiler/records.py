"""The `Measurement` record and its file format: JSON Lines, one self-contained record per line.

Every line holds what was timed (model, block, `BlockSpec` string, variant, input shape, MACs),
how (backend, device, dtype, layout, batch, threads), where (environment id and fingerprint, device
state before and after), and the raw samples in seconds. Statistics are derived from the samples
(`Measurement.stats`), never stored instead of them. Lines are appended and flushed as they are
measured, so an interrupted run keeps everything it finished.
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..device_context import CONTEXT_FIELDS, DeviceContext
from ..errors import InputFileError, MeasurementFileError  # noqa: F401  (MeasurementFileError: defined once, in dsprof.errors)
from ..models import BlockSpec
from .stats import SampleStats, Speedup, paired_speedup, summarize

__all__ = ["SCHEMA", "Measurement", "MeasurementFileError", "MeasurementWriter", "read_measurements", "speedups"]

SCHEMA = "dsprof.measurement/1"

# Fields that describe the settings of a run: a file being resumed must agree on all of them.
SETTINGS_FIELDS = ("model", "model_options") + CONTEXT_FIELDS


@dataclass(frozen=True)
class Measurement:
    """One timed workload. Times in seconds. See the README ("Measurement records") for every field."""

    # what was timed
    model: str
    model_options: dict[str, Any]
    scope: str  # "block", "model", "stem"/"head" (the original model's parts outside its blocks), "context", "probe"
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
    compile: bool
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

    def __post_init__(self) -> None:
        if self.spec is not None:
            BlockSpec.from_str(self.spec)  # raises on a malformed key

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
        """One line of JSON (no newline)."""
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"), allow_nan=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Measurement":
        if data.get("schema") != SCHEMA:
            raise MeasurementFileError(f"not a {SCHEMA} record (schema {data.get('schema')!r})")
        names = {f.name for f in fields(cls)}
        missing = names - set(data) - {"time_utc", "error", "schema"}
        if missing:
            raise MeasurementFileError(f"record lacks field(s) {sorted(missing)}")
        unknown = set(data) - names
        if unknown:
            raise MeasurementFileError(f"record has unknown field(s) {sorted(unknown)}")
        values = dict(data)
        values["input_shape"] = tuple(values["input_shape"])
        values["samples_s"] = tuple(float(v) for v in values["samples_s"])
        if values["channels"] is not None:
            values["channels"] = tuple(values["channels"])
        return cls(**values)


def _bad_line(path: Path, number: int, exc: Exception) -> MeasurementFileError:
    return MeasurementFileError(
        f"{path}, line {number}: not a dsprof measurement record ({exc}). Remove that line (the other lines are "
        "records of their own), or point to another file."
    )


def _parse_lines(lines: list[str], path: Path, cut_last: bool = False) -> Iterator[Measurement]:
    """The records of ``lines``; with ``cut_last`` (the text lacks its final newline), a last line that is
    not JSON is what an interrupted write leaves: skipped with a warning, the lines before it kept."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError as exc:
            if cut_last and number == len(lines):
                warnings.warn(f"{path}, line {number}: skipped a last line cut short by an interrupted run "
                              "(`dsprof measure --resume` repairs the file)", stacklevel=3)
                return
            raise _bad_line(path, number, exc) from None
        try:
            yield Measurement.from_dict(data)
        except (ValueError, TypeError) as exc:
            raise _bad_line(path, number, exc) from None


def read_measurements(path: str | Path) -> list[Measurement]:
    """All records of a measurement file, in file order. A bad line raises `MeasurementFileError`, but for a
    last line cut short by an interrupted run (no final newline, not JSON): that one is skipped with a warning
    naming the file and the line."""
    path = Path(path)
    if not path.is_file():
        raise InputFileError(f"measurement file {path} does not exist; run `dsprof measure` first")
    text = path.read_text(encoding="utf-8")
    return list(_parse_lines(text.splitlines(), path, cut_last=bool(text) and not text.endswith("\n")))


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
    """Appends records to a JSON Lines file, flushing and syncing each one to disk as it is written."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._file = self.path.open("a", encoding="utf-8")

    def write(self, records: Iterable[Measurement]) -> None:
        for record in records:
            self._file.write(record.to_json() + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "MeasurementWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def speedups(records: Iterable[Measurement], baseline: str = "original", confidence: float = 0.95) -> dict[tuple[str, str, str], Speedup]:
    """Paired speed-up of every variant over ``baseline`` within each interleaved group.

    Keyed by (scope, name, variant). Only groups where both ran, with equal sample counts, appear.
    """
    by_group: dict[str, list[Measurement]] = {}
    for r in records:
        if r.ok:
            by_group.setdefault(r.group, []).append(r)
    out = {}
    for group in by_group.values():
        base = next((r for r in group if r.variant == baseline), None)
        if base is None:
            continue
        for r in group:
            if r is not base and len(r.samples_s) == len(base.samples_s):
                out[(r.scope, r.name, r.variant)] = paired_speedup(base.samples_s, r.samples_s, confidence)
    return out
