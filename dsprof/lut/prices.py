"""The prices of a plan: what a LUT says each way of deploying a model's blocks takes, under each method.

A plan deploys the blocks as consecutive *pieces*: a block that keeps its activations (its ``original``
entry); a linearised block alone, merged into one convolution or left unmerged as its plan's ``merge`` list
says (a list the planner writes, `dsprof.planning.decide`: merged where its ``merged`` entry is below the block left
unmerged -- its ``linear`` entry, timed in the form `merge_model` deploys, where measured, else ``original``); or a span of
linearised blocks merged into one convolution (the span's ``merged`` entry, from `dsprof measure --spans N`). A piece *saves* its blocks' original entries minus its own, and under every method
the predicted latency is affine in the pieces' savings:

- ``isolated``: rest + the pieces' latencies = (rest + the blocks' originals) - sum of savings;
- ``in-situ-scaled``: the whole model's reference - factor * sum of isolated savings, the factor the model's
  in-situ over its isolated savings;
- ``in-model``: the same with the factor the middle of 1 and the model's in-model factor (`in_model_factor`); where
  the LUT timed pieces inside the model (`dsprof measure --calibrate`), each kind's scale from them
  (`dsprof.lut.inmodel`); from fewer than `MIN_PIECES`, the one line through them, shrunk toward 1, with a
  `CalibrationFallbackWarning` (one line: a calibration is never unused in silence, issue #46);
- ``in-situ``: the whole model's reference - sum of savings measured inside the model (blocks only: a
  span has no in-situ entry).

`predict_latency`, the planner, every command that builds a merged model (through `dsprof.planning.decide`), `predict
--measure` and the search's decay weights all price with `Prices`, so they agree. The intervals are
`dsprof.lut.interval`'s, from the entries `dsprof.lut.inputs.interval_inputs` gathers.
"""

from __future__ import annotations

import math
import statistics
import warnings
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Sequence

from ..device_context import DeviceContext
from ..runtimes import BACKENDS
from ..errors import UsageError
from ..merging.block import deploys_alike
from ..merging.partial import act_layouts, crossing_spec
from ..records.activations import MAX_TIMED_ACTS, ActLayout, is_crossing, partial_runs, partial_variant
from ..models import Block, format_span
from ..models.spans import span_ranges
from ..names import CROSSING_VARIANT
from ..records.measurement import IN_SITU_SCOPE
from .hints import PriceHints
from .inmodel import MIN_PIECES, InModel, Timed
from .inputs import interval_inputs
from .interval import Terms, calibration_of, entry_error_s, saving_error_s, session_noise, terms_of
from .lookup import Lookup, ModelEntries, in_model_factor, piece_name, span_key
from .piece import Piece, cheaper
from .schema import in_situ_workload
from .table import LUT, LUTEntry

__all__ = ["CalibrationFallbackWarning", "MethodFallbackWarning", "Prices", "model_pieces", "saving_alone_s"]


