"""The latency table's columns and its version; a row's device context is a `DeviceContext`.

A LUT file is CSV (``pd.read_csv(path, comment="#")`` loads it): one row per key, and a last
line ``# end rows=N sha256=HEX`` that tells a complete file from a truncated one and carries the
checksum of the text before it (`dsprof.lut.table.table_checksum`). Columns:

========== ==============================================================================
schema     ``dsprof.lut/2`` on every row (the file format version; ``dsprof.lut/1`` tables, without the
           group columns below, still load, with one warning)
env_id     the measuring environment's id (hash of hardware, drivers, library versions)
device_name human-readable device (CPU model or GPU name)
device     ``cpu`` or ``cuda:N``
backend    ``torch``, ``torch-compile``, ``onnxruntime``, ``openvino`` or ``tflite`` (or ``torchscript``, imported)
dtype      ``fp32``, ``fp16``, ``bf16``
layout     ``nchw``, ``channels_last`` or ``nhwc``
batch      images per forward pass
threads    CPU threads used (0: not set, e.g. torch on a GPU)
compile    the ``torch.compile`` mode of a ``torch-compile`` row (``default``, ``max-autotune-no-cudagraphs``);
           empty for every other backend (tables of older dsprof: ``True`` with backend ``torch``, read as
           ``torch-compile`` in mode ``default``)
scope      ``block``, ``model``, ``stem``, ``head`` or ``context`` (a block timed in situ: the whole model with
           one block swapped, timed against the whole model, `dsprof measure --in-situ`; the files keep this word) or
           ``probe`` (the drift
           probe every run times after each group, `dsprof.profiler.probe`; pooled over all runs)
workload   a block's `BlockSpec` string; for ``context`` the model label, ``@`` and the block's
           module name (`in_situ_workload`; a span's first and last block names joined by ``..``, `span_piece`; a
           session pair's ``(session N)``, `dsprof.records.measurement.session_pair_name`); for ``probe`` the probe's
           name; for other scopes the model label
           (name plus options, e.g. ``mobilenet_v2{"resolution":224,"width":1.4}``)
variant    ``original``, ``merged``, ``flops_matched``, ``linear``, ``custom``, ``calibration`` (the calibration group's
           model) or ``again`` (a session pair's second session of the whole model); ``linear`` is the block without
           its activations, unmerged, in the form `merge_model` deploys it with a plan's default border
           (padding in front, `dsprof.profiler.workloads.deployed_linear`): the border is part of what it times
median_s   median latency of one forward pass of one batch, seconds (pooled samples)
iqr_s      interquartile range of the pooled samples, seconds
n_samples  number of pooled samples
noisy      ``True`` when iqr_s / median_s > 10 % (kept, marked)
sources    the measurement files, ``;``-separated; an entry predicted from another context's, not measured
           (`dsprof measure --few`), starts with ``predicted:`` and says from what (its ``iqr_s`` and
           ``n_samples`` 1 carry the fit's error, so that intervals widen: `dsprof.lut.few`)
groups     how many interleaved groups (one per run and group that timed the key) the samples come from
group_iqr_s  interquartile range of those groups' medians, seconds (0 for one group): how far the key moved
           between groups and runs, what a later measurement's distance from the median is drawn from
ratio      paired time ratio of the key over its group's ``original`` (same group, same scope): the median over
           the groups of each group's median per-round ratio (sample i of both comes from round i); empty for an
           ``original`` and where the group has none
ratio_se   standard error of ``ratio``: within each group from its per-round ratios, across groups from their
           spread, whichever is larger (empty with ``ratio``)
time_utc   when the key's last group was timed (ISO 8601, UTC): the time the LUT's milliseconds belong to
cpu_share  the median, over the groups that timed the key, of the share of the CPU time its threads could use
           that the measuring process got (`dsprof.portable.cpu_share`; CPU runs only, else empty): well below 1, the
           run was contended (`LUT.contention`). Optional: a table without the column loads with it empty
========== ==============================================================================

The key of a row is every column from env_id to variant except device_name.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from ..device_context import CONTEXT_FIELDS

__all__ = ["SCHEMA", "OLD_SCHEMAS", "GROUP_COLUMNS", "OPTIONAL_COLUMNS", "COLUMNS", "CONTEXT_COLUMNS", "KEY_COLUMNS", "PREDICTED",
           "in_situ_workload", "model_label", "span_piece", "split_label"]

SCHEMA = "dsprof.lut/2"
#: The version before the group columns: loads with one warning, its group columns filled as unknown.
OLD_SCHEMAS = ("dsprof.lut/1",)
CONTEXT_COLUMNS = CONTEXT_FIELDS  # a row's device context (`dsprof.device_context`)
KEY_COLUMNS = CONTEXT_COLUMNS + ("scope", "workload", "variant")
COLUMNS = (
    ("schema", "env_id", "device_name")
    + CONTEXT_COLUMNS[1:]
    + ("scope", "workload", "variant", "median_s", "iqr_s", "n_samples", "noisy", "sources")
    + ("groups", "group_iqr_s", "ratio", "ratio_se", "time_utc", "cpu_share")
)
#: The columns a ``dsprof.lut/1`` table lacks, with the values it loads with (one group, no paired ratio).
GROUP_COLUMNS = {"groups": "1", "group_iqr_s": "0", "ratio": "", "ratio_se": "", "time_utc": ""}

#: Columns a table of this schema may lack (written before they were added), with the value they load with: nothing
#: recorded. Read by tables of any version; an older dsprof reads a table with them and ignores them.
OPTIONAL_COLUMNS = {"cpu_share": ""}

#: How the ``sources`` of a predicted entry start (`dsprof measure --few`): never mistaken for a measured one.
PREDICTED = "predicted:"


def model_label(name: str, options: Mapping[str, Any]) -> str:
    """Canonical label of a whole model: its name and its options as sorted, compact JSON."""
    return name + json.dumps(dict(options), sort_keys=True, separators=(",", ":"))


def split_label(label: str) -> tuple[str, dict[str, Any]]:
    """(name, options) of a `model_label` (the inverse of it)."""
    brace = label.find("{")
    if brace < 0:
        return label, {}
    try:
        options = json.loads(label[brace:])
    except json.JSONDecodeError:
        return label, {}
    return label[:brace], options if isinstance(options, dict) else {}


def in_situ_workload(label: str, block: str) -> str:
    """The workload of a block (or a span: `span_piece`) timed inside the model: ``LABEL@BLOCK`` (a model label, a
    module path)."""
    return f"{label}@{block}"


def span_piece(first: str, last: str) -> str:
    """The name a span of blocks goes by inside the model (its in-situ workload, `in_situ_workload`): its first and
    last blocks' module names joined by ``..`` (module paths hold single dots only)."""
    return f"{first}..{last}"
