"""`report` (`dsprof report`): every table and plot from measurement files (and optionally a LUT, plans and a
planner's front), plus ``index.md`` and ``report.html`` that show them with the device fingerprints
and measurement settings (the same sections, `dsprof.reports.page`).

The pages open with the answer (`dsprof.reports.summary`: what DepthShrinker's plans are predicted and measured
to buy on this device) and the front's figure; then the other figures, the devices, the settings, and every table.

It works from the files alone (no model is re-run; the memory plot only builds the plan's model to
count its weights and maps). A missing piece is skipped with a message.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import pandas as pd

from ..errors import DsprofError, MeasurementFileError, PlanError
from ..io import atomic_output, atomic_write_text, check_output_path, files_below, one_or_many, output_path, slug
from ..lut.build import read_measurement_files
from ..lut.interval import probe_ratio
from ..planning.decide import merge_rule
from ..lut.table import LUT
from ..merging.artifact import merged_plan
from ..records.merges import rule_kind
from ..models import ModelRef, format_spans
from ..records.plan import Plan, check_plan, named_plans, plan_sources
from ..profiler.explain import load_explanation
from ..records.measurement import IN_SITU_SCOPE, PROBE_NAME, PROBE_SCOPE, Measurement
from ..reports import plots
from ..reports.devices import attach_joint, devices_sections, joint_answer, load_front_file
from ..reports.front import front_report
from ..reports.page import Lead, Plot, Section, Table, html_page, markdown_page
from ..reports.plans import memory_table, validation_rows
from ..reports.summary import measured_answer
from ..reports.svg import figure_svg
from ..reports.tables import (block_table, device_labels, explain_table, fingerprint_table, latest_records, model_title,
                              profiling_table, read_accuracies, render, variant_table)

__all__ = ["Report", "report"]

_FORMATS = {"txt": "text", "md": "markdown", "csv": "csv", "tex": "latex"}


@dataclass
class Report:
    """What `report` wrote: the index page, the HTML page, every file, the pieces it skipped (and why) and
    the answer the pages open with, as lines (what `dsprof report` prints last)."""

    index: Path
    html: Path
    files: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    answer: list[str] = field(default_factory=list)  # the lines the page opens with (`dsprof.reports.summary`)

    def text(self, words: Callable[[str], str] = str) -> str:
        """What `dsprof report` prints: what it skipped and why, the files written, then the answer (last: what
        `make demo` ends with); in the caller's words (``words``: `dsprof.cli.flags.command_line_text` gives the
        command line's options where this names parameters)."""
        lines = [f"skipped: {words(message)}" for message in self.skipped]
        lines += [f"wrote {len(self.files)} files; open {self.html} (one file, opens offline) or {self.index}", ""]
        return "\n".join(lines + [words(line) for line in self.answer])

    def __str__(self) -> str:
        return self.text()


def _explanations(paths: Iterable[str | Path]) -> list:
    """The block explanations (``*.explain.json``) in the measurement folders given."""
    found = []
    for p in map(Path, paths):
        if p.is_dir():
            found += [load_explanation(f) for f in files_below(p, "*.explain.json")]
    return found


def _fronts(paths: Iterable[str | Path]) -> list[Path]:
    """The planner's fronts (``front.json``, ``*.front.json``) in the measurement folders given."""
    found = []
    for p in map(Path, paths):
        if p.is_dir():
            found += files_below(p, "*.json", lambda f: f.name == "front.json" or f.name.endswith(".front.json"))
    return found


def _front_plans(fronts: Iterable[str | Path], latest: list[Measurement]) -> dict[str, Any]:
    """The plan file `dsprof.plan` wrote beside each front (``front.json``: ``front.plan.json``, its chosen plan), by
    name: so that a run of it (`dsprof.measure(plans=)`) counts as measured without the file given again. One that
    cannot be read here (a plan for a module not given to this process), or does not fit the records' models, is
    left out: the front is drawn as before."""
    found: dict[str, Any] = {}
    for front in fronts:
        path = Path(str(front)).with_suffix(".plan.json")
        if not path.is_file():
            continue
        try:
            plan = _measured_plan(Plan.coerce(path), latest)
        except DsprofError:
            continue
        found.setdefault(plan.name or path.stem, plan)
    return found