@dataclass(frozen=True)
class Prices:
    """Prices any plan of one model in one LUT context under one method (see the module docstring): a
    plan's `total_s` is the original model's minus the sum of its pieces' ``saving_s``. A lone linearised block
    that the plan's ``merge`` list does not place is deployed the cheaper way (`linearized`), as the planner deploys
    it."""

    label: str
    key: DeviceContext
    blocks: list[Block]
    lookup: Lookup
    entries: ModelEntries
    method: str  # what is used: isolated, in-situ, in-situ-scaled or in-model
    used: str  # as shown: isolated, in-situ, in-situ-scaled (xF), in-model (xF)
    rest_method: str
    rest_s: float  # isolated: the part outside the blocks (stem+head, or whole model minus blocks)
    reference_s: float  # the scaled and in-situ methods: the whole model's median (0 under isolated)
    factor: float  # what the isolated savings count with: in-situ-scaled's or in-model's factor (1 otherwise)
    in_situ_factor: float | None  # in-situ-scaled's factor where the LUT has it, whatever the method
    base_errors: tuple[float, ...]
    missing: tuple[str, ...]  # what the model (not a piece) lacks
    identity: tuple[str, dict] | None = None  # (registered name, options) of the model, to check plans against
    model_args: str = ""  # the API argument that builds this model, for messages (`PriceHints.measure_args`)
    # in-model: the pieces timed inside the model (`dsprof measure --calibrate`), their scale and spread
    in_model: InModel | None = None
    # each piece read once: a planner or a benchmark prices thousands of plans from the same few pieces
    _pieces: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @classmethod
    def read(cls, lut: LUT, key: DeviceContext, label: str, blocks: list[Block], *, method: str,
             rest: str = "auto", variant: str | None = None, auto: bool = False, model_args: str = "") -> "Prices":
        """The prices of ``label``'s plans; ``method`` is isolated, in-situ, in-situ-scaled or in-model (resolved),
        ``rest`` auto, stem+head or model-minus-blocks. Where a scaled method cannot apply, isolated is used:
        asked for by name, ``used`` says why, with a `MethodFallbackWarning` (a method's fallback, not a LUT
        miss); chosen by ``auto``, silently (the LUT lacks what the method reads). ``model_args``: the API argument
        that builds the model, which the call a message suggests names."""
        lookup = Lookup.of(lut, key)
        entries = ModelEntries.read(lookup, label, blocks)
        missing: list[str] = []
        factor = _in_situ_factor(blocks, entries, lookup) if variant is None else None
        common = dict(label=label, key=key, blocks=blocks, lookup=lookup, entries=entries, in_situ_factor=factor,
                      model_args=model_args)
        if method == "in-situ":
            if variant is not None:
                raise UsageError("the in-situ method predicts plans; give a plan, not a variant for every block")
            references = entries.references
            if not references:
                missing.append(f"a whole-model or in-situ entry of {label}")
                return cls(**common, method="in-situ", used="in-situ", rest_method="whole-model", rest_s=0.0,
                           reference_s=0.0, factor=1.0, base_errors=(), missing=tuple(missing))
            # the median of several entries: about one entry's error over the square root of their count
            error = entry_error_s(references[0]) / math.sqrt(len(references))
            return cls(**common, method="in-situ", used="in-situ", rest_method="whole-model", rest_s=0.0,
                       reference_s=entries.whole_s, factor=1.0,
                       base_errors=(error,), missing=tuple(missing))
        rest_s, rest_method, base_errors = _rest(entries, rest, missing)
        used = "isolated"
        if method in ("in-situ-scaled", "in-model"):
            phi = in_model_factor(entries)
            scale = factor if method == "in-situ-scaled" else (None if phi is None else (1 + phi) / 2)
            reference = entries.whole_s
            in_model = None
            if method == "in-model" and reference > 0:
                timed = timed_pieces(lookup, label, blocks, entries.originals, reference,
                                     lambda a, b: span_key(blocks, a, b), lambda a, b: piece_name(blocks, a, b))
                _, sessions = session_noise(entries.sessions)
                session_s = sessions * reference if sessions == sessions else 0.0
                in_model = InModel.estimate(timed, reference, session_s=session_s)
                if in_model is None and timed:  # calibrated, but too few pieces: never unused in silence
                    in_model = InModel.estimate(timed, reference, minimum=1, session_s=session_s)
                    _warn_few(label, blocks, lookup, timed, in_model, scale)
            if in_model is not None:
                few = f", fewer than {MIN_PIECES}: one line, shrunk toward 1" if in_model.few else ""
                costs = cls(**common, method=method, used=f"in-model (x{in_model.scale:.3f}, {len(in_model.timed)} "
                            f"pieces timed in the model{few})", rest_method=rest_method, rest_s=rest_s,
                            reference_s=reference, factor=in_model.scale, base_errors=tuple(base_errors),
                            missing=tuple(missing), in_model=in_model)
                # how the pieces' savings combine in the whole model, if timed
                inputs = interval_inputs(costs)
                calibration = calibration_of(inputs)
                if calibration.rho > 0:
                    costs = replace(costs, in_model=replace(
                        in_model, combined=calibration.rho, combined_se=calibration.rho_se,
                        combined_source=calibration.source,
                        calibration_s=(inputs.calibration_share - inputs.calibration_costs) * inputs.reference_s,
                        excess_by=_excess_by(key)))
                elif calibration.gap == calibration.gap:  # rho says nothing: the plans share its gap by blocks
                    costs = replace(costs, in_model=replace(in_model, gap_s=calibration.gap * inputs.reference_s))
                return costs
            why_not = _why_not_scaled(method, scale, rest_method, label, model_args)
            if why_not is None:
                return cls(**common, method=method, used=f"{method} (x{scale:.3f})", rest_method=rest_method,
                           rest_s=rest_s, reference_s=reference, factor=scale, base_errors=tuple(base_errors),
                           missing=tuple(missing))
            if not auto:  # auto on a LUT without what its method reads: plain isolated (nothing fell back)
                used = f"isolated ({method} fell back: {why_not})"
                warnings.warn(f"{label}: {used}", MethodFallbackWarning, stacklevel=4)
        return cls(**common, method="isolated", used=used, rest_method=rest_method, rest_s=rest_s,
                   reference_s=0.0, factor=1.0, base_errors=tuple(base_errors), missing=tuple(missing))

    @cached_property
    def measured_utc(self) -> str:
        """When the LUT context's last group was timed (`LUT.measured_utc`), read once."""
        return self.lookup.lut.measured_utc(self.key)

    @cached_property
    def layouts(self) -> list[ActLayout]:
        """Each block's activations as the planner and merge read them (`act_layouts`), worked out once per prices:
        an activation plan's pieces read them at every plan the planner prices."""
        return act_layouts(self.blocks)

    @cached_property
    def draft(self) -> str:
        """Why every figure priced here is a draft, as a label ("draft: ..."; "" where none): the LUT run was
        contended (`LUT.contention_label`), or the in-model method priced the pieces from their times alone, with no
        piece timed inside the model (benchmarks/RESULTS.md, "Cross-runtime losses from LUTs with their pieces
        timed inside the model": the same run priced both ways)."""
        labels = [self.lookup.lut.contention_label(self.key)]
        if self.method == "in-model" and self.in_model is None:
            labels.append("draft: priced from pieces timed alone, none timed inside the model")
        return "; ".join(filter(None, labels))

    @cached_property
    def hints(self) -> PriceHints:
        """What messages about these prices name (`dsprof.lut.hints.PriceHints`): the `dsprof measure` that times
        what they read, and the miss of a lone block the planner cannot decide."""
        return PriceHints(self.key, str(self.lookup.lut.source), self.label, tuple(b.spec.to_str() for b in self.blocks),
                          self.model_args, self.method in ("in-situ", "in-situ-scaled") or self.in_situ_factor is not None)

    @cached_property
    def terms(self) -> Terms:
        """The parts of every plan's interval that belong to the model, not to a plan (`dsprof.lut.interval.terms_of`):
        worked out once per prices, not for each plan the planner prices (they price the calibration plan too)."""
        return terms_of(interval_inputs(self))

    # -- pieces ------------------------------------------------------------------------------------
    def kept(self, i: int) -> Piece:
        """Block ``i`` with its activations."""
        key = ("kept", i)
        if key not in self._pieces:
            original = self.entries.originals[i]
            self._pieces[key] = replace(self._piece(i, i + 1, "original", original,
                                                    f"block {self.blocks[i].spec.to_str()} [original]"), kept=True)
        return self._pieces[key]

    def unmerged(self, i: int, border: str = "in_front") -> tuple[str, LUTEntry | None]:
        """(variant, entry) of block ``i`` linearised and left unmerged, as a plan with this ``border`` deploys it:
        its ``linear`` entry where the LUT has one and it was timed in that form (the profiler times the
        padding-in-front form, `dsprof.profiler.workloads.deployed_linear`; under ``in_place`` it covers the
        blocks that run alike either way, `dsprof.merging.block.deploys_alike`), else its ``original`` where the block
        deploys as built (removing a ReLU changes nothing measurable where the runtime fuses it; the profiler times
        ``linear`` of a block holding another activation, `dsprof.runtimes.FOLDED_ACTIVATIONS`; a LUT measured before
        that rule prices it so too). A block whose padding in
        front runs over a larger map has no price without its ``linear`` entry (None: a miss the hints name)."""
        linear = self.lookup(self.blocks[i].spec.to_str(), "linear")
        alike = deploys_alike(self.blocks[i])
        if linear is not None and (border == "in_front" or alike):
            return "linear", linear
        if border == "in_front" and not alike:
            return "linear", None
        return "original", self.entries.originals[i]

    def linearized(self, i: int, merge: bool | None = None, border: str = "in_front") -> Piece:
        """Block ``i`` without activations, alone: merged or not as ``merge`` says, or (None) the one of the two that
        costs less (`dsprof.lut.piece.cheaper`: merged where its entry is below the unmerged one's; where the LUT lacks
        either, merged, which names the miss): how the planner offers a lone block, and how a plan without a ``merge``
        list is priced."""
        if merge is None:
            return cheaper(self.linearized(i, True, border), self.linearized(i, False, border))
        key = ("linear", i, bool(merge), border)
        if key not in self._pieces:
            spec = self.blocks[i].spec.to_str()
            variant, entry = ("merged", self.lookup(spec, "merged")) if merge else self.unmerged(i, border)
            self._pieces[key] = self._piece(i, i + 1, variant, entry, f"block {spec} [{variant}]")
        return self._pieces[key]

    def span(self, start: int, stop: int) -> Piece:
        """Blocks start..stop-1 merged into one convolution."""
        key = ("span", start, stop)
        if key not in self._pieces:
            workload = span_key(self.blocks, start, stop)
            self._pieces[key] = self._piece(start, stop, "span", self.lookup(workload, "merged"),
                                            f"span of blocks {format_span((start, stop))} {workload} [merged]")
        return self._pieces[key]

    def partial(self, i: int, variant: str) -> Piece:
        """Block ``i`` keeping some of its activations, its runs between them merged (``fused-expand``,
        ``fused-project``, ``fused-010``...: `dsprof.records.activations.partial_variant`): its entry in that
        variant; ``kept`` in the block view (a block keeps its activations iff it keeps any)."""
        key = ("partial", i, variant)
        if key not in self._pieces:
            spec = self.blocks[i].spec.to_str()
            piece = self._piece(i, i + 1, variant, self.lookup(spec, variant), f"block {spec} [{variant}]")
            self._pieces[key] = replace(piece, kept=True)
        return self._pieces[key]

    def crossing(self, start: int, stop: int, acts: Sequence[Sequence[int]]) -> Piece:
        """The crossing span ``[start, stop)`` of a plan with ``acts`` (its end blocks keep some activations) as it
        deploys: its entry in the variant ``crossing`` (`dsprof.merging.partial.crossing_spec`, timed by `dsprof.measure`
        with ``Workloads(spans=N)`` and a partial variant); ``kept`` in the block view (its ends keep activations)."""
        ends = (tuple(acts[start]), tuple(acts[stop - 1]))
        key = ("crossing", start, stop, ends)
        if key not in self._pieces:
            spec = crossing_spec(self.blocks, acts, (start, stop)).to_str()
            what = " ".join(str(list(a)) for a in acts[start:stop])
            piece = self._piece(start, stop, CROSSING_VARIANT, self.lookup(spec, CROSSING_VARIANT),
                                f"crossing span of blocks {format_span((start, stop))} (activations {what}) {spec} "
                                f"[{CROSSING_VARIANT}]")
            self._pieces[key] = replace(piece, kept=True)
        return self._pieces[key]

    def as_variant(self, i: int, variant: str) -> Piece:
        """Block ``i`` as ``variant`` (every block one variant, e.g. the paper's Tab. 1 ``flops_matched``)."""
        spec = self.blocks[i].spec.to_str()
        return self._piece(i, i + 1, variant, self.lookup(spec, variant), f"block {spec} [{variant}]")

    def pieces(self, plan: Any) -> list[Piece]:
        """The pieces a plan (a `dsprof.planning.Plan` with its merge list, or None for the original model) deploys, in
        block order."""
        if plan is None:
            return [self.kept(i) for i in range(len(self.blocks))]
        pieces = self.pieces_of(plan.keep, plan.spans or (), plan.merge, plan.border)
        if getattr(plan, "acts", None) is not None:  # a plan at the level of activations: its partial blocks
            layouts = self.layouts
            plan.check_acts([layout.n_acts for layout in layouts])
            for n, piece in enumerate(pieces):
                i = piece.start
                if piece.stop - i > 1 and is_crossing(plan.acts, (i, piece.stop)):  # not its blocks' span entry
                    pieces[n] = self.crossing(i, piece.stop, plan.acts)
                elif piece.kept and partial_runs(layouts[i], plan.acts[i]):
                    variant = partial_variant(layouts[i], plan.acts[i])
                    what = f"block {self.blocks[i].spec.to_str()} with activations {list(plan.acts[i])}"
                    pieces[n] = (self.partial(i, variant) if variant is not None else Piece(
                        i, i + 1, "partial", math.nan, math.nan, kept=True,
                        missing=f"{what} (a partial state of a block of more than {MAX_TIMED_ACTS} activations: not timed)"))
        return pieces

    def pieces_of(self, keep: Sequence[int], spans: Sequence[tuple[int, int]] = (),
                  merge: Sequence[bool] | None = None, border: str = "in_front") -> list[Piece]:
        """The pieces of the plan ``keep`` (1 = the block keeps its activations) with ``spans`` ([start, stop) of
        linearised blocks merged as one convolution) and its ``merge`` list (None: each lone block deployed the
        cheaper way, `linearized`): the one walk from a plan to what it deploys (`predict_plan` and `dsprof.lut.Pricer` read it)."""
        starts = dict(spans)
        out, i = [], 0
        while i < len(self.blocks):
            stop = starts.get(i)
            if stop is not None:
                out.append(self.span(i, stop))
                i = stop
                continue
            m = None if merge is None else bool(merge[i])
            out.append(self.kept(i) if keep[i] else self.linearized(i, m, border))
            i += 1
        return out

    def _piece(self, start: int, stop: int, variant: str, entry: LUTEntry | None, name: str) -> Piece:
        if entry is None:
            return Piece(start, stop, variant, math.nan, math.nan, missing=name)
        originals = self.entries.originals[start:stop]
        if variant == "original" and stop - start == 1:  # kept: saves nothing
            errors = (entry_error_s(entry),) if self.rest_method == "stem+head" else ()
            return Piece(start, stop, variant, entry.median_s, 0.0, errors, None, entry.noisy)
        if self.method == "in-situ":
            saving, errors, missing = self._in_situ(start, stop, variant, name)
            return Piece(start, stop, variant, entry.median_s, saving, errors, missing, entry.noisy)
        found = all(o is not None for o in originals)
        alone = saving_alone_s(originals, entry.median_s)
        if self.in_model is not None and found:
            kind = "span" if stop - start > 1 else variant
            saving, se, timed = self.in_model.price(start, stop, kind, alone)
            slope = self.in_model.slope(start, stop, kind, alone)
            errors = (se, *(slope * e for e in self._alone_errors(originals, entry)))
            return Piece(start, stop, variant, entry.median_s, saving, errors, None, entry.noisy, timed,
                         weight=self.in_model.weight(saving))
        saving = self.factor * alone
        if self.rest_method == "stem+head":
            errors = (entry_error_s(entry),)
        elif self.rest_method == "model-minus-blocks":
            errors = ((saving_error_s(originals[0], entry),) if stop - start == 1
                      else tuple(entry_error_s(o) for o in originals) + (entry_error_s(entry),))
        else:
            errors = ()
        return Piece(start, stop, variant, entry.median_s, saving, errors, None, entry.noisy)

    def _alone_errors(self, originals: list[LUTEntry], entry: LUTEntry) -> tuple[float, ...]:
        """The standard errors of a saving alone: of the paired ratio (a block), or of every median (a span)."""
        if len(originals) == 1:
            return (saving_error_s(originals[0], entry),)
        return tuple(entry_error_s(o) for o in originals) + (entry_error_s(entry),)

    def _in_situ(self, start: int, stop: int, variant: str, name: str) -> tuple[float, tuple[float, ...], str | None]:
        """(saving, errors, miss) of block ``start`` as ``variant`` measured inside the running model, relative to
        the model timed in the same rounds and scaled to the reference: a group that ran in a slow moment of the
        machine inflates neither."""
        if stop - start > 1:
            return math.nan, (), f"{name}: in-situ entries cover blocks, not spans (plan spans with another method)"
        block = self.blocks[start].name
        base = self.entries.in_situ.get(block)
        swap = self.lookup(in_situ_workload(self.label, block), variant, IN_SITU_SCOPE)
        if base is None or swap is None:
            return math.nan, (), f"in situ {in_situ_workload(self.label, block)} [original/{variant}]"
        scale = self.reference_s / base.median_s
        errors = (saving_error_s(base, swap) * scale,)
        return self.reference_s * (1 - swap.median_s / base.median_s), errors, None

    # -- totals ------------------------------------------------------------------------------------
    def total_s(self, pieces: list[Piece], together: bool = True) -> float:
        """A plan's predicted latency (seconds per batch); a missing piece is left out (isolated) or counted as
        the original blocks (the in-situ method). In-model pieces add the plan's share of what the calibration
        plan saved beyond its pieces (`dsprof.lut.inmodel.InModel.together`); ``together`` False: their plain sum (what the
        calibration group's rho is measured against)."""
        if self.method == "isolated":
            return self.rest_s + sum(p.latency_s for p in pieces if p.latency_s == p.latency_s)
        if together and self.in_model is not None:
            return self.reference_s - self.in_model.together(pieces)
        return self.reference_s - sum(p.saving_s for p in pieces if p.saving_s == p.saving_s)

    def shown_rest_s(self, pieces: list[Piece]) -> float:
        """The part outside the blocks as the prediction shows it: the isolated rest, else the total minus
        the pieces' latencies."""
        if self.method == "isolated":
            return self.rest_s
        return self.total_s(pieces) - sum(p.latency_s for p in pieces if p.latency_s == p.latency_s)

    def errors_s(self, pieces: list[Piece]) -> list[float]:
        """Every median error a plan's total carries, for the interval."""
        return list(self.base_errors) + [e for p in pieces for e in p.errors_s]


