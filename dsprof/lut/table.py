"""The `LUT` class: a validated latency table, its file, lookups with loud misses."""

from __future__ import annotations

import difflib
import hashlib
import io
import math
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from ..errors import LUTError, LUTMissError, WithHint  # (LUTError: defined once, in dsprof.errors)
from ..fields import (MAX_BATCH, MAX_SAMPLE_S, MAX_THREADS, FieldError, check_count, check_name, check_text,
                      check_token, plain, shown)
from ..io import atomic_write_text, csv_frame, read_text
from ..portable.cpu_share import CPU_SHARE_WARNING
from ..models import BlockSpec
from ..device_context import DeviceContext, compile_setting, contexts_named, short_labels
from ..records.measurement import IN_SITU_SCOPE
from .schema import COLUMNS, CONTEXT_COLUMNS, GROUP_COLUMNS, KEY_COLUMNS, OLD_SCHEMAS, OPTIONAL_COLUMNS, PREDICTED, SCHEMA

__all__ = ["LUT", "LUTEntry", "LUTError", "LUTMissError", "LUTMissWarning"]

_END = "# end rows="
_END_LINE = re.compile(r"# end rows=(\d+)(?: sha256=([0-9a-f]{64}))?")


def table_checksum(text: str) -> str:
    """SHA-256 (hex) of a LUT file's text before its end line: the header and every row, as UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
_BOOL = {"True": True, "False": False, "true": True, "false": False}
SCOPES = ("block", "model", "stem", "head", IN_SITU_SCOPE, "probe")


class LUTMissWarning(WithHint, UserWarning):
    """A lookup of a key the LUT does not have (non-strict); its ``hint`` (a `MeasureHint`): what to time to add it."""


@dataclass(frozen=True)
class LUTEntry:
    """One row of a LUT: latency statistics of one workload in one context (seconds). ``groups`` and
    ``group_iqr_s``: how many interleaved groups it was timed in and the IQR of their medians; ``ratio`` and
    ``ratio_se``: its paired time ratio over its group's original and that ratio's standard error (NaN for an
    original); ``time_utc``: when its last group was timed (docs/lut.md)."""

    median_s: float
    iqr_s: float
    n_samples: int
    noisy: bool
    sources: str
    groups: int = 1
    group_iqr_s: float = 0.0
    ratio: float = math.nan
    ratio_se: float = math.nan
    time_utc: str = ""
    cpu_share: float = math.nan

    @classmethod
    def of(cls, row: Any) -> "LUTEntry":
        """The entry of one table row (a pandas row or named tuple)."""
        return cls(float(row.median_s), float(row.iqr_s), int(row.n_samples), bool(row.noisy), str(row.sources),
                   int(row.groups), float(row.group_iqr_s), float(row.ratio), float(row.ratio_se), str(row.time_utc),
                   float(row.cpu_share))

    @property
    def predicted(self) -> bool:
        """Whether the entry was predicted from another context's (`dsprof measure --few`), not measured."""
        return self.sources.startswith(PREDICTED)