class _Writer:
    """Writes a report's table and figure files into ``out`` and returns them as page parts. Every name goes through
    `output_path` (a plan's name, a front's stem, a block's name come from files: slugged, and nothing lands outside
    ``out``); the page parts carry the slugged name, so that their links find the files."""

    def __init__(self, out: Path, report: "Report"):
        self.out, self.report = out, report

    def path(self, *names: str, suffix: str = "") -> Path:
        """Where the report writes ``out/NAMES...SUFFIX`` (`output_path`)."""
        return output_path(self.out, *names, suffix=suffix, what="the report's file")

    def table(self, name: str, table: pd.DataFrame, digits: int = 2) -> Table:
        name = slug(name)
        for ext, fmt in _FORMATS.items():
            text = render(table, fmt, digits) + ("\n" if fmt != "csv" else "")
            self.report.files.append(atomic_write_text(self.path("tables", name, suffix=f".{ext}"), text))
        return Table(name, table, digits)

    def figure(self, fig, name: str, alt: str, data: pd.DataFrame) -> Plot:
        """``fig`` as PNG and SVG, and ``data`` (what it draws, full precision) as CSV beside them."""
        name = slug(name)
        png = self.path("plots", name, suffix=".png")
        with atomic_output(png) as tmp:
            fig.savefig(tmp, dpi=150, format="png")
        svg = figure_svg(fig)
        self.report.files += [png, atomic_write_text(self.path("plots", name, suffix=".svg"), svg),
                              atomic_write_text(self.path("plots", name, suffix=".csv"), render(data, "csv"))]
        plots.close([fig])
        return Plot(name, alt, f"plots/{name}.png", svg, f"plots/{name}.csv")


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