def _excess_by(key: DeviceContext) -> str:
    """How a plan of ``key``'s runtime takes its share of the calibration plan's excess (`dsprof.lut.inmodel`): by
    blocks where the backend runs each activation apart (PyTorch eager), else by pairs (a compiler fuses neighbours)."""
    entry = BACKENDS.get(key.backend)
    return "blocks" if entry is not None and entry.separate_activations else "pairs"


def _rest(entries: ModelEntries, rest: str, missing: list[str]) -> tuple[float, str, list[float]]:
    """(rest, how it was found, its entries' errors): the part outside the blocks. ``auto`` takes the measured
    whole model (`ModelEntries.whole_s`) minus its blocks first: it carries what a sum of parts timed alone misses (on a CPU the parts
    timed alone add up to less, likely warm caches: see benchmarks/RESULTS.md), then the stem and head timed
    alone. Misses go to ``missing``."""
    whole, originals = entries.whole, entries.originals
    if whole is not None and all(o is not None for o in originals) and rest != "stem+head":
        return entries.whole_s - sum(o.median_s for o in originals), "model-minus-blocks", [entry_error_s(whole)]
    stem, head = entries.stem, entries.head
    if stem is not None and head is not None and rest != "model-minus-blocks":
        return stem.median_s + head.median_s, "stem+head", [entry_error_s(stem), entry_error_s(head)]
    wanted = {"auto": "stem/head entries or a whole-model entry with all its blocks",
              "stem+head": "stem/head entries", "model-minus-blocks": "a whole-model entry with all its blocks"}[rest]
    missing.append(f"{wanted} of {entries.label}")
    return 0.0, "missing", []


