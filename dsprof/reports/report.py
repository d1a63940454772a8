"""`write_report`: every table and plot from measurement files (and optionally a LUT and plans),
plus an ``index.md`` that shows them with the device fingerprints and measurement settings.

It works from the files alone (no model is re-run; the memory plot only builds the plan's model to
count its weights and maps). A missing piece is skipped with a message.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from ..errors import MeasurementFileError
from ..io import atomic_write_text
from ..lut import LUT, measurement_files, predict_latency
from ..models import block_module, find_blocks, get_model, memory_footprint
from ..profiler.explain import load_explanation
from ..profiler.probe import PROBE_NAME, PROBE_SCOPE
from ..profiler.records import Measurement, read_measurements
from . import plots
from .tables import block_table, device_labels, explain_table, latest_records, lut_validation_table, profiling_table, render, variant_table

__all__ = ["Report", "memory_table", "validation_rows", "write_report"]

_FORMATS = {"txt": "text", "md": "markdown", "csv": "csv", "tex": "latex"}


@dataclass
class Report:
    """What `write_report` wrote: the index page, every file, and the pieces it skipped (and why)."""

    index: Path
    files: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def memory_table(model, plan, input_size: tuple[int, int] | None = None) -> pd.DataFrame:
    """Per block: weights and peak activation in bytes (16 bits) before and after `merge_model`."""
    from ..merge import merge_model, merge_report
    from ..merge.plan import Plan

    plan = Plan.coerce(plan)
    blocks = find_blocks(model, input_size)
    merged = merge_model(model, plan, input_size=input_size)
    decisions = {d.index: d for d in merge_report(merged).decisions}
    rows = []
    for i, block in enumerate(blocks):
        spec = block.spec
        shape = (spec.in_channels, spec.in_h, spec.in_w)
        before = memory_footprint(block.module, shape, spec.residual)
        now_merged = decisions[i].merged
        module = block_module(merged, block.name)
        after = memory_footprint(module, shape, residual=spec.residual and not now_merged)
        rows.append({"index": i, "block": block.name, "merged": now_merged,
                     "weight_bytes_before": before.weight_bytes, "weight_bytes_after": after.weight_bytes,
                     "peak_activation_bytes_before": before.peak_activation_bytes,
                     "peak_activation_bytes_after": after.peak_activation_bytes})
    return pd.DataFrame(rows)


def validation_rows(records: Iterable[Measurement], lut: LUT, plans: Mapping[str, Any]) -> pd.DataFrame:
    """Predicted against measured latency for every whole model measured that a LUT context covers:
    models timed under a plan's name (``custom``) are predicted with that plan; a model's
    ``merged`` variant (every block merged) with the all-merged plan."""
    from ..merge.plan import Plan

    names, predicted, measured = [], [], []
    contexts = set(lut.devices())
    latest = latest_records(records)
    label = device_labels(latest)
    for r in latest:
        key = r.context
        if r.scope != "model" or key not in contexts:
            continue
        options = r.build_options
        if r.variant == "custom" and r.name in plans:
            plan = Plan.coerce(plans[r.name])
        elif r.variant == "merged":
            n = len(find_blocks(get_model(r.model, resolution=r.model_options.get("resolution"), **options)))
            plan = Plan(r.model, (0,) * n, options, merge=(True,) * n, name=f"{r.model}-all-merged")
        else:
            continue
        try:
            pred = predict_latency(r.model, lut, plan, device=key, options=options,
                                   resolution=r.model_options.get("resolution"), strict=True)
        except (KeyError, ValueError):
            continue
        names.append(f"{r.name} [{r.variant}] {label[key]}")
        predicted.append(pred.total_s)
        measured.append(r.median_s)
    return lut_validation_table(names, predicted, measured)


def _explanations(paths: Iterable[str | Path]) -> list:
    """The block explanations (``*.explain.json``) in the measurement folders given."""
    found = []
    for p in map(Path, paths):
        if p.is_dir():
            found += [load_explanation(f) for f in sorted(p.rglob("*.explain.json"))]
    return found


def _write_table(table: pd.DataFrame, out: Path, name: str, files: list[Path]) -> None:
    for ext, fmt in _FORMATS.items():
        files.append(atomic_write_text(out / "tables" / f"{name}.{ext}", render(table, fmt) + ("\n" if fmt != "csv" else "")))


def _write_figure(fig, out: Path, name: str, files: list[Path]) -> str:
    (out / "plots").mkdir(parents=True, exist_ok=True)
    for ext in ("png", "svg"):
        path = out / "plots" / f"{name}.{ext}"
        fig.savefig(path, dpi=150)
        files.append(path)
    plots.close([fig])
    return f"plots/{name}.png"


def _fingerprints(records: Sequence[Measurement]) -> str:
    lines = []
    label = device_labels(records)
    seen = set()
    for r in records:
        if r.context in seen:
            continue
        seen.add(r.context)
        env = r.environment
        gpus = ", ".join(g.get("name", "?") for g in env.get("gpu", [])) or "none"
        versions = ", ".join(f"{k} {v}" for k, v in sorted(env.get("versions", {}).items()))
        lines.append(
            f"- **{label[r.context]}** (environment `{r.env_id}`, device `{r.device}`, layout {r.layout}, "
            f"threads {r.threads or 'default'}): CPU {env.get('cpu', {}).get('model', '?')} "
            f"({env.get('cpu', {}).get('logical_cores', '?')} logical cores), GPU {gpus}; {versions}; host {env.get('host', '?')}"
            + (f"; allocator: {env['allocator']}" if env.get("allocator") else "")
        )
    return "\n".join(lines)


def _settings(records: Sequence[Measurement]) -> str:
    precision = sorted({r.target_precision for r in records})
    budgets = sorted({r.budget_s for r in records})
    stops = pd.Series([r.stop_reason for r in records]).value_counts().to_dict()
    return (
        "BatchNorm is folded into the preceding convolution in every timed model and block, original and "
        "dense alike (what a deployment does). Medians of raw samples; original and dense variants were "
        f"timed interleaved. Target precision of the median {', '.join(f'{p:.0%}' for p in precision)}; "
        f"time budget per workload {', '.join(f'{b:g} s' for b in budgets)}; stop reasons {stops}. "
        "Entries marked noisy have IQR/median > 10 %."
    )


def write_report(
    paths: Iterable[str | Path],
    out: str | Path,
    *,
    lut: LUT | str | Path | None = None,
    plans: Sequence[str | Path] | Mapping[str, Any] = (),
    accuracies: Mapping[str, float] | str | Path | None = None,
    explanations: Sequence[str | Path] | None = None,
) -> Report:
    """Write tables (text, Markdown, CSV, LaTeX), plots (PNG, SVG) and ``index.md`` into ``out``.

    ``paths``: measurement files or folders. ``lut``: a LUT (or its file) for the prediction check;
    ``plans``: plan files or preset names, marked in the block plot, drawn in the memory plot and
    used to predict models measured under their names; ``accuracies``: a mapping or a CSV with
    columns ``model,accuracy`` (%) for the accuracy-vs-FPS plot; ``explanations``: files written by
    `dsprof explain --out` (default: the ``*.explain.json`` files in the measurement folders), shown as
    tables and as notes on the block plot.
    """
    from ..merge.plan import Plan

    out = Path(out)
    paths = list(paths)
    records = [r for p in measurement_files(paths) for r in read_measurements(p)]
    latest = latest_records(records)
    if not latest:
        raise MeasurementFileError("the measurement files hold no successful record; run `dsprof measure` first")
    plan_objs = {}
    for p in (plans.values() if isinstance(plans, Mapping) else plans):
        plan = Plan.coerce(p)
        plan_objs[plan.name or Path(str(p)).stem] = plan
    if isinstance(accuracies, (str, Path)):
        frame = pd.read_csv(accuracies)
        accuracies = dict(zip(frame["model"], frame["accuracy"]))
    report = Report(out / "index.md")
    page = ["# dsprof report", "", "## Devices", "", _fingerprints(latest), "", "## Settings", "", _settings(latest), ""]
    page += _table_sections(latest, accuracies, out, report)
    found = _explanations(paths) if explanations is None else [load_explanation(p) for p in explanations]
    sections, notes = _explain_sections(found, out, report)
    page += sections
    page += _figure_sections(latest, plan_objs, accuracies, notes, out, report)
    page += _validation_section(latest, lut, plan_objs, out, report)
    page += _probe_section(records, lut)
    label = device_labels(latest)
    noisy = sorted({f"{r.name} [{r.variant}] on {label[r.context]}" for r in latest if r.stats.noisy})
    page += ["## Noisy entries (IQR/median > 10 %)", "", *(f"- {n}" for n in noisy or ["none"]), ""]
    if report.skipped:
        page += ["## Skipped", "", *(f"- {s}" for s in report.skipped), ""]
    report.files.append(atomic_write_text(report.index, "\n".join(page)))
    return report


def _table_sections(latest: list[Measurement], accuracies, out: Path, report: Report) -> list[str]:
    """The paper's tables (Tab. 1, Tab. 2/3, the blocks), written as files and as Markdown sections."""
    page = []
    for title, name, table in (
        ("Profiling: original vs FLOPs-matched dense counterpart (paper Tab. 1)", "profiling", profiling_table(latest)),
        ("Models and variants (paper Tab. 2/3)", "variants", variant_table(latest, accuracies)),
        ("Blocks: original / merged / FLOPs-matched latency", "blocks", block_table(latest)),
    ):
        if table.empty:
            report.skipped.append(f"{name} table: no records of that kind")
            continue
        _write_table(table, out, name, report.files)
        page += [f"## {title}", "", render(table, "markdown"), "",
                 f"(also as [CSV](tables/{name}.csv), [LaTeX](tables/{name}.tex))", ""]
    return page


