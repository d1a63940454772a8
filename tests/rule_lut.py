"""A real LUT whose medians follow a fixed rule: for tests whose subject is not timing.

A test of what the planner, `predict` or a report *does with* a LUT must not depend on what a busy machine's
clock said (at 32 px a block timed alone may take longer than the whole model, or a span more than its two
blocks, and the planner then chooses otherwise or refuses the table). `rule_lut` keeps everything real -- the
measurement records, `build_lut` (or `dsprof build-lut`), the table's keys, sample counts and sources, the file
with its checksum -- and rewrites each entry's median from the rule below, through the LUT API, so that what the
planner chooses is known in advance and can be derived by hand.

The rule (`rule_median_s`): a workload timed alone costs a fixed overhead per call plus a time per MAC,

    median_s = OVERHEAD_S + S_PER_MAC * MACs                  (a block in any variant, a span, stem, head, probe)
    median_s = (1 + n) * OVERHEAD_S + S_PER_MAC * MACs        (a whole model of n blocks, alone or in context)

with MACs those of the timed module for its whole batch (the records' ``macs`` times the batch) and n the
number of the model's blocks in the records. The whole model is thus its blocks' originals plus one more call
for what runs outside them (the rest, ``OVERHEAD_S`` plus the stem's and head's MACs: positive); a span of two
blocks saves one call less the MACs its larger kernel adds (at the small sizes the tests use, less than a call:
tests/models/flatnet.py's costliest span at 32 px adds 1.13 M MACs, 113 us, so spans are clearly cheaper than their
blocks); a lone block merges where merging lowers its MACs (its ``linear`` variant has the original's MACs where
the padding goes back in place, hence its median). Each entry's IQR is `IQR_FRACTION` of its median (not noisy),
the same on every machine.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from dsprof.lut import LUT
from dsprof.lut.build import read_measurement_files, workload_of
from dsprof.lut.schema import KEY_COLUMNS, model_label
from dsprof.records.measurement import IN_SITU_SCOPE

__all__ = ["IQR_FRACTION", "OVERHEAD_S", "S_PER_MAC", "rule_lut", "rule_lut_after", "rule_median_s"]

OVERHEAD_S = 200e-6  # seconds per call of a workload (one block, span, stem, head; a model pays one per block + 1)
S_PER_MAC = 1e-10  # seconds per multiply-accumulate (10 GMAC/s)
IQR_FRACTION = 0.02  # each entry's IQR, as a fraction of its median
_WHOLE = ("model", IN_SITU_SCOPE)  # scopes that time a whole model (alone, or with one block swapped)


def rule_median_s(macs: int, blocks: int = 0, overhead_s: float = OVERHEAD_S, s_per_mac: float = S_PER_MAC) -> float:
    """The rule's median (seconds) of a workload of ``macs`` MACs (its whole batch); ``blocks``: for a whole
    model, its number of blocks (one call each, plus one for the rest); ``overhead_s`` per call, ``s_per_mac``."""
    return (1 + blocks) * overhead_s + s_per_mac * macs


def rule_lut(lut_path: str | Path, records: str | Path | Iterable[str | Path],
             rules: Mapping[str, tuple[float, float]] | None = None) -> LUT:
    """Rewrite the LUT file ``lut_path`` -- built from the measurement files (or folders) ``records`` by
    `build_lut` or `dsprof build-lut` -- with every median from `rule_median_s` (and IQR from `IQR_FRACTION`),
    saved in place with its checksum. Every entry must come from a record of ``records``: a LUT row the rule
    cannot price raises. ``rules``: (overhead per call, seconds per MAC) of each backend whose contexts run by
    another rule than (`OVERHEAD_S`, `S_PER_MAC`), e.g. {"onnxruntime": (20e-6, 3e-10)}: two contexts that disagree
    on what a span is worth (the one call it saves against the MACs it adds). Returns the rewritten table."""
    files = read_measurement_files([records] if isinstance(records, (str, Path)) else records)
    ok = [r for f in files for r in f.records if r.ok]
    blocks: dict[tuple, set[int]] = defaultdict(set)  # (context, model label) -> its block indices
    for r in ok:
        if r.scope == "block" and r.index >= 0:
            blocks[(r.context, model_label(r.model, r.model_options))].add(r.index)
    medians: dict[tuple, float] = {}
    for r in ok:
        n = 0
        if r.scope in _WHOLE:
            n = len(blocks[(r.context, model_label(r.model, r.model_options))])
            if n == 0:
                raise ValueError(f"rule_lut: {r.name} [{r.scope}] needs its model's blocks measured in the same files")
        key = r.context.as_tuple() + (r.scope, workload_of(r), r.variant)
        medians[key] = rule_median_s(r.macs * r.batch, n, *(rules or {}).get(r.backend, (OVERHEAD_S, S_PER_MAC)))
    lut = LUT.load(lut_path)
    frame = lut.to_dataframe()
    keys = [tuple(row) for row in frame[list(KEY_COLUMNS)].itertuples(index=False)]
    unpriced = [k for k in keys if k not in medians]
    if unpriced:
        raise ValueError(f"rule_lut: no record of {lut_path}'s entry {unpriced[0][-3:]} in {records}")
    frame["median_s"] = [medians[k] for k in keys]
    frame["iqr_s"] = frame["median_s"] * IQR_FRACTION
    frame["noisy"] = False
    # paired ratios (in-model pieces, the calibration group) were timed, not ruled: a prediction that read them
    # would mix the clock with the rule, so each entry's ratio is its ruled median's (NaN: none)
    frame["ratio"] = frame["ratio_se"] = float("nan")
    # nor how much of the CPU the run got: on a busy machine every run is contended, and its figures would be labelled
    # drafts ("draft: LUT run contended, ..."); the rule's table records no share
    frame["cpu_share"] = float("nan")
    fixed = LUT(frame, str(lut_path))
    fixed.save(lut_path)
    return fixed


def rule_lut_after(args: Sequence[str]) -> LUT | None:
    """For tests that run a documented list of commands: after ``dsprof build-lut FILES... -o LUT`` (``args``
    without the program's name), `rule_lut` of that LUT from those FILES; None after any other command."""
    if not args or args[0] != "build-lut":
        return None
    out = args[list(args).index("-o") + 1]
    return rule_lut(out, [a for a in args[1:] if not a.startswith("-") and a != out])
