"""One cost of a plan: what a LUT says each way of deploying a model's blocks takes, under each method.

A plan deploys the blocks as consecutive *pieces*: a block that keeps its activations (its ``original``
entry); a linearised block alone, merged into one convolution or left unmerged as its plan's ``merge`` list
says (`PlanCosts.with_merges` writes that list from the one rule, `merge_pays`: its ``merged`` entry below the
block left unmerged -- its ``linear`` entry, timed in the form `merge_model` deploys, where measured, else
``original``); or a span of linearised blocks merged into one convolution (the span's ``merged`` entry, from
`dsprof measure --spans N`). A piece *saves* its blocks' original entries minus its own, and under every method
the predicted latency is affine in the pieces' savings:

- ``isolated``: rest + the pieces' latencies = (rest + the blocks' originals) - sum of savings;
- ``context-scaled``: the whole model's reference - factor * sum of isolated savings, the factor the model's
  in-context over its isolated savings;
- ``in-model``: the same with the factor the middle of 1 and the model's in-model factor (`in_model_factor`);
- ``context``: the whole model's reference - sum of savings measured inside the model (blocks only: a
  span has no in-context entry).

`predict_latency`, the planner, every command that builds a merged model (through `with_merges`), `predict
--measure` and the search's decay weights all price with `PlanCosts`, so they agree.
"""

from __future__ import annotations

import math
import statistics
import warnings
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from ..device_context import DeviceContext
from ..errors import LUTMissError, UsageError
from ..models import Block, format_span
from .inmodel import InModel, timed_pieces
from .interval import Terms, calibration_of, entry_error_s, saving_error_s, terms_of
from .schema import context_workload, span_piece, split_label
from .table import LUT, LUTEntry

__all__ = ["Lookup", "ModelEntries", "Piece", "PlanCosts", "in_model_factor", "merge_pays", "piece_name", "span_key"]


@dataclass(frozen=True)
class Lookup:
    """Lookups in one device context of a LUT, indexed once, that miss quietly (None): a prediction
    gathers its misses and reports them once."""

    lut: LUT
    key: DeviceContext
    index: dict[tuple[str, str, str], LUTEntry] = field(repr=False, default_factory=dict)

    @classmethod
    def of(cls, lut: LUT, key: DeviceContext) -> "Lookup":
        index: dict[tuple[str, str, str], LUTEntry] = {}
        for r in lut.entries(key).itertuples(index=False):
            entry = LUTEntry.of(r)
            index.setdefault((r.scope, r.workload, r.variant), entry)  # the first row, as LUT.find
        return cls(lut, key, index)

    def __call__(self, workload: Any, variant: str, scope: str = "block") -> LUTEntry | None:
        workload = workload if isinstance(workload, str) else workload.to_str()
        return self.index.get((scope, workload, variant))

    def models(self) -> list[str]:
        """The labels of the whole models this context holds (timed whole, or as stem and head)."""
        return sorted({w for scope, w, variant in self.index if scope in ("model", "stem", "head") and variant == "original"})

    def other_model_note(self, label: str, resolution_flag: str = "--resolution") -> str | None:
        """Where this context holds other models but not ``label``: one clause that says what it holds instead
        and, where only the resolution differs, the option that fixes it (``resolution_flag``, as the caller's
        command spells it); None where it holds ``label`` (or no whole model at all)."""
        held = self.models()
        if not held or label in held:
            return None
        name, options = split_label(label)
        same = sorted({o.get("resolution") for n, o in map(split_label, held) if n == name
                       and {k: v for k, v in o.items() if k != "resolution"} == {k: v for k, v in options.items() if k != "resolution"}
                       and o.get("resolution") is not None}, key=str)
        if same:
            at = " or ".join(f"{r} px" for r in same)
            return (f"the LUT {self.lut.source} holds {name} at {at}, not at {options.get('resolution', '?')} px: "
                    f"add {resolution_flag} {same[0]}")
        shown = ", ".join(held[:4]) + (f" and {len(held) - 4} more" if len(held) > 4 else "")
        return f"this LUT ({self.lut.source}) holds another model ({shown}), not {label}: give that model's options"


