"""`dsprof measure --few N --like LUT`: a new device context from N measurements. Chooses the N most informative
entries of the model (`dsprof.lut.few.choose`), times them here (one ordinary measurement file, its drift probe
included), predicts every other entry from the full LUT of another context and writes the new context's LUT, the
predicted entries marked as such (`dsprof.lut.few.few_lut`), and plans the new context (`dsprof.planning.plan_front`)."""

from __future__ import annotations

import warnings

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

import torch

from .._moved import as_request, moved_keywords
from ..constants import DEFAULT_MAX_SPAN
from ..device_context import DeviceContext
from ..errors import LUTError
from ..io import check_output_path
from ..lut.build import build_lut
from ..lut.choice import Pricing
from ..lut.few import FewFit, candidates, choose, few_lut
from ..lut.predict import profiled_options
from ..lut.lookup import span_key
from ..lut.schema import model_label
from ..lut.table import LUT
from ..models.spans import span_ranges
from ..models import ModelRef, find_blocks, format_span, input_size_of
from ..planning.front import Front
from ..planning.planner import plan_front
from ..profiler.backends import BackendSettings
from ..profiler.runner import (MeasureResult, check_measurement_out, measure, threads_note, timing_context,
                               workload_groups)
from ..profiler.selection import Workloads
from ..profiler.timing import TimingConfig
from ..profiler.workloads import Workload

__all__ = ["FewResult", "entry_names", "measure_few", "workload_macs"]


@dataclass(frozen=True)
class FewResult:
    """What `measure_few` did: the run (its measurement file), the entries chosen and timed (LUT keys), the new
    context's LUT and where it was written, the fit (its leave-one-out error), and the new context's front."""

    run: MeasureResult
    chosen: tuple[tuple[str, str, str], ...]
    lut: LUT
    lut_path: Path | None
    fit: FewFit
    candidates: int
    max_span: int
    names: tuple[str, ...] = ()  # the chosen entries as people read them (`entry_names`), in ``chosen`` order
    front: Front | None = None  # the new context's plans for every k (`plan_front`); None where its LUT contradicts itself
    like: str = ""  # the LUT the rest was predicted from (its file)

    def text(self, words: Callable[[str], str] = str) -> str:
        """What `dsprof measure --few` prints: the threads, what was timed and what predicted (the fit's leave-one-out
        error), the LUT written and the new context's front; in the caller's words (``words``:
        `dsprof.cli.flags.command_line_text` gives the command line's options where this names parameters)."""
        lines = [words(threads_note(self.run.threads, self.run.threads_given)),
                 f"timed {len(self.chosen)} of the model's {self.candidates} entries in {self.like}: "
                 + "; ".join(self.names),
                 f"predicted the other {self.candidates - len(self.chosen)} (leave-one-out error of the fit "
                 f"{self.fit.loo_error:.1%}); records: {self.run.path}"]
        if self.lut_path is not None:
            lines.append(f"wrote {self.lut_path} (predicted entries marked: their sources start with 'predicted:')")
        if self.front is not None:  # else a warning said why no front was planned
            lines += ["", words(self.front.table())]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()


def workload_macs(net: Any, label: str, max_span: int, input_size: tuple[int, int] | None = None
                  ) -> dict[tuple[str, str, str], int]:
    """{LUT key: MACs for one image} of every block (original, merged, linear), span of up to ``max_span`` blocks, the
    whole model, its stem and head: what `measure` would time (`workload_groups`), counted, not timed."""

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small convolutions, as the runner builds them
    try:
        groups = workload_groups(net, label, ("original", "merged", "linear"), ("original",), "*", None,
                                 input_size or input_size_of(net), (), max_span)
    finally:
        torch.set_num_threads(threads)
    return {_key(w, label): w.macs for g in groups for w in g}


def entry_names(blocks: list, label: str, max_span: int) -> dict[tuple[str, str, str], str]:
    """{LUT key: what it is, as plans and tables write it} for a model's entries (``label`` its model label):
    ``block 3 (blocks.4) merged``, ``span 0-1 merged`` (the blocks of every span the entry prices, as inclusive
    ranges: ``span 2-3 and 3-4 merged`` where two spans merge into the same convolution), ``the whole model``,
    ``stem``, ``head``. A block entry that several blocks share names them all."""
    owners: dict[tuple[str, str], list[str]] = {}
    for i, b in enumerate(blocks):
        owners.setdefault(("block", b.spec.to_str()), []).append(f"{i} ({b.name})")
    for start, end in span_ranges(blocks, (0,) * len(blocks), max_span):
        owners.setdefault(("span", span_key(blocks, start, end)), []).append(format_span((start, end)))
    names: dict[tuple[str, str, str], str] = {}
    for variant in ("original", "merged", "linear"):
        for (kind, workload), where in owners.items():
            if kind == "block":
                names[("block", workload, variant)] = f"block{'s' if len(where) > 1 else ''} {', '.join(where)} {variant}"
    for (kind, workload), where in owners.items():  # a span's convolution may also be a block's key: spans win
        if kind == "span":
            names[("block", workload, "merged")] = f"span {' and '.join(where)} merged"
    names[("model", label, "original")] = "the whole model"
    names[("stem", label, "original")] = "stem"
    names[("head", label, "original")] = "head"
    return names


def _key(w: Workload, label: str) -> tuple[str, str, str]:
    """The LUT key a workload's record gets (scope, workload, variant), ``label`` the model's label."""
    return (w.scope, w.spec.to_str() if w.scope == "block" else label, w.variant)