class LUT:
    """A latency lookup table: one row per (device context, scope, workload, variant).

    Build one from measurement files with `build_lut`, or `LUT.load` a saved one.
    """

    def __init__(self, frame: pd.DataFrame, source: str = "<table>") -> None:
        self._frame = _validate(frame.reset_index(drop=True), source)
        self.source = source
        self.modified = 0  # records changed after they were written, among those it was built from (`build_lut`)
        self.modified_used = False  # whether those were used as they are (`build_lut(accept_modified=True)`)

    @classmethod
    def concat(cls, luts: "list[LUT]") -> "LUT":
        """One table of several (`dsprof plan` with several LUTs); a key that two of them hold raises `LUTError`
        naming both files."""
        luts = list(luts)
        if len(luts) == 1:
            return luts[0]
        seen: dict[tuple, str] = {}
        for lut in luts:
            for key in lut._frame[list(KEY_COLUMNS)].itertuples(index=False, name=None):
                if key in seen:
                    context = DeviceContext(*key[:len(CONTEXT_COLUMNS)])
                    raise LUTError(f"{seen[key]} and {lut.source} both hold {key[-3]} {key[-2]} [{key[-1]}] in {context}: "
                                   "give each context once, or build one LUT from all the measurement files with "
                                   "`dsprof.build_lut()`")
                seen[key] = lut.source
        frame = pd.concat([lut._frame for lut in luts], ignore_index=True)
        return cls(frame, " + ".join(lut.source for lut in luts))

    def predicted_count(self, key: DeviceContext) -> int:
        """How many entries of context ``key`` were predicted (`dsprof measure --few`), not measured."""
        return int(self.entries(key)["sources"].str.startswith(PREDICTED).sum())

    # -- files -----------------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path, *, accept_modified: bool = False) -> "LUT":
        """Read and validate a LUT file; any problem raises `LUTError` naming the file and row.

        The end line ``# end rows=N sha256=HEX`` tells a complete file from a cut one and carries the checksum of
        the text before it (`table_checksum`): a table changed after `dsprof build-lut` wrote it raises `LUTError`
        unless ``accept_modified``; so does a table without a checksum (an older dsprof's, or one edited by hand:
        nothing tells them apart). The checksum catches accidents and edits; it does not prove who wrote the file."""
        if not isinstance(path, (str, Path)):
            raise LUTError(f"`lut=` takes a LUT or the path of a LUT file, not {type(path).__name__} {shown(path)}")
        path = Path(path)
        rebuild = "build one from measurement files with `dsprof.build_lut(FILES, out='lut.csv')`"
        text = read_text(path, "LUT file", rebuild, kind="lut",
                         if_missing=f"build one with `dsprof.build_lut(FILES, out={str(path)!r})`",
                         error=LUTError)
        body, _, last = text.rstrip("\n").rpartition("\n")
        data_rows = sum(1 for line in body.split("\n")[1:] if line and not line.startswith("#"))
        end = _END_LINE.fullmatch(last)
        if end is None:  # cut short (or not a LUT at all): nothing to use as it is
            raise LUTError(f"{path}: truncated, or not a LUT (it must end with '{_END}{data_rows} sha256=...'); "
                           "rebuild it with `dsprof.build_lut()`")
        if end[1] != str(data_rows) and not accept_modified:  # rows deleted or added by hand
            raise LUTError(
                f"{path}: truncated or altered: its end line counts {end[1]} rows, it holds {data_rows}; rebuild it "
                "with `dsprof.build_lut()`, or pass `accept_modified=True` to use the rows it holds"
            )
        if end[2] is None and not accept_modified:
            raise LUTError(
                f"{path}: its end line carries no checksum (written by an older dsprof, or edited), so nothing tells "
                "it from a changed table; rebuild it from the measurement files with `dsprof.build_lut()`, or pass "
                "`accept_modified=True` to use it as it is"
            )
        if end[2] is not None and end[2] != table_checksum(body + "\n") and not accept_modified:
            raise LUTError(
                f"{path}: changed after `dsprof.build_lut()` wrote it (its checksum does not match its rows); "
                "rebuild it from the measurement files with `dsprof.build_lut()`, or pass `accept_modified=True` to use it "
                "as it is"
            )
        try:
            frame = pd.read_csv(io.StringIO(body), comment="#", dtype=str, keep_default_na=False)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
            raise LUTError(f"{path}: not a CSV latency table ({' '.join(str(exc).split())}); {rebuild}") from None
        return cls(frame, str(path))

    def save(self, path: str | Path) -> Path:
        """Write the table atomically (a reader sees the old file or the new one, never a mix), ending with the
        line ``# end rows=N sha256=HEX`` (`table_checksum` of the text before it). A text cell that a spreadsheet would
        run as a formula is written as text (`csv_frame`)."""
        text = csv_frame(self._frame).to_csv(index=False, lineterminator="\n")
        return atomic_write_text(path, f"{text}{_END}{len(self._frame)} sha256={table_checksum(text)}\n")

    # -- views -----------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._frame)

    def text(self, words: Callable[[str], str] = str) -> str:
        """What `dsprof build-lut` prints of the table it wrote: its file, entries and noisy ones, the changed records
        it was built from, and each context with its count; in the caller's words (``words``:
        `dsprof.cli.flags.command_line_text` gives the command line's options where this names parameters)."""
        lines = [f"{self.source}: {len(self)} entries, {int(self._frame.noisy.sum())} marked noisy (IQR/median > 10 %)"]
        if self.modified:
            lines.append(words(f"{self.modified} record(s) changed after they were written: " + (
                "used as they are (`accept_modified=True`)" if self.modified_used else
                "left out (the warnings name them; `accept_modified=True` uses them)")))
        lines += [f"  {key}  {self.device_name(key)}: {len(self.entries(key))} entries" for key in self.devices()]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def to_dataframe(self) -> pd.DataFrame:
        """A copy of the table (typed columns)."""
        return self._frame.copy()

    def devices(self) -> list[DeviceContext]:
        """The device contexts the table holds, sorted by their string form."""
        rows = self._frame[list(CONTEXT_COLUMNS)].drop_duplicates().itertuples(index=False)
        return sorted((DeviceContext(*r) for r in rows), key=str)

    def device_name(self, key: DeviceContext | str) -> str:
        """The human-readable device name of a context."""
        rows = self.entries(self.resolve(key))
        return str(rows["device_name"].iloc[0])

    def resolve(self, key: DeviceContext | str | None = None, **filters: Any) -> DeviceContext:
        """The one context that ``key`` names (its key, its label as `dsprof plan` prints it, or a backend:
        `contexts_named`), or that ``filters`` (e.g. backend="onnxruntime", batch=1) leave; none or several raise an
        error that lists what the table has."""
        candidates = self.devices()
        if key is not None:
            candidates = contexts_named(key, candidates)
        for name, value in filters.items():
            if value is not None:
                candidates = [d for d in candidates if getattr(d, name) == value]
        if len(candidates) == 1:
            return candidates[0]
        labels = short_labels(self.devices())
        listing = "\n  ".join(f"{d}  ({labels[d]}; {self._name_of(d)})" for d in self.devices()) or "(none)"
        what = "no context matches" if not candidates else "several contexts match"
        asked = str(key) if key is not None else ", ".join(f"{k} {v}" for k, v in filters.items() if v is not None)
        raise LUTError(f"{self.source}: {what}{f' {asked}' if asked else ''}; give one of these, by its key or its label, as `device_key=`:\n  {listing}")

    def _name_of(self, key: DeviceContext) -> str:
        return str(self.entries(key)["device_name"].iloc[0])

    def measured_utc(self, key: DeviceContext | str | None = None) -> str:
        """When the last group of a context was timed (ISO 8601, UTC; "" for a table from before dsprof.lut/2):
        the moment the context's milliseconds belong to."""
        return str(self.entries(self.resolve(key))["time_utc"].max())

    def contention(self, key: DeviceContext | str | None = None) -> float | None:
        """The median CPU share (`cpu_share`) the groups of a single-threaded CPU context got, where it is below
        `CPU_SHARE_WARNING` (the run was contended: its timings likely inflated, its figures drafts), else None (not
        contended, not recorded, or several threads, where a low share can also mean serial code)."""
        context = self.resolve(key)
        shares = self.entries(context)["cpu_share"].dropna()
        if context.threads != 1 or not len(shares):
            return None
        share = float(shares.median())
        return share if share < CPU_SHARE_WARNING else None

    def contention_label(self, key: DeviceContext | str | None = None) -> str:
        """The short label that every figure built on a contended context carries where it is shown ("draft: LUT run
        contended, 70 % CPU"; `contention`), "" where the context is not contended."""
        share = self.contention(key)
        return "" if share is None else f"draft: LUT run contended, {share * 100:.0f} % CPU"

    def entries(self, key: DeviceContext) -> pd.DataFrame:
        """The rows of one device context (every scope, workload and variant)."""
        f = self._frame
        mask = pd.Series(True, index=f.index)
        for name, value in key.as_dict().items():
            mask &= f[name] == value
        return f[mask]

    # -- lookups ---------------------------------------------------------------------------------
    def lookup(
        self,
        workload: str | BlockSpec,
        variant: str = "original",
        device: DeviceContext | str | None = None,
        *,
        scope: str = "block",
        strict: bool = False,
    ) -> LUTEntry | None:
        """The entry of ``workload`` (a BlockSpec, or a model label) in ``variant`` for ``device``.

        A miss names the missing key and the nearest keys present; it raises `LUTMissError` with
        ``strict=True`` and warns (`LUTMissWarning`) and returns None otherwise.
        """
        key = self.resolve(device)
        entry = self.find(workload, variant, key, scope=scope)
        if entry is not None:
            return entry
        workload = workload.to_str() if isinstance(workload, BlockSpec) else workload
        rows = self.entries(key)
        present = [f"{s} {w} [{v}]" for s, w, v in rows[["scope", "workload", "variant"]].itertuples(index=False)]
        wanted = f"{scope} {workload} [{variant}]"
        nearest = difflib.get_close_matches(wanted, present, n=3, cutoff=0.0)
        message = (
            f"LUT miss in {self.source} for {key}: {wanted}. Nearest keys present: "
            + ("; ".join(nearest) if nearest else "none (this context is empty)")
            + ". Measure it with `dsprof measure` on that device and rebuild the LUT."
        )
        if strict:
            raise LUTMissError(message)
        warnings.warn(message, LUTMissWarning, stacklevel=2)
        return None

    def find(
        self, workload: str | BlockSpec, variant: str = "original", device: DeviceContext | str | None = None,
        *, scope: str = "block",
    ) -> LUTEntry | None:
        """`lookup` without the miss report: the entry, or None (for callers that gather their misses)."""
        workload = workload.to_str() if isinstance(workload, BlockSpec) else workload
        rows = self.entries(self.resolve(device))
        hit = rows[(rows["scope"] == scope) & (rows["workload"] == workload) & (rows["variant"] == variant)]
        if not len(hit):
            return None
        return LUTEntry.of(hit.iloc[0])


