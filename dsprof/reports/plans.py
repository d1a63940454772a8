"""Tables of plans: what a plan's merged model weighs against the original (`memory_table`, paper Fig. 6), and its
predicted speed-up and latency against the paired measurement (`validation_rows`), from records and a LUT."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import pandas as pd

from ..errors import DsprofError
from ..lut import LUT, predict_latency
from ..merging.model import merge_model, merge_report
from ..models import ModelRef, block_modules, find_blocks, format_span, memory_footprint
from ..records.plan import Plan
from ..records.measurement import Measurement, paired_with_original
from .tables import device_labels, latest_records, lut_validation_table

__all__ = ["memory_table", "validation_rows"]


def memory_table(model, plan, input_size: tuple[int, int] | None = None) -> pd.DataFrame:
    """Per block: weights and peak activation in bytes (16 bits) before and after `merge_model` (``plan`` with its
    ``merge`` list: `dsprof.planning.decide`). ``span``: the span a block is merged in, as an inclusive range
    (``0-1``; empty for a block outside spans): a span's one convolution is counted at its first block, so the span's
    other blocks have nothing of their own after merging."""
    plan = Plan.coerce(plan)
    blocks = find_blocks(model, input_size)
    merged = merge_model(model, plan, input_size=input_size)
    decisions = {d.index: d for d in merge_report(merged).decisions}
    span_of = {i: format_span((a, b)) for a, b in plan.spans or () for i in range(a, b)}
    rows = []
    for i, (block, module) in enumerate(zip(blocks, block_modules(merged, [b.name for b in blocks]))):
        spec = block.spec
        shape = (spec.in_channels, spec.in_h, spec.in_w)
        before = memory_footprint(block.module, shape, spec.residual)
        now_merged = decisions[i].merged
        after = memory_footprint(module, shape, residual=spec.residual and not now_merged)
        rows.append({"index": i, "block": block.name, "merged": now_merged, "span": span_of.get(i, ""),
                     "weight_bytes_before": before.weight_bytes, "weight_bytes_after": after.weight_bytes,
                     "peak_activation_bytes_before": before.peak_activation_bytes,
                     "peak_activation_bytes_after": after.peak_activation_bytes})
    return pd.DataFrame(rows)


def validation_rows(records: Iterable[Measurement], lut: LUT, plans: Mapping[str, Any],
                    skipped: list[str] | None = None) -> pd.DataFrame:
    """Predicted against measured speed-up and latency for every whole model measured in a context the LUT
    covers: models timed under a plan's name (``custom``: plans, searched plans) are predicted with
    that plan; a model's ``merged`` variant (every block merged) with the all-merged plan. The measured speed-up
    is paired: the model against the original timed in its group (`dsprof measure --plan`). Each model
    that cannot be predicted is named in ``skipped`` with the reason and what to pass."""
    names, predicted, measured, speedups, devices = [], [], [], [], []
    contexts = set(lut.devices())
    latest = latest_records(records)
    label = device_labels(latest)
    why = skipped if skipped is not None else []
    for r in latest:
        key = r.context
        if r.scope != "model" or r.variant not in ("custom", "merged"):
            continue
        what = f"{r.name} [{r.variant}] on {label[key]}"
        if key not in contexts:
            why.append(f"LUT validation of {what}: the LUT has no entries in that context")
            continue
        resolution = r.model_options.get("resolution")
        try:
            ref = ModelRef.of(r.model, options=r.build_options, resolution=resolution)
            if r.variant == "custom":
                if r.name not in plans:
                    why.append(f"LUT validation of {what}: no plan named {r.name!r}; pass its plan file with `plans=`")
                    continue
                plan = Plan.coerce(plans[r.name])
            else:
                ref = ref.built()  # built once: its blocks counted and priced
                n = len(find_blocks(ref.build()))
                plan = Plan(r.model, (0,) * n, r.build_options, merge=(True,) * n, name=f"{r.model}-all-merged")
            pred = predict_latency(ref, lut, plan, device=key, strict=True)
        except (DsprofError, KeyError, ValueError) as exc:
            why.append(f"LUT validation of {what}: {' '.join(str(exc).split())}")
            continue
        paired = paired_with_original(r, latest)
        nan = float("nan")
        speedups.append((paired.ratio, paired.low, paired.high) if paired is not None else (nan, nan, nan))
        speedups[-1] += (pred.speedup, pred.speedup_low, pred.speedup_high)
        names.append(f"{r.name} [{r.variant}] {label[key]}")
        devices.append(label[key])
        predicted.append(pred.total_s)
        measured.append(r.median_s)
    return lut_validation_table(names, predicted, measured, speedups, devices)