def _selector(chosen: set[tuple[str, str, str]], label: str) -> Callable[[list[list[Workload]]], list[list[Workload]]]:
    """Keep, in each group, the workloads whose LUT key is chosen (the first workload of each key only)."""

    def select(groups: list[list[Workload]]) -> list[list[Workload]]:
        taken: set[tuple[str, str, str]] = set()
        out = []
        for group in groups:
            mine = []
            for w in group:
                key = _key(w, label)
                if key in chosen and key not in taken:
                    taken.add(key)
                    mine.append(w)
            out.append(mine)
        return out

    return select


#: The keywords of before (deprecated): each old keyword -> (the parameter that holds it now, its object, field).
_OLD_KEYWORDS = {
    **{k: ("model", "ModelRef.of", k) for k in ("name", "resolution", "weights")},
    "model_options": ("model", "ModelRef.of", "options"),
    "like_key": ("pricing", "Pricing", "device_key"), "max_span": ("pricing", "Pricing", "max_span"),
    "accept_modified": ("like", "LUT.load", "accept_modified"),
    **{k: ("settings", "BackendSettings", k) for k in ("backend", "device", "dtype", "channels_last", "threads",
                                                        "compile")},
}


def measure_few(
    model: Any,
    like: Any,
    n: int = 10,
    *,
    pricing: Pricing | None = None,
    settings: BackendSettings | DeviceContext | None = None,
    batch: int | None = None,
    timing: TimingConfig = TimingConfig(),
    out: str | Path = "results",
    lut_out: str | Path | None = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    **old: Any,
) -> FewResult:
    """Time the ``n`` most informative entries of ``model`` (anything `dsprof.models.ModelRef.of` takes: a registered
    name, a model file, an ``nn.Module``, or a `ModelRef` with its options, resolution and weights) in the timing
    context ``settings`` (a `dsprof.profiler.BackendSettings`, or a `DeviceContext` whose batch is used where
    ``batch`` is None; default PyTorch on the CPU) at ``batch``, predict the rest from ``like`` (a `LUT` or its file;
    ``LUT.load(path, accept_modified=True)`` for a file changed since `dsprof build-lut` wrote it) in the context
    ``pricing`` picks (a `dsprof.lut.Pricing`: ``device_key``, or ``backend`` and ``batch``, where it holds several;
    spans of up to ``max_span`` blocks that ``like`` holds are candidates, default `DEFAULT_MAX_SPAN`), write the new
    context's LUT to ``lut_out`` (default: the measurement file with ``.lut.csv``), and plan it (`FewResult.front`).
    ``timing``, ``out``, ``resume``, ``overwrite`` and ``progress`` as `dsprof.measure`. The keywords of before
    (``name=``, ``model_options=``, ``resolution=``, ``weights=``; ``like_key=``, ``max_span=``;
    ``accept_modified=``; ``backend=``, ``device=``, ``dtype=``, ``channels_last=``, ``threads=``, ``compile=``)
    still work for a release, with a `DeprecationWarning`."""
    moved = moved_keywords("dsprof.measure_few", old, _OLD_KEYWORDS)
    pricing = as_request(pricing, Pricing, "pricing", moved)
    settings, batch = timing_context(settings, batch)
    settings = replace(settings, **moved.get("settings", {}))
    max_span = pricing.max_span if pricing.max_span is not None else DEFAULT_MAX_SPAN
    check_measurement_out(out, resume, overwrite)
    # the like LUT read once, before the model is built (a bad file is said at once)
    like = like if isinstance(like, LUT) else LUT.load(like, **moved.get("like", {}))
    ref = ModelRef.of(model, **moved.get("model", {}))
    options, registered, net = dict(ref.options), ref.name, ref.build()
    label = model_label(registered, profiled_options(net, options))
    blocks = find_blocks(net)
    cands = candidates(like, pricing.context(like), label, blocks, max_span, workload_macs(net, label, max_span))
    chosen = choose(cands, n)
    keys = {c.key for c in chosen}
    spans = max(c.span for c in chosen)
    if lut_out is not None:
        check_output_path(lut_out)
    chosen_workloads = Workloads(variants=tuple(sorted({c.variant for c in chosen if c.scope == "block"})),
                                 model_variants=("original",) if any(c.scope != "block" for c in chosen) else (),
                                 spans=spans)
    run = measure(ModelRef.of(net, name=registered, options=options, resolution=ref.resolution), settings=settings,
                  batch=batch, workloads=chosen_workloads, timing=timing, out=out, resume=resume, overwrite=overwrite,
                  progress=progress, select=_selector(keys, label))
    measured = build_lut([run.path])
    for context_key in measured.devices():
        missing = [k for k in keys if measured.find(k[1], k[2], context_key, scope=k[0]) is None]
        if missing:
            raise LUTError(f"{run.path}: the run did not time {len(missing)} chosen entries (e.g. {missing[0]}); "
                           "see its records' errors")
    lut, model_fit = few_lut(like, cands, measured)
    path = Path(lut_out) if lut_out is not None else run.path.with_suffix(".lut.csv")
    lut.save(path)
    names = entry_names(blocks, label, max_span)
    spans_held = max([1] + [c.span for c in cands])
    try:
        front = plan_front(ModelRef.of(net, name=registered, options=options), lut,
                           pricing=Pricing(max_span=spans_held))
    except LUTError as exc:  # a few noisy entries can contradict the fit: the run and the LUT are kept, and said
        warnings.warn(f"{path}: no front planned from it: {exc}", UserWarning, stacklevel=2)
        front = None
    return FewResult(run, tuple(c.key for c in chosen), lut, path, model_fit, len(cands), spans_held,
                     tuple(names.get(c.key, f"{c.scope} {c.variant} {c.workload}") for c in chosen), front, str(like.source))