def report(
    paths: Iterable[str | Path],
    out: str | Path,
    *,
    lut: LUT | str | Path | None = None,
    plans: Sequence[str | Path] | Mapping[str, Any] = (),
    accuracies: Mapping[str, float] | str | Path | None = None,
    explanations: Sequence[str | Path] | None = None,
    fronts: Sequence[str | Path] | None = None,
    accept_modified: bool = False,
    resolution: int | None = None,
    merge_by: str | None = None,
    commands: Callable[[str], str] | None = None,
) -> Report:
    """Write tables (text, Markdown, CSV, LaTeX), plots (PNG, SVG), ``index.md`` and ``report.html`` into ``out``.

    ``paths``: measurement files or folders. ``lut``: a LUT (or its file) for the prediction check;
    ``plans``: plan files, preset names or merged model files (``.pt``, `dsprof.merge(out=)`), marked in
    the block plot, drawn in the memory plot and used to predict models measured under their names; ``accuracies``: a mapping or a CSV with
    columns ``model,accuracy`` (fractions or %) for the accuracy-vs-FPS plot; ``explanations``: files
    that `dsprof.profiler.explain_block` wrote (`BlockExplanation.save`; default: the ``*.explain.json`` files in the measurement
    folders), shown as tables and as notes on the block plot; ``fronts``: front files written by
    `dsprof.plan(out=)` (default: the ``front.json`` and ``*.front.json`` files in the measurement
    folders), drawn with the presets and the measured plans; a file of `dsprof plan` over several contexts gives each
    context's front, the fronts overlaid and its cross table as a heat map (`dsprof.reports.devices`); records
    changed after they were written are left out (with a warning naming file and lines) unless ``accept_modified``;
    ``resolution``: only the records measured at that input size (pixels). Every input is read before ``out`` is
    written. A plan without a ``merge`` list is merged as the commands that built the measured models merge it
    (`dsprof.records.merges`): by the LUT's rule (in each record's context for the LUT validation; for the memory plot,
    in the LUT's one context), or by MACs with ``merge_by="macs"``. ``commands``: how the pages spell what they
    suggest running, a function of each paragraph's text (the command line passes its own, so that a report made by
    `dsprof report` names `dsprof measure --plan PLAN` where one made from Python names `dsprof.measure(plans=PLAN)`).
    """
    out = Path(out)
    paths = one_or_many(paths)  # one file or folder, as build_lut takes it
    records = [r for f in read_measurement_files(paths, accept_modified=accept_modified) for r in f.records]
    if resolution is not None:
        records = _at_resolution(records, resolution)
    latest = latest_records(records)
    if not latest:
        raise MeasurementFileError("the measurement files hold no successful record; run `dsprof.measure()` first")
    given, merged = [], {}
    for p in (plans.values() if isinstance(plans, Mapping) else plan_sources(plans)):
        if str(p).endswith(".pt"):  # a merged model file: named by its stem, as `measure --merged-model` names it
            merged[Path(str(p)).stem] = (p, _measured_plan(merged_plan(p), latest))
            continue
        given.append((p, _measured_plan(Plan.coerce(p), latest)))
    named = named_plans(given)  # two different plans under one name are refused, as `measure` refuses them
    clash = sorted(set(named) & set(merged))
    if clash:
        raise PlanError(f"{named[clash[0]][0]} and {merged[clash[0]][0]} are both named {clash[0]!r}; a record names "
                        "the model it timed, so give each its own name (rename the file, or the plan's 'name')")
    plan_objs = {name: plan for name, (_, plan) in {**named, **merged}.items()}
    front_paths = _fronts(paths) if fronts is None else one_or_many(fronts)
    for name, plan in _front_plans(front_paths, latest).items():  # each front's own plan, where `plans` lacks it
        plan_objs.setdefault(name, plan)
    if isinstance(accuracies, (str, Path)):
        accuracies = read_accuracies(accuracies)
    lut = lut if lut is None or isinstance(lut, LUT) else LUT.load(lut, accept_modified=accept_modified)
    if merge_by is not None:
        for plan in plan_objs.values():
            rule_kind(plan, lut=lut is not None, merge_by=merge_by)  # --merge-by lut without --lut is refused
    if merge_by == "macs":  # the lists by MACs, written once: validated and drawn alike
        plan_objs = {name: _merges(plan, latest, None, "macs").plan for name, plan in plan_objs.items()}
    found = _explanations(paths) if explanations is None else [load_explanation(p) for p in one_or_many(explanations)]
    front_files, several = [], []  # every context's front; the files of `dsprof plan` over several contexts
    for path in front_paths:
        each, whole = load_front_file(path)
        front_files += each
        several += [whole] if whole is not None else []
    attach_joint(front_files, several)  # a front of one context counts the plan for several measured there too
    check_output_path(out, "the report in ", "choose another `out=` folder", folder=True)
    report = Report(output_path(out, "index.md"), output_path(out, "report.html"))
    write = _Writer(out, report)
    # The answer first (one paragraph per front, then one per plan for several contexts, so that the first screen
    # states each context's answer and the joint plan), the fronts' figures, then the other figures, then the device
    # details, the settings and every table.
    fronts = [front_report(front, records, plan_objs, write) for front in front_files]
    answer, leads = [], []
    for f in fronts:
        leads.append(Lead(" ".join(f.answer.lines())))
        answer += f.answer.lines()
    near = next((f.answer.k for f in fronts if f.answer.k is not None), None)
    for data in several:
        joint = joint_answer(data, records, plan_objs, near)
        if joint is not None:
            leads.append(Lead(" ".join(joint.lines())))
            answer += joint.lines()
    leads += [f.figure for f in fronts]
    if not fronts:
        answer = measured_answer(latest, plan_objs)
        leads = [Lead(" ".join(answer))]
    report.answer = answer
    sections = [Section("What DepthShrinker buys here", leads, id="answer")]
    explained, notes = _explain_sections(found, latest, write)
    figures, memory = _figure_sections(latest, plan_objs, accuracies, notes, write, lut)
    validation = _validation_sections(latest, lut, plan_objs, write)
    sections += devices_sections(front_files, several, write)  # several contexts: fronts overlaid, the cross heat map
    sections += figures + validation[:1]
    sections += [Section("Devices", [write.table("devices", fingerprint_table(latest))]),
                 Section("Settings", [_settings(latest)])]
    sections += [f.tables for f in fronts] + validation[1:]
    sections += _table_sections(latest, accuracies, write) + memory + explained
    sections += _probe_section(records, lut)
    label = device_labels(latest)
    noisy = sorted({f"{r.name} [{r.variant}] on {label[r.context]}" for r in latest if r.stats.noisy})
    sections.append(Section("Noisy entries (IQR/median > 10 %)", ["\n".join(f"- {n}" for n in noisy or ["none"])]))
    if report.skipped:
        sections.append(Section("Skipped", ["\n".join(f"- {s}" for s in report.skipped)]))
    if commands is not None:
        sections = [replace(s, parts=[_spelt(part, commands) for part in s.parts]) for s in sections]
    report.files.append(atomic_write_text(report.index, markdown_page("dsprof report", sections)))
    report.files.append(atomic_write_text(report.html, html_page("dsprof report", sections)))
    return report


def _spelt(part: Any, commands: Callable[[str], str]) -> Any:
    """A page's paragraph (text or lead) with what it suggests running spelt by ``commands``; tables and plots as
    they are."""
    if isinstance(part, str):
        return commands(part)
    if isinstance(part, Lead):
        return replace(part, text=commands(part.text))
    return part