def _optional_float(value: Any) -> float:
    """A float cell that may be empty (NaN)."""
    return math.nan if value is None or (isinstance(value, str) and not value.strip()) else float(value)


def _validate(frame: pd.DataFrame, source: str) -> pd.DataFrame:
    """Check and type a table; every problem names ``source`` and the CSV line of the row. A table of an older
    schema (`OLD_SCHEMAS`) gets the columns it lacks (`GROUP_COLUMNS`), with one warning."""
    old = len(frame) and "schema" in frame.columns and set(frame["schema"].astype(str)) <= set(OLD_SCHEMAS)
    if old and not set(GROUP_COLUMNS) & set(frame.columns):
        warnings.warn(f"{source}: a {frame['schema'].iloc[0]} table, from before the group columns: its intervals "
                      "know one group per entry and no paired ratios; rebuild it from its measurement files with "
                      "`dsprof.build_lut()` for intervals from the spread of group medians", stacklevel=4)
        frame = frame.assign(**GROUP_COLUMNS, schema=SCHEMA)
    frame = frame.assign(**{c: v for c, v in OPTIONAL_COLUMNS.items() if c not in frame.columns})
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise LUTError(f"{source}: missing column(s) {', '.join(missing)}; expected {', '.join(COLUMNS)}")
    frame = frame[list(COLUMNS)].copy()

    def where(i: int) -> str:
        return f"{source}, row {i + 1} (line {i + 2})"

    out: dict[str, list[Any]] = {c: [] for c in COLUMNS}
    for i, row in enumerate(frame.itertuples(index=False)):
        r = row._asdict()
        if str(r["schema"]) != SCHEMA:
            raise LUTError(f"{where(i)}: unknown schema version {shown(r['schema'])}; this dsprof reads {SCHEMA}")
        try:
            typed = {
                "batch": int(r["batch"]),
                "threads": int(r["threads"]),
                "n_samples": int(r["n_samples"]),
                "median_s": float(r["median_s"]),
                "iqr_s": float(r["iqr_s"]),
                "groups": int(r["groups"]),
                "group_iqr_s": float(r["group_iqr_s"]),
                "ratio": _optional_float(r["ratio"]),
                "ratio_se": _optional_float(r["ratio_se"]),
                "time_utc": str(r["time_utc"]),
                "cpu_share": _optional_float(r["cpu_share"]),
                "noisy": _BOOL[str(r["noisy"])] if not isinstance(r["noisy"], bool) else r["noisy"],
            }
        except (ValueError, KeyError, TypeError) as exc:
            raise LUTError(f"{where(i)}: a value is not of its column's type ({plain(exc)})") from None
        # the compile mode (older tables: True/False, with backend torch for torch-compile): `compile_setting`
        typed["backend"], typed["compile"] = compile_setting(str(r["backend"]), r["compile"])
        try:  # the names and counts a table from elsewhere may carry: `dsprof.fields`
            for name in ("env_id", "device", "backend", "dtype", "layout", "variant"):
                check_token(typed.get(name, r[name]), name)
            check_token(typed["compile"], "compile", empty=True)
            check_name(r["device_name"], "device_name")
            check_count(typed["batch"], "batch", 1, MAX_BATCH)
            check_count(typed["threads"], "threads", 0, MAX_THREADS)
            check_text(r["workload"], "workload", limit=2000)
            check_text(r["sources"], "sources", limit=1_000_000)
        except FieldError as exc:
            raise LUTError(f"{where(i)}: {exc}; rebuild the LUT with `dsprof.build_lut()`") from None
        if typed["median_s"] > MAX_SAMPLE_S:
            raise LUTError(f"{where(i)}: median_s must be at most {MAX_SAMPLE_S:.0f} seconds, got {shown(r['median_s'])}")
        if not math.isfinite(typed["median_s"]) or typed["median_s"] <= 0:
            raise LUTError(f"{where(i)}: median_s must be a positive number of seconds, got {shown(r['median_s'])}")
        if not math.isfinite(typed["iqr_s"]) or typed["iqr_s"] < 0:
            raise LUTError(f"{where(i)}: iqr_s must be a non-negative number of seconds, got {shown(r['iqr_s'])}")
        if typed["n_samples"] < 1 or typed["batch"] < 1 or typed["threads"] < 0 or typed["groups"] < 1:
            raise LUTError(f"{where(i)}: n_samples, groups and batch must be >= 1 and threads >= 0")
        if not typed["group_iqr_s"] >= 0 or not (math.isnan(typed["ratio"]) or typed["ratio"] > 0) \
                or not (math.isnan(typed["ratio_se"]) or typed["ratio_se"] >= 0):
            raise LUTError(f"{where(i)}: group_iqr_s and ratio_se must be >= 0 and ratio > 0 (or empty)")
        if not (math.isnan(typed["cpu_share"]) or 0 <= typed["cpu_share"] <= MAX_THREADS):
            raise LUTError(f"{where(i)}: cpu_share must be a share of the CPU time, from 0 (or empty); got "
                           f"{shown(r['cpu_share'])}")
        if r["scope"] not in SCOPES:
            raise LUTError(f"{where(i)}: unknown scope {shown(r['scope'])}; known: {', '.join(SCOPES)}")
        if r["scope"] == "block":
            try:
                BlockSpec.from_str(str(r["workload"]))
            except ValueError as exc:
                raise LUTError(f"{where(i)}: {exc}") from None
        for c in COLUMNS:
            out[c].append(typed.get(c, r[c]))
    table = pd.DataFrame(out, columns=list(COLUMNS))
    dup = table.duplicated(list(KEY_COLUMNS), keep=False)
    if dup.any():
        first, second = [int(i) for i in table.index[dup][:2]]
        raise LUTError(f"{where(second)}: duplicate key, same as row {first + 1}; each key may appear once")
    return table
