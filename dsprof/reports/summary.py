"""The answer a report opens with, and `dsprof report` (and so `make demo`) ends with: what DepthShrinker buys on
this device. Three sentences, from the planner's front (predicted, `dsprof plan --out`) and the plans measured
beside the original in one interleaved group (paired, `dsprof measure --plan`):

1. the device and the model;
2. the best predicted speed-up over the original and at which k (blocks that keep their activations);
3. at one k (a preset's, measured where possible): the planner's plan against the paper's preset, each
   predicted and measured; then every other plan measured beside the original (paired), each at its k.

With a front of several contexts (`dsprof plan --for`), one more paragraph: the plan for all of them, predicted and
measured on each (`JointAnswer`).

`Answer.lines` gives them; the report's first paragraph is the same lines joined, so that the terminal, index.md
and report.html say the same numbers. Speed-ups are the original's time over the plan's (> 1: faster), shown with
two decimals (the medians' target precision is 2 %).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import pandas as pd

from ..records.measurement import paired_with_original
from ..records.measurement import Measurement
from .tables import model_title
from ..units import interval, x

__all__ = ["Answer", "JointAnswer", "PlanAnswer", "front_answer", "measured_answer", "device_line"]

_BACKENDS = {"torch": "PyTorch eager", "torch-compile": "PyTorch, torch.compile", "onnxruntime": "ONNX Runtime",
             "openvino": "OpenVINO", "tflite": "TFLite", "torchscript": "TorchScript"}

# the call that writes a planner's front, as every message that asks for one names it (runs as written, its
# capitals filled in; the command line shows it as the `dsprof plan` command with the options that set them)
WRITE_FRONT = "`dsprof.plan(model=MODEL, lut=LUT, out='FRONT.json')`"


@dataclass(frozen=True)
class PlanAnswer:
    """One plan at the compared k: its predicted speed-up (from the front) and, where it was timed beside the
    original, its measured one with the 95 % interval of the paired ratios."""

    name: str
    predicted: float | None
    measured: float | None = None
    measured_low: float | None = None
    measured_high: float | None = None
    k: int | None = None

    def text(self) -> str:
        if self.measured is None:
            return f"{x(self.predicted)} (not measured)"
        measured = f"measured {x(self.measured)}, {interval(self.measured_low, self.measured_high)}"
        if self.predicted is None:  # a plan the front does not price: measured only
            return measured
        return f"{x(self.predicted)} ({measured})"


@dataclass(frozen=True)
class Answer:
    """What DepthShrinker buys on one device, from one front: ``best`` the highest predicted speed-up (at
    ``best_k``, with its 95 % interval); at ``k`` the planner's plan and the paper's preset (None where the front
    has none at that k)."""

    device: str
    model: str
    best: float
    best_low: float
    best_high: float
    best_k: int
    k: int | None = None
    planner: PlanAnswer | None = None
    preset: PlanAnswer | None = None
    others: tuple[PlanAnswer, ...] = ()  # the other plans measured beside the original, each at its k

    def lines(self) -> list[str]:
        """The answer in three lines (sentences that read on as one paragraph), and a fourth where other plans were
        measured beside the original."""
        lines = [f"On {self.device}, {self.model}:",
                 f"DepthShrinker's plans run up to {x(self.best)} faster (k = {self.best_k}, predicted; "
                 f"{interval(self.best_low, self.best_high)});"]
        others = ", ".join(
            f"{p.name} (k = {p.k}) {x(p.measured)} ({interval(p.measured_low, p.measured_high)})"
            + (f", predicted {x(p.predicted)}" if p.predicted is not None else "") for p in self.others)
        if self.k is None:
            lines.append(f"measured beside the original: {others}." if others else
                         "no plan of this front was measured beside the original yet (`dsprof.measure(plans=)` times "
                         "one in the original's group).")
            return lines
        at = [f"the planner's plan is {self.planner.text()}"] if self.planner else []
        if self.preset:
            at.append(f"the paper's preset {self.preset.name.upper()} {self.preset.text()}")
        lines.append(f"at k = {self.k} " + ", ".join(at) + ("." if not others else ";"))
        if others:
            lines.append(f"also measured beside the original: {others}.")
        return lines


@dataclass(frozen=True)
class JointAnswer:
    """The plan for several contexts (`dsprof plan --for`) at ``k``: on each context (``labels``) its predicted
    speed-up over that context's original with the 95 % interval and, where it was timed beside the original there,
    its measured one (paired); ``name`` the measured plan's name (None: not measured anywhere)."""

    labels: tuple[str, ...]
    objective: str
    k: int
    predicted: tuple[float, ...]
    predicted_low: tuple[float, ...]
    predicted_high: tuple[float, ...]
    measured: tuple[PlanAnswer | None, ...]
    name: str | None = None

    def lines(self) -> list[str]:
        """The answer for the plan for all contexts, in lines that read on as one paragraph."""
        what = (f"least importance loss, then least {self.objective.removeprefix('least-loss-')} loss"
                if self.objective.startswith("least-loss") else f"least {self.objective} loss")
        named = f", {self.name}" if self.name else ""
        lines = [f"One plan for {' and '.join(self.labels)} ({what}; k = {self.k}{named}):"]  # as printed, so on the page
        parts = []
        for label, up, low, high, run in zip(self.labels, self.predicted, self.predicted_low, self.predicted_high,
                                             self.measured):
            measured = (f", measured {x(run.measured)} ({interval(run.measured_low, run.measured_high)})"
                        if run is not None else ", not measured there")
            parts.append(f"on {label} {x(up)} predicted ({interval(low, high)}){measured}")
        lines.append("; ".join(parts) + ".")
        if all(run is None for run in self.measured):
            lines.append(f"(`dsprof.plan(joint=..., keep={self.k})` writes it, `dsprof.measure(plans=FILE)` times it "
                         "beside the original.)")
        return lines