def _explain_sections(found: list, out: Path, report: Report) -> tuple[list[str], dict[str, str]]:
    """One section per block explanation, and the note each puts on the block plot."""
    page, notes = [], {}
    for e in found:
        table_name = f"explain_{e.block}_{e.backend}_t{e.threads}".replace(".", "-")
        _write_table(explain_table(e), out, table_name, report.files)
        page += [f"## Why is {e.block} slow? ({e.model}, {e.backend}, {e.threads} thread(s), batch {e.batch})", "",
                 f"`{e.spec}`", "", render(explain_table(e), "markdown", 3), "", f"**Finding:** {e.finding}", ""]
        parts = e.alone_sum_s if e.alone_sum_s is not None else e.profiled_sum_s
        notes[e.block] = f"{e.block}: {e.block_s * 1e3:.1f} ms as a unit, parts {parts * 1e3:.1f} ms ({e.backend})"
    return page, notes


def _figure_sections(latest: list[Measurement], plan_objs: dict, accuracies, notes: dict[str, str],
                     out: Path, report: Report) -> list[str]:
    """The paper's figures: block latency (Fig. 1/5), memory before and after merging (Fig. 6), accuracy vs FPS (Fig. 7)."""
    page, skipped = [], report.skipped
    blocks = block_table(latest)
    if not blocks.empty:
        figure = plots.block_latency_figure(blocks, {k: v.keep for k, v in plan_objs.items()}, annotations=notes)
        image = _write_figure(figure, out, "block_latency", report.files)
        page += ["## Block-wise latency (paper Fig. 1 / Fig. 5)", "", f"![block latency]({image})", ""]
    else:
        skipped.append("block latency plot: no block records")

    for plan_name, plan in plan_objs.items():
        mem = memory_table(get_model(plan.model, **plan.options), plan)
        _write_table(mem, out, f"memory_{plan_name}", report.files)
        figure = plots.memory_figure(mem, f"Memory footprint, {plan_name} (16 bits)")
        image = _write_figure(figure, out, f"memory_{plan_name}", report.files)
        page += [f"## Memory footprint before and after merging: {plan_name} (paper Fig. 6)", "", f"![memory]({image})", ""]
    if not plan_objs:
        skipped.append("memory plot: give plans (--plans) to draw the footprint before and after merging")

    variants = variant_table(latest, accuracies)
    fps_cols = [c for c in variants.columns if str(c).endswith(": FPS")]
    if accuracies and fps_cols and variants["accuracy"].notna().any():
        image = _write_figure(plots.accuracy_fps_figure(variants, fps_cols[0]), out, "accuracy_fps", report.files)
        page += ["## Accuracy vs FPS (paper Fig. 7)", "", f"![accuracy vs FPS]({image})", ""]
    else:
        skipped.append("accuracy vs FPS plot: give accuracies (--accuracies model,accuracy CSV)")
    return page