def _at_resolution(records: list[Measurement], resolution: int) -> list[Measurement]:
    """The records measured at ``resolution`` pixels; refused in one line (with the resolutions the files
    hold) where there are none."""
    kept = [r for r in records if r.model_options.get("resolution") == resolution]
    if not kept:
        held = sorted({r.model_options.get("resolution") for r in records if r.ok}, key=str)
        raise MeasurementFileError(f"the measurement files hold no record at {resolution} px; they hold "
                                   f"{', '.join(f'{h} px' for h in held) or 'none'}: give one of those to "
                                   "`resolution=`, or leave it out")
    return kept


def _measured_plan(plan, latest: list[Measurement]):
    """``plan``, checked (`check_plan`) against the models the records measured: refused when it fits none."""
    measured = {(r.model, json.dumps({k: v for k, v in r.model_options.items() if not k.startswith("resolution")},
                                     sort_keys=True)) for r in latest if r.scope != IN_SITU_SCOPE}
    if not measured:
        return plan
    for model, options in sorted(measured):
        try:
            return check_plan(plan, model, json.loads(options))
        except PlanError:
            continue
    # (not check_plan's own words: they name the model to build, which a report, reading records, takes none of)
    options = f" with options {json.dumps(plan.options, sort_keys=True)}" if plan.options else ""
    raise PlanError(f"plan {plan.name or ''!s}{' ' if plan.name else ''}is for {plan.model}{options}, which the "
                    f"measurement files do not hold (they hold {', '.join(sorted({m for m, _ in measured}))}): give "
                    "the plans of the measured models")


def _table_sections(latest: list[Measurement], accuracies, write: _Writer) -> list[Section]:
    """The paper's tables (Tab. 1, Tab. 2/3, the blocks), written as files and as sections."""
    sections = []
    for title, name, table in (
        ("Profiling: original vs FLOPs-matched dense counterpart (paper Tab. 1)", "profiling", profiling_table(latest)),
        ("Models and variants (paper Tab. 2/3)", "variants", variant_table(latest, accuracies)),
        ("Blocks: original / merged / FLOPs-matched latency", "blocks", block_table(latest)),
    ):
        if table.empty:
            write.report.skipped.append(f"{name} table: no records of that kind")
            continue
        sections.append(Section(title, [write.table(name, table)]))
    return sections


def _explain_sections(found: list, latest: list[Measurement], write: _Writer) -> tuple[list[Section], dict]:
    """One section per block explanation, and the note each puts on the block plot: on the curve of
    the context it explains (same model, backend, threads and batch) only."""
    sections, notes = [], {}
    label = device_labels(latest)
    for e in found:
        table = write.table(f"explain_{e.block}_{e.backend}_t{e.threads}".replace(".", "-"), explain_table(e), 3)
        sections.append(Section(
            f"Why is {e.block} slow? ({e.model}, {e.backend}, {e.threads} thread(s), batch {e.batch})",
            [f"`{e.spec}`", table, f"**Finding:** {e.finding}"]))
        parts = e.alone_sum_s if e.alone_sum_s is not None else e.profiled_sum_s
        note = f"{e.block}: {e.block_s * 1e3:.1f} ms as a unit, parts {parts * 1e3:.1f} ms ({e.backend})"
        for r in latest:
            if (r.scope == "block" and r.model == e.model and r.name == e.block and r.backend == e.backend
                    and (r.threads or 0) == e.threads and r.batch == e.batch):
                notes[(label[r.context], model_title(r), e.block)] = note
    return sections, notes


def _resolution_of(model: str, latest: list[Measurement]) -> int | None:
    """The resolution ``model`` was measured at in these records (None: not measured; its default)."""
    return next((r.model_options.get("resolution") for r in latest if r.model == model), None)


def _merges(plan, latest: list[Measurement], lut, merge_by: str | None):
    """``plan`` with its merge list, decided by the rule of its model at the resolution the records measured it (the
    LUT's, in its one context, or MACs)."""
    device = lut.devices()[0] if lut is not None and len(lut.devices()) == 1 else None
    model = plan.model  # a plan that replays its own list builds nothing: its model need not be known here
    if rule_kind(plan, lut=lut is not None, merge_by=merge_by) != "plan":
        model = ModelRef.of(plan.model, options=plan.options, resolution=_resolution_of(plan.model, latest))
    return merge_rule(model, lut=lut, device=device, merge_by=merge_by, plan=plan).decide(plan)


