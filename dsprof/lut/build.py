"""Building a LUT from measurement files of one or many devices."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Iterable

import pandas as pd

from ..errors import InputFileError, LUTError
from ..fields import MAX_THREADS, shown
from ..io import files_below, one_or_many
from ..records.measurement import IN_SITU_SCOPE, Measurement, MeasurementFile, read_measurement_file
from ..records.stats import summarize
from .interval import IQR_TO_SD, median_error
from .schema import COLUMNS, SCHEMA, in_situ_workload, model_label
from .table import LUT

__all__ = ["build_lut", "lut_from_files", "measurement_files", "read_measurement_files", "workload_of"]


def measurement_files(paths: str | Path | Iterable[str | Path]) -> list[Path]:
    """The ``.jsonl`` files that ``paths`` (one path, or several) name: files as given, folders searched
    recursively."""
    files: list[Path] = []
    given = one_or_many(paths)  # a generator read once, not emptied by the check
    if any(not isinstance(p, (str, Path)) for p in given):
        raise InputFileError(f"give measurement files (.jsonl) or folders holding them, as paths; not {shown(paths)}")
    for p in map(Path, given):
        if p.is_dir():
            files += files_below(p, "*.jsonl")
        elif p.is_file():
            files.append(p)
        else:
            raise InputFileError(f"{p} does not exist; give measurement files (.jsonl) or folders holding them")
    if not files:
        raise InputFileError("no measurement files (.jsonl) found; run `dsprof.measure()` first")
    return files


def read_measurement_files(paths: str | Path | Iterable[str | Path], *, accept_modified: bool = False) -> list[MeasurementFile]:
    """`read_measurement_file` of every file that ``paths`` name (`measurement_files`)."""
    return [read_measurement_file(p, accept_modified=accept_modified) for p in measurement_files(paths)]


def workload_of(r: Measurement) -> str:
    """The LUT workload of a record: a block's BlockSpec string; for a block timed in situ the model
    label and the block's name (`in_situ_workload`); for the drift probe its name; else the model label."""
    if r.scope == "block":
        return r.spec
    if r.scope == IN_SITU_SCOPE:
        return in_situ_workload(model_label(r.model, r.model_options), r.name)
    if r.scope == "probe":  # the same reference in every run, whatever model the run measured
        return r.name
    return model_label(r.name, r.model_options)


def _key(r: Measurement) -> tuple:
    return r.context.as_tuple() + (r.scope, workload_of(r), r.variant)


def build_lut(paths: str | Path | Iterable[str | Path], out: str | Path | None = None, *,
              accept_modified: bool = False) -> LUT:
    """One LUT entry per key from all records of ``paths`` (a file or folder, or several), as `lut_from_files` pools
    them (`dsprof build-lut`). Records changed after they were written are left out (with a warning naming file and
    lines) unless ``accept_modified``; the LUT's ``modified`` counts them. With ``out`` the LUT is written there
    (CSV, whole, at the end); one without an entry is refused then."""
    files = read_measurement_files(paths, accept_modified=accept_modified)
    lut = lut_from_files(files)
    lut.modified, lut.modified_used = sum(len(f.modified_lines) for f in files), accept_modified
    if out is not None:
        if not len(lut):
            raise LUTError("the measurement files hold no successful record; nothing to tabulate")
        lut.save(out)
        lut.source = str(out)  # its messages name the file written, as a LUT loaded from it does
    return lut


def lut_from_files(files: Iterable[MeasurementFile]) -> LUT:
    """One LUT entry per key from the records of measurement files read by `read_measurement_files`.

    Repeated measurements of a key are combined by pooling their raw samples (the entry's
    median is the median of all samples); different environments, devices, backends, dtypes,
    layouts, batch sizes and thread counts are different keys and never averaged. Failed records
    are left out. Noisy entries (IQR/median > 10 %) are kept and marked. Each record is also one *group*
    (the interleaved group it was timed in, of one run): the entry keeps how many there were and the spread of
    their medians (``groups``, ``group_iqr_s``), and, for a variant timed beside its group's ``original``, the
    paired ratio of the two from their per-round ratios (``ratio``, ``ratio_se``; `paired_ratio`).
    """
    samples: dict[tuple, list[float]] = defaultdict(list)
    medians: dict[tuple, list[float]] = defaultdict(list)
    ratios: dict[tuple, list[list[float]]] = defaultdict(list)
    sources: dict[tuple, list[str]] = defaultdict(list)
    names: dict[tuple, str] = {}
    times: dict[tuple, str] = {}
    shares: dict[tuple, list[float]] = defaultdict(list)  # the CPU share each group got (CPU runs)
    for file in files:
        ok = [r for r in file.records if r.ok]
        bases = {(r.group, r.scope): r for r in ok if r.variant == "original"}
        for r in ok:
            key = _key(r)
            samples[key] += r.samples_s
            medians[key].append(r.median_s)
            base = bases.get((r.group, r.scope)) if r.variant != "original" else None
            if base is not None and len(base.samples_s) == len(r.samples_s):  # sample i of both from round i
                ratios[key].append([v / b for v, b in zip(r.samples_s, base.samples_s)])
            if file.path.name not in sources[key]:
                sources[key].append(file.path.name)
            names.setdefault(key, r.device_name)
            times[key] = max(times.get(key, ""), r.time_utc)
            share = r.state_after.get("process_cpu_share")
            if isinstance(share, (int, float)) and not isinstance(share, bool) and 0 <= share <= MAX_THREADS:
                shares[key].append(float(share))  # (a file from elsewhere may hold anything there)
    rows = []
    for key, values in samples.items():
        env_id, device, backend, dtype, layout, batch, threads, compiled, scope, workload, variant = key
        stats = summarize(values)
        ratio, ratio_se = paired_ratio(ratios[key]) if ratios.get(key) else (float("nan"), float("nan"))
        rows.append(
            {
                "schema": SCHEMA, "env_id": env_id, "device_name": names[key], "device": device,
                "backend": backend, "dtype": dtype, "layout": layout, "batch": batch, "threads": threads,
                "compile": compiled, "scope": scope, "workload": workload, "variant": variant,
                "median_s": stats.median, "iqr_s": stats.iqr, "n_samples": stats.count,
                "noisy": stats.noisy, "sources": ";".join(sources[key]), "groups": len(medians[key]),
                "group_iqr_s": summarize(medians[key]).iqr, "ratio": ratio, "ratio_se": ratio_se,
                "time_utc": times[key],
                "cpu_share": statistics.median(shares[key]) if shares.get(key) else float("nan"),
            }
        )
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    if len(frame):
        frame = frame.sort_values(["env_id", "device", "backend", "batch", "scope", "workload", "variant"])
    return LUT(frame, source="<built>")


def paired_ratio(groups: list[list[float]]) -> tuple[float, float]:
    """(ratio, standard error) of a variant over its group's original from each group's per-round ratios: the
    median over the groups of each group's median ratio; its error within each group is the standard error of
    that median (`median_error`), across groups the spread of the group medians (sigma from their IQR) over
    the square root of their count, whichever is larger."""
    per_group = [summarize(g) for g in groups]
    ratio = statistics.median(s.median for s in per_group)
    within = math.sqrt(sum(median_error(s.iqr, s.count) ** 2 for s in per_group)) / len(per_group)
    between = summarize([s.median for s in per_group]).iqr * IQR_TO_SD / math.sqrt(len(per_group))
    return ratio, max(within, between)