@dataclass(frozen=True)
class ModelEntries:
    """What a prediction reads of one model besides its blocks' chosen variants: each block's original,
    the whole model, its stem and head, and the whole model in each block's context group (by block name)."""

    label: str
    originals: list[LUTEntry | None]
    whole: LUTEntry | None
    stem: LUTEntry | None
    head: LUTEntry | None
    in_model: dict[str, LUTEntry | None]

    @classmethod
    def read(cls, lookup: Lookup, label: str, blocks: list[Block]) -> "ModelEntries":
        return cls(
            label,
            [lookup(b.spec.to_str(), "original") for b in blocks],
            lookup(label, "original", "model"),
            lookup(label, "original", "stem"),
            lookup(label, "original", "head"),
            {b.name: lookup(context_workload(label, b.name), "original", "context") for b in blocks},
        )

    @property
    def references(self) -> list[LUTEntry]:
        """The whole model's medians the context methods start from: its own entry and every in-context group's."""
        return [e for e in [self.whole, *self.in_model.values()] if e is not None]

    @property
    def whole_s(self) -> float:
        """The whole model's latency: the median of its `references`' medians (NaN without one). One slow group of
        the whole model's own entry moved the in-model factor from 1.7 to 2.3 in issue #27's seed-303 run, while
        its in-context groups agreed with the later checks."""
        references = self.references
        return statistics.median(e.median_s for e in references) if references else math.nan


def in_model_factor(entries: ModelEntries) -> float | None:
    """How much longer the model's blocks take inside the whole model than timed alone: the whole model minus its
    stem and head, over the sum of its blocks' originals (a model without a stem and head entry -- one dsprof
    cannot split -- counts them as 0: an upper bound); None where the LUT lacks the whole model or a block (or it
    is not positive). The whole model is `ModelEntries.whole_s`, the reference the scaled methods start from. The
    intervals' systematic term (`dsprof.lut.interval`) and the ``in-model`` method read it."""
    if entries.whole is None or any(o is None for o in entries.originals):
        return None
    blocks = sum(o.median_s for o in entries.originals)
    outside = entries.stem.median_s + entries.head.median_s if entries.stem and entries.head else 0.0
    inside = entries.whole_s - outside
    return inside / blocks if blocks > 0 and inside > 0 else None


def merge_pays(merged: LUTEntry | None, unmerged: LUTEntry | None) -> bool | None:
    """The one merge rule for a lone linearised block: True where its merged entry is below its unmerged one
    (the block left unmerged as deployed: ``linear``, else ``original``), False where not, None where the LUT lacks
    either -- a miss, which `PlanCosts.with_merges` names (or, in a partial prediction, counts as merged)."""
    if merged is None or unmerged is None:
        return None
    return merged.median_s < unmerged.median_s


def _deploys_alike(block: Block) -> bool:
    from ..merge.block import deploys_alike  # local: dsprof.lut stays importable without the merge package

    return deploys_alike(block)


def piece_name(blocks: list[Block], start: int, stop: int) -> str:
    """The name blocks start..stop-1 go by inside the model (their in-model workload, `context_workload`): a block's
    module name, or a span's (`span_piece`)."""
    if stop - start == 1:
        return blocks[start].name
    return span_piece(blocks[start].name, blocks[stop - 1].name)


def span_key(blocks: list[Block], start: int, stop: int) -> str:
    """The LUT workload of the one convolution that blocks start..stop-1 merge into (its ``conv`` spec)."""
    from ..merge.spans import span_spec  # local: the merge package imports this one's LUT types

    return span_spec([b.spec for b in blocks[start:stop]]).to_str()


@dataclass(frozen=True)
class Piece:
    """One block, or one span of blocks, as a plan deploys it, priced. ``latency_s`` is its LUT entry,
    ``saving_s`` how much it lowers the model's predicted latency under the method (0 for a kept block;
    NaN when an entry is missing, named by ``missing``), ``errors_s`` the median errors it adds to the
    interval."""

    start: int
    stop: int
    variant: str  # original, merged, linear, span (or the variant asked for every block)
    latency_s: float
    saving_s: float
    errors_s: tuple[float, ...] = ()
    missing: str | None = None
    noisy: bool = False
    in_model: bool = False  # its saving was measured inside the running model (`PlanCosts.in_model_saving`)

    @property
    def found(self) -> bool:
        return self.missing is None