def _probe_section(records: list[Measurement], lut) -> list[str]:
    """The drift probe of every context: its median and how far its group medians moved; with a LUT that has the
    probe in that context, how much slower (> 1) these records ran it than the LUT's runs."""
    from ..lut.drift import probe_ratio_of

    probes = [r for r in records if r.scope == "probe" and r.ok]
    if not probes:
        return []
    lut = lut if lut is None or isinstance(lut, LUT) else LUT.load(lut)
    label = device_labels(probes)
    lines = ["## Drift probe", "", "The reference every run times after each group (docs/predictions.md).", ""]
    for key in dict.fromkeys(r.context for r in probes):
        mine = [r for r in probes if r.context == key]
        samples = [s for r in mine for s in r.samples_s]
        medians = [r.median_s for r in mine]
        center = statistics.median(samples)
        line = (f"- **{label[key]}**: {center * 1e3:.3f} ms over {len(mine)} groups; group medians "
                f"{min(medians) / center:.2f}x-{max(medians) / center:.2f}x of it")
        entry = lut.find(PROBE_NAME, "original", key, scope=PROBE_SCOPE) if lut is not None else None
        if entry is not None:
            ratio = probe_ratio_of(samples, entry)
            line += f"; {ratio:.3f}x its time in the LUT's runs ({'slower' if ratio > 1 else 'faster'} by {abs(ratio - 1):.1%})"
        lines.append(line)
    return lines + [""]


def _validation_section(latest: list[Measurement], lut, plan_objs: dict, out: Path, report: Report) -> list[str]:
    """Predicted against measured latency for the models a LUT covers."""
    if lut is None:
        report.skipped.append("LUT validation: give a LUT (--lut)")
        return []
    lut = lut if isinstance(lut, LUT) else LUT.load(lut)
    validation = validation_rows(latest, lut, plan_objs)
    if not len(validation):
        report.skipped.append("LUT validation: no merged or plan model measured in a context the LUT covers")
        return []
    _write_table(validation, out, "lut_validation", report.files)
    image = _write_figure(plots.prediction_figure(validation), out, "lut_validation", report.files)
    return ["## LUT prediction vs measurement", "", render(validation, "markdown", 3), "", f"![prediction]({image})", ""]