def _figure_sections(latest: list[Measurement], plan_objs: dict, accuracies, notes: dict,
                     write: _Writer, lut=None) -> tuple[list[Section], list[Section]]:
    """The paper's figures -- block latency (Fig. 1/5), memory before and after merging (Fig. 6), accuracy vs FPS
    (Fig. 7) -- and, apart, the sections of the memory tables (shown with the other tables)."""
    sections, tables, skipped = [], [], write.report.skipped
    blocks = block_table(latest)
    if not blocks.empty:
        figure = plots.block_latency_figure(blocks, {k: v.keep for k, v in plan_objs.items()}, annotations=notes)
        sections.append(Section("Block-wise latency (paper Fig. 1 / Fig. 5)",
                                [write.figure(figure, "block_latency", "block latency", blocks)]))
    else:
        skipped.append("block latency plot: no block records")

    for plan_name, plan in plan_objs.items():
        if plan.merge is None:
            if lut is None or len(lut.devices()) != 1:
                skipped.append(f"memory plot of {plan_name}: it has no merge list, so a LUT of one context (`lut=`) or "
                               "`merge_by='macs'` decides its merges")
                continue
            try:
                plan = _merges(plan, latest, lut, None).plan
            except DsprofError as exc:
                skipped.append(f"memory plot of {plan_name}: {' '.join(str(exc).split())}")
                continue
        resolution = _resolution_of(plan.model, latest)
        model = ModelRef.of(plan.model, options=plan.options, resolution=resolution).build()
        mem = memory_table(model, plan, (resolution, resolution) if resolution else None)
        figure = plots.memory_figure(mem, f"Memory footprint, {plan_name} (16 bits)")
        title = f"Memory footprint before and after merging: {plan_name} (paper Fig. 6)"
        parts = [write.figure(figure, f"memory_{plan_name}", "memory", mem)]
        if plan.spans:
            parts.append(f"Each span ({format_spans(plan.spans)}) is merged into one convolution, counted at its first "
                         "block: its other blocks have no weights or maps of their own after merging (\"in span\").")
        sections.append(Section(title, parts))
        tables.append(Section(title, [write.table(f"memory_{plan_name}", mem)]))
    if not plan_objs:
        skipped.append("memory plot: give plans (`plans=`) to draw the footprint before and after merging")

    variants = variant_table(latest, accuracies)
    fps_cols = [c for c in variants.columns if str(c).endswith(": FPS")]
    if accuracies and fps_cols and variants["accuracy"].notna().any():
        figure = plots.accuracy_fps_figure(variants, fps_cols)
        sections.append(Section("Accuracy vs FPS (paper Fig. 7)",
                                [write.figure(figure, "accuracy_fps", "accuracy vs FPS", variants)]))
    else:
        skipped.append("accuracy vs FPS plot: give accuracies (`accuracies=`, a model,accuracy CSV)")
    return sections, tables


def _probe_section(records: list[Measurement], lut) -> list[Section]:
    """The drift probe of every context: its median and how far its group medians moved; with a LUT that has the
    probe in that context, how much slower (> 1) these records ran it than the LUT's runs."""
    probes = [r for r in records if r.scope == "probe" and r.ok]
    if not probes:
        return []
    label = device_labels(probes)
    lines = ["The reference every run times after each group (docs/predictions.md).", ""]
    for key in dict.fromkeys(r.context for r in probes):
        mine = [r for r in probes if r.context == key]
        samples = [s for r in mine for s in r.samples_s]
        medians = [r.median_s for r in mine]
        center = statistics.median(samples)
        line = (f"- **{label[key]}**: {center * 1e3:.3f} ms over {len(mine)} groups; group medians "
                f"{min(medians) / center:.2f}x-{max(medians) / center:.2f}x of it")
        entry = lut.find(PROBE_NAME, "original", key, scope=PROBE_SCOPE) if lut is not None else None
        if entry is not None:
            ratio = probe_ratio(samples, entry)
            line += f"; {ratio:.3f}x its time in the LUT's runs ({'slower' if ratio > 1 else 'faster'} by {abs(ratio - 1):.1%})"
        lines.append(line)
    return [Section("Drift probe", ["\n".join(lines)])]


def _validation_sections(latest: list[Measurement], lut, plan_objs: dict, write: _Writer) -> list[Section]:
    """Predicted against measured latency for the models a LUT covers: the figure's section, then the table's."""
    if lut is None:
        write.report.skipped.append("LUT validation: give a LUT (`lut=`)")
        return []
    validation = validation_rows(latest, lut, plan_objs, write.report.skipped)
    if not len(validation):
        write.report.skipped.append("LUT validation: no merged or plan model measured in a context the LUT covers")
        return []
    title = "LUT prediction vs measurement"
    figure = write.figure(plots.prediction_figure(validation), "lut_validation", "prediction vs measurement", validation)
    shown = validation.drop(columns="device", errors="ignore")  # the model column names it; the figure's colour
    return [Section(title, [figure]), Section(title, [write.table("lut_validation", shown, 3)])]