@dataclass(frozen=True)
class PlanCosts:
    """Prices any plan of one model in one LUT context under one method (see the module docstring): a
    plan's `total_s` is the original model's minus the sum of its pieces' ``saving_s``."""

    label: str
    key: DeviceContext
    blocks: list[Block]
    lookup: Lookup
    entries: ModelEntries
    method: str  # what is used: isolated, context, context-scaled or in-model
    used: str  # as shown: isolated, context, context-scaled (xF), in-model (xF)
    rest_method: str
    rest_s: float  # isolated: the part outside the blocks (stem+head, or whole model minus blocks)
    reference_s: float  # context methods: the whole model's median (0 under isolated)
    factor: float  # what the isolated savings count with: context-scaled's or in-model's factor (1 otherwise)
    context_factor: float | None  # that factor where the LUT has it, whatever the method
    base_errors: tuple[float, ...]
    missing: tuple[str, ...]  # what the model (not a piece) lacks
    identity: tuple[str, dict] | None = None  # (registered name, options) of the model, to check plans against
    measure_flags: str = ""  # the `dsprof measure` options that build this model, for messages
    # in-model: the pieces timed inside the model (`dsprof measure --calibrate`), their scale and spread
    in_model: InModel | None = None
    # each piece read once: a planner or a benchmark prices thousands of plans from the same few pieces
    _pieces: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @classmethod
    def read(cls, lut: LUT, key: DeviceContext, label: str, blocks: list[Block], *, method: str,
             rest: str = "auto", variant: str | None = None, auto: bool = False) -> "PlanCosts":
        """The costs of ``label``'s plans; ``method`` is isolated, context, context-scaled or in-model (resolved),
        ``rest`` auto, stem+head or model-minus-blocks. Where a scaled method cannot apply, isolated is used:
        asked for by name, ``used`` says why, with a `MethodFallbackWarning` (a method's fallback, not a LUT
        miss); chosen by ``auto``, silently (the LUT lacks what the method reads)."""
        lookup = Lookup.of(lut, key)
        entries = ModelEntries.read(lookup, label, blocks)
        missing: list[str] = []
        factor = _context_factor(blocks, entries, lookup) if variant is None else None
        common = dict(label=label, key=key, blocks=blocks, lookup=lookup, entries=entries, context_factor=factor)
        if method == "context":
            if variant is not None:
                raise UsageError("the context method predicts plans; give a plan, not a variant for every block")
            references = entries.references
            if not references:
                missing.append(f"a whole-model or in-context entry of {label}")
                return cls(**common, method="context", used="context", rest_method="whole-model", rest_s=0.0,
                           reference_s=0.0, factor=1.0, base_errors=(), missing=tuple(missing))
            # the median of several entries: about one entry's error over the square root of their count
            error = entry_error_s(references[0]) / math.sqrt(len(references))
            return cls(**common, method="context", used="context", rest_method="whole-model", rest_s=0.0,
                       reference_s=entries.whole_s, factor=1.0,
                       base_errors=(error,), missing=tuple(missing))
        rest_s, rest_method, base_errors = _rest(entries, rest, missing)
        used = "isolated"
        if method in ("context-scaled", "in-model"):
            phi = in_model_factor(entries)
            scale = factor if method == "context-scaled" else (None if phi is None else (1 + phi) / 2)
            reference = entries.whole_s
            in_model = None
            if method == "in-model" and reference > 0:
                in_model = InModel.estimate(timed_pieces(
                    lookup, label, blocks, entries.originals, reference, lambda a, b: span_key(blocks, a, b),
                    lambda a, b: piece_name(blocks, a, b)), reference)
            if in_model is not None:
                costs = cls(**common, method=method, used=f"in-model (x{in_model.scale:.3f}, {len(in_model.timed)} "
                            "pieces timed in the model)", rest_method=rest_method, rest_s=rest_s, reference_s=reference,
                            factor=in_model.scale, base_errors=tuple(base_errors), missing=tuple(missing),
                            in_model=in_model)
                calibration = calibration_of(costs)  # how the pieces' savings combine in the whole model, if timed
                if calibration.rho > 0:
                    costs = replace(costs, in_model=replace(in_model, combined=calibration.rho,
                                                            combined_se=calibration.rho_se,
                                                            combined_source=calibration.source))
                return costs
            why_not = _why_not_scaled(method, scale, rest_method, label)
            if why_not is None:
                return cls(**common, method=method, used=f"{method} (x{scale:.3f})", rest_method=rest_method,
                           rest_s=rest_s, reference_s=reference, factor=scale, base_errors=tuple(base_errors),
                           missing=tuple(missing))
            if not auto:  # auto on a LUT without what its method reads: plain isolated (nothing fell back)
                used = f"isolated ({method} fell back: {why_not})"
                warnings.warn(f"{label}: {used}", MethodFallbackWarning, stacklevel=4)
        return cls(**common, method="isolated", used=used, rest_method=rest_method, rest_s=rest_s,
                   reference_s=0.0, factor=1.0, base_errors=tuple(base_errors), missing=tuple(missing))

    @property
    def in_model_factor(self) -> float | None:
        """`in_model_factor` of this model's entries (None where the LUT lacks one of them)."""
        return in_model_factor(self.entries)

    @cached_property
    def measured_utc(self) -> str:
        """When the LUT context's last group was timed (`LUT.measured_utc`), read once."""
        return self.lookup.lut.measured_utc(self.key)

    @cached_property
    def terms(self) -> Terms:
        """The parts of every plan's interval that belong to the model, not to a plan (`dsprof.lut.interval.terms_of`):
        worked out once per costs, not for each plan the planner prices (they price the calibration plan too)."""
        return terms_of(self)

    # -- pieces ------------------------------------------------------------------------------------
    def kept(self, i: int) -> Piece:
        """Block ``i`` with its activations."""
        key = ("kept", i)
        if key not in self._pieces:
            original = self.entries.originals[i]
            self._pieces[key] = self._piece(i, i + 1, "original", original,
                                            f"block {self.blocks[i].spec.to_str()} [original]")
        return self._pieces[key]

    def unmerged(self, i: int, border: str = "in_front") -> tuple[str, LUTEntry | None]:
        """(variant, entry) of block ``i`` linearised and left unmerged, as a plan with this ``border`` deploys it:
        its ``linear`` entry where the LUT has one and it was timed in that form (the profiler times the
        padding-in-front form, `dsprof.profiler.workloads.deployed_linear`; under ``in_place`` it covers the
        blocks that run alike either way, `dsprof.merge.block.deploys_alike`), else its ``original`` (what removing
        activations alone changes is seldom measurable)."""
        linear = self.lookup(self.blocks[i].spec.to_str(), "linear")
        if linear is not None and (border == "in_front" or _deploys_alike(self.blocks[i])):
            return "linear", linear
        return "original", self.entries.originals[i]

    def merges(self, i: int, border: str = "in_front") -> bool | None:
        """Whether block ``i``, linearised alone, merges by the one rule (`merge_pays`); None where the LUT lacks
        its ``merged`` or unmerged entry."""
        key = ("merges", i, border)
        if key not in self._pieces:
            self._pieces[key] = merge_pays(self.lookup(self.blocks[i].spec.to_str(), "merged"),
                                           self.unmerged(i, border)[1])
        return self._pieces[key]

    def linearized(self, i: int, merge: bool | None = None, border: str = "in_front") -> Piece:
        """Block ``i`` without activations, alone: merged or not as ``merge`` says, or (None) as `merges` decides
        (where the LUT cannot decide, counted as merged: the miss is named by the piece or by `with_merges`)."""
        if merge is None:
            merge = self.merges(i, border) is not False
        key = ("linear", i, bool(merge), border)
        if key not in self._pieces:
            spec = self.blocks[i].spec.to_str()
            variant, entry = ("merged", self.lookup(spec, "merged")) if merge else self.unmerged(i, border)
            self._pieces[key] = self._piece(i, i + 1, variant, entry, f"block {spec} [{variant}]")
        return self._pieces[key]

    def with_merges(self, plan: Any, *, strict: bool = True) -> Any:
        """``plan`` (a `dsprof.merge.Plan`, preset name or plan file) with its ``merge`` list: the one place that
        decides, from this LUT, which linearised blocks merge (`merges`: merged entry below unmerged; a span
        merges). A plan that has a list is returned as it is, once checked against the model (`check_plan`,
        one entry per block, a span's blocks marked merged). A block the LUT cannot decide raises
        `LUTMissError` naming the entry and the `dsprof measure` that times it; with ``strict=False`` it counts
        as merged (a partial prediction, which names the miss)."""
        from ..errors import PlanError
        from ..merge.plan import Plan, check_plan  # local: dsprof.lut stays importable without the merge package

        plan = Plan.coerce(plan)
        if self.identity is not None:  # one for another model (or other options) is refused, as merge refuses it
            plan = check_plan(plan, *self.identity)
        plan.check_blocks(len(self.blocks))
        in_span = {i for start, stop in plan.spans or () for i in range(start, stop)}
        if plan.merge is not None:
            unmarked = sorted(i for i in in_span if not plan.merge[i])
            if unmarked:
                raise PlanError(f"{plan.name or 'the plan'}'s merge list leaves blocks {unmarked} unmerged, but they "
                                "lie in its spans, which merge: mark them true (or drop the spans)")
            return plan
        merge, undecided = [], []
        for i, keep in enumerate(plan.keep):
            pays = True if i in in_span else (False if keep else self.merges(i, plan.border))
            if pays is None:
                undecided.append(i)
            merge.append(pays is not False)
        if undecided and strict:
            spec = self.blocks[undecided[0]].spec.to_str()
            more = f" (and {len(undecided) - 1} more blocks)" if len(undecided) > 1 else ""
            raise LUTMissError(
                f"the LUT {self.lookup.lut.source} lacks the merged or the unmerged entry (linear, else original) of "
                f"block {undecided[0]} ({spec}) of {self.label} on {self.key}{more}, so it cannot decide whether it "
                f"merges: run `{self.measure_command(1)}` and rebuild the LUT with `dsprof build-lut` (or decide by "
                "MACs: --merge-by macs)"
            )
        return plan.with_merge(merge)

    def measure_command(self, max_span: int = 1) -> str:
        """The `dsprof measure` command that times what the planner and `with_merges` read for this model in
        the LUT's context (spans of up to ``max_span`` blocks)."""
        key = self.key
        # the model's options as every message suggests them (`model_flags`, carried by `plan_costs`)
        parts = ["dsprof measure", self.measure_flags or f"--model {self.label.split('{', 1)[0]}"]
        parts += [f"--device {key.device}", f"--backend {key.backend}", f"--dtype {key.dtype}", f"--batch {key.batch}"]
        if key.threads:
            parts.append(f"--threads {key.threads}")
        if key.layout == "channels_last":
            parts.append("--channels-last")
        if key.compile and key.compile != "default":  # the torch-compile backend's mode, when not its default
            parts.append(f"--compile-mode {key.compile}")
        parts.append("--variants original,merged,linear")
        if max_span > 1:
            parts.append(f"--spans {max_span}")
        if self.method in ("context", "context-scaled") or self.context_factor is not None:  # in-model needs none
            parts.append("--context merged,linear")
        return " ".join(parts)

    def span(self, start: int, stop: int) -> Piece:
        """Blocks start..stop-1 merged into one convolution."""
        key = ("span", start, stop)
        if key not in self._pieces:
            workload = span_key(self.blocks, start, stop)
            self._pieces[key] = self._piece(start, stop, "span", self.lookup(workload, "merged"),
                                            f"span of blocks {format_span((start, stop))} {workload} [merged]")
        return self._pieces[key]

    def as_variant(self, i: int, variant: str) -> Piece:
        """Block ``i`` as ``variant`` (every block one variant, e.g. the paper's Tab. 1 ``flops_matched``)."""
        spec = self.blocks[i].spec.to_str()
        return self._piece(i, i + 1, variant, self.lookup(spec, variant), f"block {spec} [{variant}]")

    def pieces(self, plan: Any) -> list[Piece]:
        """The pieces a plan (a `dsprof.merge.Plan`, or None for the original model) deploys, in block order."""
        if plan is None:
            return [self.kept(i) for i in range(len(self.blocks))]
        spans = {start: stop for start, stop in plan.spans or ()}
        out, i = [], 0
        while i < len(self.blocks):
            if i in spans:
                out.append(self.span(i, spans[i]))
                i = spans[i]
                continue
            merge = None if plan.merge is None else plan.merge[i]
            out.append(self.kept(i) if plan.keep[i] else self.linearized(i, merge, plan.border))
            i += 1
        return out

    def _piece(self, start: int, stop: int, variant: str, entry: LUTEntry | None, name: str) -> Piece:
        if entry is None:
            return Piece(start, stop, variant, math.nan, math.nan, missing=name)
        originals = self.entries.originals[start:stop]
        if variant == "original" and stop - start == 1:  # kept: saves nothing
            errors = (entry_error_s(entry),) if self.rest_method == "stem+head" else ()
            return Piece(start, stop, variant, entry.median_s, 0.0, errors, None, entry.noisy)
        if self.method == "context":
            saving, errors, missing = self._in_context(start, stop, variant, name)
            return Piece(start, stop, variant, entry.median_s, saving, errors, missing, entry.noisy)
        found = all(o is not None for o in originals)
        alone = sum(o.median_s for o in originals) - entry.median_s if found else math.nan
        if self.in_model is not None and found:
            kind = "span" if stop - start > 1 else variant
            saving, se, timed = self.in_model.price(start, stop, kind, alone)
            scale = saving / alone if alone else self.in_model.combined * self.factor
            errors = (se, *(scale * e for e in self._alone_errors(originals, entry)))
            return Piece(start, stop, variant, entry.median_s, saving, errors, None, entry.noisy, timed)
        saving = self.factor * alone
        if self.rest_method == "stem+head":
            errors = (entry_error_s(entry),)
        elif self.rest_method == "model-minus-blocks":
            errors = ((saving_error_s(originals[0], entry),) if stop - start == 1
                      else tuple(entry_error_s(o) for o in originals) + (entry_error_s(entry),))
        else:
            errors = ()
        return Piece(start, stop, variant, entry.median_s, saving, errors, None, entry.noisy)

    def piece_name(self, start: int, stop: int) -> str:
        """The name blocks start..stop-1 go by inside the model (`piece_name`)."""
        return piece_name(self.blocks, start, stop)

    def _alone_errors(self, originals: list[LUTEntry], entry: LUTEntry) -> tuple[float, ...]:
        """The standard errors of a saving alone: of the paired ratio (a block), or of every median (a span)."""
        if len(originals) == 1:
            return (saving_error_s(originals[0], entry),)
        return tuple(entry_error_s(o) for o in originals) + (entry_error_s(entry),)

    def _in_context(self, start: int, stop: int, variant: str, name: str) -> tuple[float, tuple[float, ...], str | None]:
        """(saving, errors, miss) of block ``start`` as ``variant`` measured inside the running model, relative to
        the model timed in the same rounds and scaled to the reference: a group that ran in a slow moment of the
        machine inflates neither."""
        if stop - start > 1:
            return math.nan, (), f"{name}: in-context entries cover blocks, not spans (plan spans with another method)"
        block = self.blocks[start].name
        base = self.entries.in_model.get(block)
        swap = self.lookup(context_workload(self.label, block), variant, "context")
        if base is None or swap is None:
            return math.nan, (), f"context {context_workload(self.label, block)} [original/{variant}]"
        scale = self.reference_s / base.median_s
        errors = (saving_error_s(base, swap) * scale,)
        return self.reference_s * (1 - swap.median_s / base.median_s), errors, None

    # -- totals ------------------------------------------------------------------------------------
    def total_s(self, pieces: list[Piece]) -> float:
        """A plan's predicted latency (seconds per batch); a missing piece is left out (isolated) or counted as
        the original blocks (context methods)."""
        if self.method == "isolated":
            return self.rest_s + sum(p.latency_s for p in pieces if p.latency_s == p.latency_s)
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