def _in_situ_factor(blocks: list[Block], entries: ModelEntries, lookup: Lookup) -> float | None:
    """Sum of the blocks' in-situ savings (merged) over the sum of their isolated savings, or None
    without in-situ entries or when the two sums disagree in sign (the in-situ differences are
    not comparable: TFLite on a CPU, isolated -0.04 ms against +23 % in situ, gave -34). Each in-situ saving is
    relative to the model timed in its group."""
    in_situ, alone = 0.0, 0.0
    for block, original in zip(blocks, entries.originals):
        base = entries.in_situ.get(block.name)
        swap = lookup(in_situ_workload(entries.label, block.name), "merged", IN_SITU_SCOPE)
        merged = lookup(block.spec.to_str(), "merged")
        if base is None or swap is None or merged is None or original is None:
            continue
        in_situ += 1 - swap.median_s / base.median_s
        alone += (original.median_s - merged.median_s)
    if alone == 0.0 or in_situ == 0.0:
        return None
    whole_ref = statistics.median(e.median_s for e in entries.in_situ.values() if e is not None)
    factor = in_situ * whole_ref / alone
    return factor if factor > 0 else None


class MethodFallbackWarning(UserWarning):
    """A prediction used another method than the one asked for (said in `Prediction.method` too)."""


class CalibrationFallbackWarning(UserWarning):
    """The LUT timed pieces inside the model (`dsprof measure --calibrate`), but too few for the in-model scales
    (`dsprof.lut.inmodel.MIN_PIECES`): one line says how many, why no more could be timed where the model has no
    more, and what the prices count instead (`Prediction.method` says it too)."""