def device_line(records: Sequence[Measurement]) -> str:
    """The device of ``records`` (one context) in words: name, cores (CPU), backend, dtype, batch, threads."""
    r = records[0]
    cores = r.environment.get("cpu", {}).get("logical_cores") if r.device == "cpu" else None
    name = f"{r.device_name} ({cores} logical cores)" if cores else f"{r.device_name} ({r.device})"
    backend = _BACKENDS.get(r.backend, r.backend) + (f" (mode {r.compile})" if r.compile else "")
    threads = f", {r.threads} thread{'s' if r.threads != 1 else ''}" if r.threads else ""
    return f"{name}, {backend}, {r.dtype}, batch {r.batch}{threads}"


def front_answer(points: pd.DataFrame, presets: pd.DataFrame, measured: pd.DataFrame, device: str,
                 model: str) -> Answer:
    """The answer from a front's tables (`dsprof.reports.front_tables`: ``points`` with k, keep, spans, speedup,
    speedup_low, speedup_high; ``presets`` with name, k, speedup; ``measured`` with name, k, keep, spans, speedup,
    speedup_low, speedup_high). The compared k: that of a preset measured beside the planner's plan of its k, else
    of a measured preset, else of a measured planner's plan, else of a preset; the planner's plan is the measured
    plan with the front's keep and spans at its k. Every other measured run (paired) goes to ``others``, each at its
    k, with its predicted speed-up where ``measured`` has one (its ``predicted`` column)."""
    best = points.loc[points["speedup"].idxmax()]
    at_k = {int(p.k): p for p in points.itertuples()}
    preset_names = set(presets["name"])
    runs = {str(m.name): m for m in measured.itertuples() if m.name != "original" and not _missing(m.speedup)}
    planner_runs = {int(m.k): m for m in runs.values() if m.name not in preset_names and int(m.k) in at_k
                    and (m.keep, m.spans) == (at_k[int(m.k)].keep, at_k[int(m.k)].spans)}
    preset_runs = {str(p.name): int(p.k) for p in presets.itertuples() if p.name in runs}
    choices = ([k for k in preset_runs.values() if k in planner_runs] + list(preset_runs.values())
               + sorted(planner_runs) + sorted(int(k) for k in presets["k"]))
    answer = Answer(device, model, float(best["speedup"]), float(best["speedup_low"]), float(best["speedup_high"]),
                    int(best["k"]))
    if not choices:
        return Answer(*_fields(answer), others=_others(runs, set()))
    k = choices[0]
    point = at_k[k]
    planner = _plan_answer("the planner's plan", point.speedup, planner_runs.get(k))
    preset = None
    preset_rows = presets[presets["k"] == k].sort_values("name")
    if len(preset_rows):
        name = next((n for n, pk in sorted(preset_runs.items()) if pk == k), preset_rows["name"].iloc[0])
        row = preset_rows[preset_rows["name"] == name].iloc[0]
        preset = _plan_answer(str(name), row["speedup"], runs.get(str(name)))
    shown = {preset.name} if preset is not None and preset.measured is not None else set()
    shown |= {str(planner_runs[k].name)} if k in planner_runs else set()
    return Answer(answer.device, model, answer.best, answer.best_low, answer.best_high, answer.best_k, k, planner, preset,
                  _others(runs, shown))


def _fields(answer: Answer) -> tuple:
    return (answer.device, answer.model, answer.best, answer.best_low, answer.best_high, answer.best_k)


def _others(runs: Mapping[str, Any], shown: set[str]) -> tuple[PlanAnswer, ...]:
    """Every measured run (paired) the sentence above does not name, in k order; ``predicted`` where the run carries
    one (the plan for several contexts)."""
    out = []
    for name, run in sorted(runs.items(), key=lambda kv: (int(kv[1].k), kv[0])):
        if name in shown:
            continue
        predicted = getattr(run, "predicted", None)
        out.append(PlanAnswer(name, None if _missing(predicted) else float(predicted), float(run.speedup),
                              float(run.speedup_low), float(run.speedup_high), int(run.k)))
    return tuple(out)


def measured_answer(records: Sequence[Measurement], plans: Mapping[str, Any]) -> list[str]:
    """Without a front: per device context, each plan measured beside the original, paired (one line each)."""
    lines = [f"No planner's front among the inputs: {WRITE_FRONT} writes one, and "
             "`dsprof.report(FILES, out=OUT, fronts='FRONT.json')` opens with what it predicts."]
    contexts: dict[Any, list[Measurement]] = {}
    for r in records:
        contexts.setdefault(r.context, []).append(r)
    for mine in contexts.values():
        found = [(r, paired_with_original(r, mine)) for r in mine if r.scope == "model" and r.variant == "custom"]
        ups = [f"{r.name} {x(up.ratio)} ({interval(up.low, up.high)})" for r, up in found if up is not None]
        if ups:
            lines.append(f"Measured on {device_line(mine)}, {model_title(mine[0])}, paired with the original: "
                         + ", ".join(ups) + ".")
    return lines


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _plan_answer(name: str, predicted: float, run: Any) -> PlanAnswer:
    if run is None:
        return PlanAnswer(name, float(predicted))
    return PlanAnswer(name, float(predicted), float(run.speedup), float(run.speedup_low), float(run.speedup_high))