def _context_factor(blocks: list[Block], entries: ModelEntries, lookup: Lookup) -> float | None:
    """Sum of the blocks' in-context savings (merged) over the sum of their isolated savings, or None
    without in-context entries or when the two sums disagree in sign (the in-context differences are
    not comparable: TFLite on a CPU, isolated -0.04 ms against +23 % in context, gave -34). Each in-context saving is
    relative to the model timed in its group."""
    in_context, alone = 0.0, 0.0
    for block, original in zip(blocks, entries.originals):
        base = entries.in_model.get(block.name)
        swap = lookup(context_workload(entries.label, block.name), "merged", "context")
        merged = lookup(block.spec.to_str(), "merged")
        if base is None or swap is None or merged is None or original is None:
            continue
        in_context += 1 - swap.median_s / base.median_s
        alone += (original.median_s - merged.median_s)
    if alone == 0.0 or in_context == 0.0:
        return None
    whole_ref = statistics.median(e.median_s for e in entries.in_model.values() if e is not None)
    factor = in_context * whole_ref / alone
    return factor if factor > 0 else None


class MethodFallbackWarning(UserWarning):
    """A prediction used another method than the one asked for (said in `Prediction.method` too)."""


def _why_not_scaled(method: str, factor: float | None, rest_method: str, label: str) -> str | None:
    """Why a scaled method (``context-scaled``, ``in-model``) cannot predict here (None: it can): both start from
    the whole model with every block, and need their factor."""
    if rest_method != "model-minus-blocks":
        return f"the LUT lacks {label}'s whole-model entry or one of its blocks' originals"
    if factor is not None:
        return None
    if method == "in-model":
        return f"{label}'s whole model measured shorter than its stem and head (measure again on a quiet machine)"
    return (f"the LUT lacks in-context entries (merged) of {label}'s blocks whose savings agree in sign with "
            "the isolated ones (`dsprof measure --context merged`)")