def model_pieces(blocks: list[Block], has_span: Any) -> list[tuple[int, int]]:
    """The pieces (start, stop) that a plan of the model of ``blocks`` can deploy, and so time inside the model:
    every block alone, then every span of 2 or more blocks that can merge as one (`span_ranges`) and for which
    ``has_span(start, stop)`` (the LUT holds its merged entry: keyed by shapes, which blocks that cannot merge as one
    may share with a span that can, EfficientViT's 10-12 with its 11-12). How many there are bounds how many pieces a
    model can have timed inside it (`dsprof.workflows.calibrate`)."""
    n = len(blocks)
    spans = sorted(span_ranges(blocks, (0,) * n, n))
    return [(i, i + 1) for i in range(n)] + [(a, b) for a, b in spans if has_span(a, b)]


def _warn_few(label: str, blocks: list[Block], lookup: Lookup, timed: Sequence[Timed], in_model: InModel | None,
              factor: float | None) -> None:
    """The one line a `CalibrationFallbackWarning` says: how many pieces were timed inside the model, how many it has,
    and what the prices count instead."""
    pieces = model_pieces(blocks, lambda a, b: lookup(span_key(blocks, a, b), "merged") is not None)
    has = (f"the model has only {len(pieces)} to time ({len(blocks)} blocks, {len(pieces) - len(blocks)} spans "
           "measured)" if len(pieces) < MIN_PIECES else
           f"the model has {len(pieces)}: time it again with `calibrate=True` to time more")
    if in_model is not None:
        instead = (f"prices count each saving alone x{in_model.scale:.3f}, the line through those pieces' paired "
                   f"savings (x{in_model.fitted:.3f}) shrunk toward 1 (+-{in_model.scale_se:.0%}), each timed piece "
                   "moved toward what it measured inside the model; not the in-model factor, which counts time a plan "
                   "cannot change")
    else:
        no_line = "no piece saves or costs anything alone, so they draw no line"
        instead = (f"{no_line}: prices count each saving alone x{factor:.3f}, the middle of 1 and the in-model factor"
                   if factor is not None else no_line)
    said = (f"{len(timed)} pieces timed inside the model, fewer than the {MIN_PIECES} the in-model scales need ({has})"
            if len(timed) < MIN_PIECES else f"{len(timed)} pieces timed inside the model")
    warnings.warn(f"{label}: {said}; {instead}", CalibrationFallbackWarning, stacklevel=5)


def _why_not_scaled(method: str, factor: float | None, rest_method: str, label: str, model_args: str = ""
                    ) -> str | None:
    """Why a scaled method (``in-situ-scaled``, ``in-model``) cannot predict here (None: it can): both start from
    the whole model with every block, and need their factor. ``model_args``: the model's API argument, for the call
    the message suggests (without one, no call is suggested: it would time another model)."""
    if rest_method != "model-minus-blocks":
        return f"the LUT lacks {label}'s whole-model entry or one of its blocks' originals"
    if factor is not None:
        return None
    if method == "in-model":
        return f"{label}'s whole model measured shorter than its stem and head (measure again on a quiet machine)"
    call = f" (`dsprof.measure({model_args}, workloads=Workloads(in_situ='merged'))`)" if model_args else ""
    return (f"the LUT lacks in-situ entries (merged) of {label}'s blocks whose savings agree in sign with "
            f"the isolated ones{call}")


def saving_alone_s(originals: Sequence[Any], latency_s: float) -> float:
    """What a piece of these blocks saves timed alone: their original entries' medians less its own ``latency_s``
    (seconds; NaN where an original entry is missing). Negative: it costs time alone."""
    if any(o is None for o in originals):
        return math.nan
    return sum(o.median_s for o in originals) - latency_s


def timed_pieces(lookup: Any, label: str, blocks: Sequence[Any], originals: Sequence[Any], reference_s: float,
                 span_key: Any, in_model_name: Any) -> list[Timed]:
    """Every piece of ``label`` the LUT context (``lookup``) timed inside the model, with its saving alone:
    ``in_model_name(start, stop)`` names a piece there, ``span_key(start, stop)`` is a span's block workload."""
    out = []
    n = len(blocks)
    candidates = [(i, i + 1, v) for i in range(n) for v in ("merged", "linear")]
    candidates += [(a, b, "span") for a in range(n) for b in range(a + 2, n + 1)
                   if lookup(in_situ_workload(label, in_model_name(a, b)), "original", IN_SITU_SCOPE) is not None]
    for start, stop, variant in candidates:
        workload = in_situ_workload(label, in_model_name(start, stop))
        base = lookup(workload, "original", IN_SITU_SCOPE)
        swap = lookup(workload, "merged" if variant == "span" else variant, IN_SITU_SCOPE)
        alone_entry = (lookup(span_key(start, stop), "merged") if variant == "span"
                       else lookup(blocks[start].spec.to_str(), variant))
        group = originals[start:stop]
        if base is None or swap is None or alone_entry is None or any(o is None for o in group):
            continue
        ratio = swap.ratio if swap.ratio == swap.ratio else swap.median_s / base.median_s
        saving = reference_s * (1 - ratio)
        se = saving_error_s(base, swap) * reference_s / base.median_s
        out.append(Timed(start, stop, variant, saving_alone_s(group, alone_entry.median_s), saving, se))
    return out
