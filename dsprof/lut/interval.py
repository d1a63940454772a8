"""Every part of a prediction's 95 % interval, in one place (issue #27).

A prediction prices a plan as T = R (1 - u): R is the original model's predicted latency and u the share of it
that the plan's pieces save (their savings times the method's factor, over R). Its speed-up over the original
is S = R / T = 1 / (1 - u), so an error du in u moves ln S by S du, and ln T by -S du. Both intervals are
log-symmetric, 95 %, built from these parts (each a relative standard deviation):

* **u's error**: the standard error of each saving the plan adds up, from its paired ratio (`saving_error_s`:
  the merged block over the original in one group, per group and run) or the medians' errors (`median_error`),
  the machine's drift between the groups the savings and R were timed in (`Terms.drift` times each saving),
  and the **systematic** error of the factor (`Terms.factor`): blocks timed alone add up to less (or more) than
  the whole model measured, by the *in-model factor* phi = (whole model - stem - head) / sum of the blocks
  alone. A block's saving inside the model lies between its saving alone (what the model spends beyond its
  blocks does not depend on them) and phi times it (it grows with their time): the truth is taken as uniform
  on [1, phi], so a method that counts the savings with factor F is off by sqrt((phi - 1)^2 / 12 +
  (F - (1 + phi) / 2)^2) / F of u (the ``in-model`` method takes the middle). Some runtimes break that range:
  merged blocks saved 0.3-1.0 of their savings alone inside an ONNX Runtime session (benchmarks/RESULTS.md, issue
  #27). Where the LUT holds the **calibration group** (`dsprof measure --calibrate`, `dsprof.workflows.calibrate`:
  the whole model with every block linearised and merged by the LUT's rule, timed paired against the original),
  its measured saving over the one the method predicts for that plan, rho (shrunk toward 1 by its own error:
  `dsprof.lut.inmodel`'s rule), is a third point: the truth is taken as uniform on the range of 1, phi and rho F
  (in savings alone). Where rho says nothing -- its plan is predicted
  to save under `MIN_CALIBRATION_SAVING` (too little, or a loss: a ratio of two losses scales no saving), or it
  measured a loss where a saving was predicted -- the calibration
  group still measured how far a whole plan lands from the sum of its pieces, in the model's own units: the
  **gap** g (its measured saving less the predicted one, a share of the model). A plan that linearises a share f
  of the blocks is then taken to interact by between 0 and f g (uniform; `Terms.interaction` = |g| / sqrt(3), the
  standard deviation of that error at f = 1, around either end), added to u's error beside the factor's. The
  in-model prices count f g (`dsprof.lut.inmodel`, "rho says nothing"), so the range runs from the price back to
  the pieces' sum; the other methods price the pieces' sum, and it runs from the price to f g. Issue #36's held-out runs
  showed why: through ONNX Runtime, spnasnet_100's calibration plan was predicted to save 0.8 % and measured 2.1 %
  slower, and every plan that linearised most blocks ran 2-3 % slower than predicted. Estimated from the LUT's
  runs, never from a later check.
* **how each piece meets its neighbours** (`PIECE_INTERACTION`, part of u's systematic error): a piece deployed
  changes what runs around it (its neighbours' inputs, the memory they share), and by how much depends on which other
  pieces the plan deploys. The pieces timed alone inside the model do not see it, and the calibration group measures
  one plan's combination only, so the LUT cannot estimate it: each piece that changes the model adds an independent
  error of `PIECE_INTERACTION` of the model (1 sd), a plan of m such pieces sqrt(m) times it. Issue #46: with the
  warm-up in rounds the LUT's own terms narrowed to +-2-3 %, and 12 % of 144 plans on four held-out models at 96 px
  (pvrW) lay outside them, by errors of 1-6 % that no term above predicted (EfficientNet-Lite2's random plans on ONNX
  Runtime over-predicted by 4-6 %, SelecSLS-42's on PyTorch eager scattered by 1.9 %). Its size is the maximum
  likelihood fit on the design runs (pvr83-85: 180 plans, PyTorch eager and ONNX Runtime, 96 and 128 px): 0.4 %.
* **the check's noise** (speed-up; `Terms.check`): a later check is a group of two whole models timed round by
  round, in two sessions. The LUT's session pairs are such checks of the model against itself (their root mean
  square, widened to Student's t of that many pairs: `session_noise`, `_check`). The LUT's in-situ groups are such checks, of one block swapped each: the spread of
  their paired savings around the isolated ones says how far one check lands from what the LUT adds up (the
  rounds' noise, a session's offset, a block's surroundings). Without them, sqrt(2) times the error the whole
  model's median has in one of the LUT's groups (a median's standard error: sigma over the square root of n).
  The calibration group is a check of two whole models too: its paired ratio's standard error (the rounds'
  noise one later check carries) adds to it.
* **the machine's drift** (latency; `Terms.drift`): a later measurement is one moment of a machine whose
  medians spread across groups and runs: sigma from the IQR of the whole model's medians (its own groups and
  every in-situ group, over every run), else of the drift probe's group medians. Never the spread of raw
  samples: the samples of one group share its moment. The original's latency, a median over G groups, carries
  1.2533 sigma / sqrt(G) of it too (a median's standard error).

Every interval here comes back as a `dsprof.records.stats.Estimate` (a value with its interval, the one such type),
inside `Bounds` for a plan (`plan_bounds`) and alone for the ratio of two plans' latencies (`ratio_bounds`); `Z95` is
the one 95 % normal quantile.

The drift probe's ratio (`probe_ratio`; `dsprof.lut.predict.with_probe` applies it) is here too: it moves the
milliseconds, never the speed-up (a ratio of two latencies of one moment). `IQR_TO_SD` is the one conversion of a
robust spread to a standard deviation.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

from scipy.special import stdtrit  # Student's t quantile; scipy.stats' t.ppf is the same, with a second's import

from ..device_context import DeviceContext
from ..records.measurement import PROBE_NAME, PROBE_SCOPE
from ..records.stats import Estimate, summarize
from .inmodel import InModel, shrink
from .piece import Piece, linearised
from .table import LUT, LUTEntry, LUTMissError


__all__ = ["IQR_TO_SD", "MEDIAN_SE", "PIECE_INTERACTION", "TOO_WIDE", "WIDE_WHY", "Z95", "Bounds", "Calibration", "Estimate", "Estimated", "IntervalInputs", "Terms",
           "calibration_of", "entry_error_s", "lut_probe", "median_error", "plan_bounds", "probe_ratio",
           "ratio_bounds", "relative_spread", "saving_error_s", "session_noise", "terms_of"]

Z95 = 1.959964  # two-sided 95 % normal quantile
#: An interval whose high end is more than this many times its low end says nothing a deployment can act on (a plan
#: of 1.2x within 0.8-1.8x could be slower or much faster): the front and a prediction say so in one line
#: (`Estimated.too_wide`, `WIDE_WHY`).
TOO_WIDE = 2.0
#: Why an interval is that wide, and what narrows it: said by the front and by a prediction alike.
WIDE_WHY = ("The LUT's medians scatter, or its pieces timed inside the model disagree with them; a plan's prediction "
            "names which part widens it. Measured again on a quiet machine, with a longer budget, they narrow")
#: The one conversion from an interquartile range to a standard deviation (a normal distribution's IQR is
#: 1.349 sigma): every spread here is an IQR.
IQR_TO_SD = 1 / 1.349
#: sqrt(pi / 2): the standard error of the median of n normal values is this many sigmas over sqrt(n).
MEDIAN_SE = 1.2533
#: Spreads of fewer medians than this are not estimated (an IQR of two values says little) ...
MIN_GROUPS = 3
#: ... and the whole model's own medians are preferred to the drift probe's from this many groups on.
ENOUGH_GROUPS = 5
#: A calibration plan predicted to save less than this share of the model (or to lose) says nothing of how savings
#: add up.
MIN_CALIBRATION_SAVING = 0.02
#: Fewer session pairs than this say nothing of a check's noise (`session_noise`).
MIN_SESSION_PAIRS = 3
#: How far one piece a plan deploys lands from its price for the pieces deployed beside it, a share of the whole
#: model (1 sd, independent per piece; see the module docstring): fitted on issue #46's design runs, not by the LUT.
PIECE_INTERACTION = 0.004


def median_error(iqr: float, n: int) -> float:
    """Standard error of the median of ``n`` values with interquartile range ``iqr`` (same unit):
    1.2533 sigma / sqrt(n), sigma from the IQR."""
    return MEDIAN_SE * iqr * IQR_TO_SD / math.sqrt(n)


def entry_error_s(entry: LUTEntry) -> float:
    """Standard error (seconds) of a LUT entry's median, from its pooled samples."""
    return median_error(entry.iqr_s, entry.n_samples)


def saving_error_s(original: LUTEntry, variant: LUTEntry) -> float:
    """Standard error (seconds) of a saving ``original - variant`` timed in one group: from their paired ratio
    (`LUTEntry.ratio_se`: per-round ratios within each group, the spread across groups and runs) where the LUT
    has it, which the moves they share do not reach; else from both medians' errors."""
    if variant.ratio_se == variant.ratio_se:
        return original.median_s * variant.ratio_se
    return math.hypot(entry_error_s(original), entry_error_s(variant))


def _paired_sessions(sessions: Sequence[LUTEntry]) -> list[LUTEntry]:
    """The session pairs' second sessions that carry a paired ratio and its standard error: what `session_noise`
    reads, one degree of freedom each."""
    return [e for e in sessions if e.ratio == e.ratio and e.ratio_se == e.ratio_se]


def session_noise(sessions: Sequence[LUTEntry]) -> tuple[float, float]:
    """(a check's noise, the sessions' part of it), relative sigmas, from the session pairs' second sessions
    (`dsprof.records.measurement.SESSION_AGAIN`: the whole model twice in one group, so their paired ratio is 1 but
    for the noise): the root mean square of their ratios' distance from 1, and of that what their rounds' noise
    (each ratio's standard error) does not explain, at least 0. (NaN, NaN) from fewer than `MIN_SESSION_PAIRS`."""
    paired = _paired_sessions(sessions)
    if len(paired) < MIN_SESSION_PAIRS:
        return math.nan, math.nan
    check = math.sqrt(statistics.fmean((1 - e.ratio) ** 2 for e in paired))
    rounds = statistics.fmean(e.ratio_se ** 2 for e in paired)
    return check, math.sqrt(max(0.0, check ** 2 - rounds))


def relative_spread(values: Sequence[float]) -> float:
    """Relative standard deviation of ``values`` (medians), sigma from their IQR; 0 for fewer than `MIN_GROUPS`."""
    if len(values) < MIN_GROUPS:
        return 0.0
    stats = summarize(values)
    return stats.iqr * IQR_TO_SD / stats.median


@dataclass(frozen=True)
class IntervalInputs:
    """What the intervals of one model's plans are estimated from, in one LUT context under one method: LUT entries
    and numbers, gathered once by `dsprof.lut.inputs.interval_inputs`.

    ``references``: the whole model's medians the drift and the check read (its own entry and every in-situ
    group's); ``whole``: its own entry; ``stem_and_head``: whether the LUT has both; ``method``, ``rest_method``,
    ``factor`` (what the isolated savings count with), ``in_model_factor`` and ``in_model`` (the pieces timed in the
    model) as the prices use them; ``base_errors``: the errors (seconds) of the entries the original's prediction
    starts from; ``probe``: the drift probe's entry; ``calibration``: the calibration group's entry and
    ``calibration_share`` the share of the model the method predicts its plan saves (NaN where an entry of that plan
    is missing); ``in_situ``: each block's in-situ group and swapped entry with the saving timed alone of the
    same variant (seconds), and ``reference_s`` the whole model they are relative to; ``calibration_plan``: the
    calibration group's plan as its record names it (`dsprof.records.measurement.calibration_name`; "" for every
    block linearised alone); ``sessions``: the session pairs' second sessions (`session_noise`)."""

    references: tuple[LUTEntry, ...]
    whole: LUTEntry | None
    stem_and_head: bool
    method: str
    rest_method: str
    factor: float
    in_model_factor: float | None
    in_model: InModel | None
    base_errors: tuple[float, ...]
    probe: LUTEntry | None
    calibration: LUTEntry | None
    calibration_share: float
    in_situ: tuple[tuple[LUTEntry, LUTEntry, float], ...]
    reference_s: float
    calibration_plan: str = ""  # the calibration group's plan where its record names one (``spans 0-1 3-4``)
    sessions: tuple[LUTEntry, ...] = ()  # the session pairs' second sessions (`session_noise`)
    process_spread: float = 0.0  # the runtime's spread from process to process (`dsprof.runtimes.BackendEntry`)
    calibration_costs: float = 0.0  # of ``calibration_share``, its in-model pieces that cost time (<= 0)


@dataclass(frozen=True)
class Terms:
    """The parts of an interval that belong to the model in one LUT context, not to one plan (relative
    standard deviations): ``drift`` of the machine between groups and runs, ``check`` the noise of a paired
    check of two whole models, ``factor`` the systematic error of the method's factor relative to it (see the
    module docstring), each with what it was estimated from."""

    drift: float
    drift_source: str
    check: float
    check_source: str
    factor: float
    factor_source: str
    reference_groups: int = 1  # how many groups the original's predicted latency is a median of
    base_errors: tuple[float, ...] = ()  # the errors (seconds) of the entries the original's prediction starts from
    interaction: float = 0.0  # the gap's error, a share of the model, for a plan that linearises every block
    in_model: InModel | None = None  # how an in-model plan's pieces combine (`InModel.together_error_s`)

    @property
    def systematic_source(self) -> str:
        """Where the systematic part of a plan's interval comes from: the factor's source, and each piece's meeting
        with its neighbours (`PIECE_INTERACTION`)."""
        return (f"{self.factor_source}; each piece a plan deploys +-{PIECE_INTERACTION:.1%} of the model (1 sd) for "
                "how it meets the pieces beside it")


def terms_of(inputs: IntervalInputs) -> Terms:
    """The model-level `Terms` of one model in one LUT context under one method."""
    drift, drift_source = _drift(inputs)
    check, check_source, direct = _check(inputs)
    whole = inputs.whole
    groups = (sum(e.groups for e in inputs.references) if inputs.method != "isolated"
              else whole.groups if whole is not None and inputs.rest_method == "model-minus-blocks" else 1)
    phi = inputs.in_model_factor
    used = inputs.factor
    calibration = calibration_of(inputs)
    if calibration.se == calibration.se and not direct:  # a session pair's ratio holds its rounds' noise already
        check = math.hypot(check, calibration.se)
        check_source += f" and the calibration check's rounds (s.e. {calibration.se:.1%})"
    if inputs.process_spread > 0:  # the LUT's checks ran in its one process; a later check runs in another
        check = math.hypot(check, inputs.process_spread)
        check_source += f" and the runtime's spread from process to process (s.d. {inputs.process_spread:.1%})"
    if inputs.in_model is not None:  # the scale is paired (`dsprof.lut.inmodel`): how the pieces combine is left
        im = inputs.in_model
        interaction, gap_source = _interaction(calibration, priced=im.gap_s != 0) if im.combined == 1.0 else (0.0, "")
        if im.combined != 1.0:
            # a plan's pieces combine between not at all (x1) and as the calibration plan's did (rho), each plan by
            # its share of the calibration plan (`plan_bounds` asks `InModel.together_error_s`); the relative error
            # here is the calibration plan's own, which `ratio_bounds` reads
            low, high = min(1.0, im.combined), max(1.0, im.combined)
            factor = im.combined_error
            source = f"{im.describe()}: a plan's pieces combine between x{low:.3f} and x{high:.3f} of their sum"
        else:  # no calibration group, or one that says nothing of rho: the scale's error (and the gap's)
            factor = im.scale_se
            source = f"{im.describe()}; {gap_source or calibration.source or 'no calibration group'}"
        return Terms(drift, drift_source, check, check_source, factor, source, max(groups, 1), inputs.base_errors,
                     interaction, im)
    points = [1.0] + ([phi] if phi is not None else []) + ([calibration.rho * used] if calibration.rho == calibration.rho else [])
    interaction, gap_source = _interaction(calibration)
    if len(points) < 2:
        return Terms(drift, drift_source, check, check_source, 0.0,
                     gap_source or "not estimated (the LUT lacks the whole model or one of its blocks, and a "
                     "calibration group)", max(groups, 1), inputs.base_errors, interaction)
    low, high = min(points), max(points)
    factor = math.sqrt((high - low) ** 2 / 12 + (used - (low + high) / 2) ** 2) / used
    parts = "" if inputs.stem_and_head else " (no stem and head entries: counted as 0)"
    source = "; ".join(filter(None, [f"in-model factor {phi:.3f}{parts}" if phi is not None else "",
                                     calibration.source if not gap_source else ""]))
    source += f": savings inside the model between x{low:.3f} and x{high:.3f} of alone"
    source += f"; {gap_source}" if gap_source else ""
    return Terms(drift, drift_source, check, check_source, factor, source, max(groups, 1), inputs.base_errors,
                 interaction)


@dataclass(frozen=True)
class Calibration:
    """What the LUT's calibration group says (`dsprof.workflows.calibrate`): ``rho``, the saving it measured over
    the saving the method predicts for its plan, shrunk toward 1 by its own error (`dsprof.lut.inmodel.shrink`, the
    one rule; NaN where it says nothing), ``se`` the relative standard error of its paired ratio (NaN without one),
    and ``source``: where rho came from, or why there is none."""

    rho: float
    se: float
    source: str
    rho_se: float = math.nan  # rho's relative standard error (shrunk; else its ratio's error over the measured saving)
    gap: float = math.nan  # its measured saving less the predicted one, a share of the model (NaN: not timed)
    fitted: float = math.nan  # rho as measured, before shrinking toward 1 (`dsprof.lut.inmodel.shrink`)


def calibration_of(inputs: IntervalInputs) -> Calibration:
    """The `Calibration` of one model in one LUT context."""
    nan = math.nan
    entry = inputs.calibration
    if entry is None or not entry.ratio == entry.ratio:
        return Calibration(nan, nan, "")
    se = entry.ratio_se / entry.ratio
    if not inputs.calibration_share == inputs.calibration_share:
        return Calibration(nan, se, "calibration not used (the LUT lacks an entry of its plan)")
    predicted, measured = inputs.calibration_share, 1 - entry.ratio
    costs = inputs.calibration_costs  # rho scales savings, not the in-model pieces that cost (`dsprof.lut.inmodel`)
    plan = f" ({inputs.calibration_plan})" if inputs.calibration_plan else ""
    apart = f", of which its pieces that cost time {costs:.1%} (priced apart)" if costs < 0 else ""
    said = f"calibration{plan} saved {measured:.1%} where {predicted:.1%} was predicted{apart}"
    if predicted < MIN_CALIBRATION_SAVING:  # too little, or a loss: no saving to scale
        return Calibration(nan, se, f"{said} (too little to scale by)", gap=measured - predicted)
    fitted = (measured - costs) / (predicted - costs)
    rho_se = entry.ratio_se / abs(measured - costs) if measured != costs else math.nan  # relative
    if not fitted > 0:  # a loss where a saving was predicted: nothing to scale by (its gap widens the interval)
        return Calibration(fitted, se, f"{said} (x{fitted:.3f})", rho_se, gap=measured - predicted, fitted=fitted)
    rho, rho_abs_se = shrink(fitted, rho_se * fitted)
    shrunk = f", shrunk to x{rho:.3f} by its error" if f"{rho:.3f}" != f"{fitted:.3f}" else ""
    return Calibration(rho, se, f"{said} (x{fitted:.3f}{shrunk})", rho_abs_se / rho if rho_abs_se == rho_abs_se
                       else math.nan, gap=measured - predicted, fitted=fitted)


def _interaction(calibration: Calibration, priced: bool = False) -> tuple[float, str]:
    """Where the calibration group says nothing of rho (its plan predicted to save too little, or measured a loss
    against a predicted saving) but measured its gap: the gap's error at f = 1 (``|g| / sqrt(3)``: a uniform on
    [0, g] around either end, its pieces' sum or, where the in-model prices count the gap (``priced``,
    `dsprof.lut.inmodel.InModel.together`), f g) and where it came from; else (0, "")."""
    if calibration.rho > 0 or not calibration.gap == calibration.gap:
        return 0.0, ""
    g = calibration.gap
    where = (f"is priced f x {g:+.1%} of the model from its pieces' sum, and lands between that and their sum"
             if priced else f"lands between 0 and f x {g:+.1%} of the model from its price")
    return abs(g) / math.sqrt(3), f"{calibration.source}: a plan that linearises a share f of the blocks {where}"


def _drift(inputs: IntervalInputs) -> tuple[float, str]:
    """The machine's drift between groups and runs (relative sigma) and its source: the whole model's medians (its
    own entry and every in-situ group's: their spread, with each one's spread over its runs) where they come
    from at least `ENOUGH_GROUPS` groups, else the drift probe's group medians (one per group of every run), else
    whatever the model has."""
    references = inputs.references
    groups = sum(e.groups for e in references)
    runs = [e.group_iqr_s * IQR_TO_SD / e.median_s for e in references if e.groups >= MIN_GROUPS]
    model = math.hypot(relative_spread([e.median_s for e in references]), statistics.median(runs) if runs else 0.0)
    if groups >= ENOUGH_GROUPS and (len(references) >= MIN_GROUPS or runs):
        return model, f"the whole model's medians ({groups} groups)"
    probe = inputs.probe
    if probe is not None and probe.groups >= MIN_GROUPS:
        return probe.group_iqr_s * IQR_TO_SD / probe.median_s, f"the drift probe's medians ({probe.groups} groups)"
    if len(references) >= MIN_GROUPS or runs:
        return model, f"the whole model's medians ({groups} groups)"
    return 0.0, "nothing (fewer than 3 group medians of the model or the drift probe)"


def _check(inputs: IntervalInputs) -> tuple[float, str, bool]:
    """The noise (relative sigma) of a paired check: one group of two whole models, in two sessions, its source, and
    whether it was measured as such. Where the LUT timed session pairs and prices in-model pieces (whose own scatter
    the pieces' errors carry), the pairs are such checks of one model against itself (`session_noise`). Else, where
    the LUT timed the model's blocks in situ, each in-situ group is one, of one block swapped: the spread (IQR) of
    their savings (the swapped model over the whole one, paired per round) around the isolated savings the method
    counts -- the rounds' noise, what a session or a block's surroundings add. Else sqrt(2) times the error the
    whole model's median has in one of the LUT's groups."""
    pairs, _ = session_noise(inputs.sessions)
    if inputs.in_model is not None and pairs == pairs:
        # the pairs' root mean square is itself estimated from a few pairs (one degree of freedom each): the check's
        # 95 % interval is Student's t's, not the normal's (x1.25 for six pairs)
        widen = float(stdtrit(len(_paired_sessions(inputs.sessions)), 0.975)) / Z95
        return pairs * widen, f"{len(inputs.sessions)} session pairs (the whole model against itself)", True
    residuals = _in_situ_residuals(inputs)
    if len(residuals) >= ENOUGH_GROUPS:
        return summarize(residuals).iqr * IQR_TO_SD, f"{len(residuals)} in-situ groups", False
    references = inputs.references
    if not references:
        return 0.0, "nothing (no whole-model entry)", False
    one = statistics.median(median_error(e.iqr_s, max(1, e.n_samples // e.groups)) / e.median_s for e in references)
    return math.sqrt(2) * one, f"the whole model's medians in {len(references)} groups", False


def _in_situ_residuals(inputs: IntervalInputs) -> list[float]:
    """Each in-situ saving (relative to the whole model in its group, from the paired ratio where the LUT has
    it) minus the isolated saving of the same block and variant as the method counts it (relative)."""
    reference = inputs.reference_s or (inputs.whole.median_s if inputs.whole else 0.0)
    if not reference > 0:
        return []
    out = []
    for base, swap, alone_s in inputs.in_situ:
        ratio = swap.ratio if swap.ratio == swap.ratio else swap.median_s / base.median_s
        out.append((1 - ratio) - inputs.factor * alone_s / reference)
    return out


@dataclass(frozen=True)
class Bounds:
    """A plan's two 95 % intervals, each an `Estimate`: the speed-up over the original (``speedup``) and the latency
    (``latency``, seconds per batch); and their parts as relative 95 % half-widths: ``entries`` (the LUT medians),
    ``systematic`` (the factor), ``check`` and ``drift``."""

    speedup: Estimate
    latency: Estimate
    entries: float
    systematic: float
    check: float
    drift: float


class Estimated:
    """What a record of a plan's prediction reads flat (a mixin): its ``speedup_estimate`` and ``latency_estimate``
    (seconds per batch), each the `Estimate` `plan_bounds` built, as ``speedup``, ``speedup_low``, ``speedup_high``,
    ``latency_s``, ``low_s`` and ``high_s``: `dsprof.lut.Prediction`, `dsprof.lut.pricer.Price` and the front's
    points hold the one pair and show the same numbers."""

    speedup_estimate: Estimate
    latency_estimate: Estimate

    @property
    def speedup(self) -> float:
        """The predicted speed-up over the original."""
        return self.speedup_estimate.value

    @property
    def speedup_low(self) -> float:
        return self.speedup_estimate.low

    @property
    def too_wide(self) -> bool:
        """Whether the speed-up's 95 % interval spans more than a factor of `TOO_WIDE`: too wide to act on."""
        return self.speedup_high > TOO_WIDE * self.speedup_low

    @property
    def speedup_high(self) -> float:
        return self.speedup_estimate.high

    @property
    def latency_s(self) -> float:
        """The predicted latency, seconds per batch."""
        return self.latency_estimate.value

    @property
    def low_s(self) -> float:
        return self.latency_estimate.low

    @property
    def high_s(self) -> float:
        return self.latency_estimate.high


def plan_bounds(pieces: list[Piece], total_s: float, original_s: float, terms: Terms) -> Bounds:
    """The intervals of a plan deployed as ``pieces`` (predicted ``total_s``; the original ``original_s``) from its
    LUT entries' errors and the model's ``terms`` (see the module docstring): the one place a plan's speed-up and
    latency get their intervals (`dsprof.lut.predict_plan` calls it; the front, `predict`, the cross table, the
    joint plan and the report read what it built)."""
    if not (total_s > 0 and original_s > 0):
        nan = math.nan
        return Bounds(Estimate.unknown(), Estimate.unknown(), nan, nan, nan, nan)
    speedup = original_s / total_s
    u = 1 - total_s / original_s
    saving_var, reference_var = 0.0, 0.0
    changed, blocks = linearised(pieces)  # its share of the calibration plan: the gap's f, the pairs' m / n
    deployed = sum(1 for p in pieces if p.changes)
    for p in pieces:
        errors = sum(e * e for e in p.errors_s)
        if p.saving_s == 0.0:  # a kept block: its errors are the original's
            reference_var += errors
        elif p.saving_s == p.saving_s:  # each saving counts as `InModel.together` counts it, and so do its errors
            saving_var += (errors + (p.saving_s * terms.drift) ** 2) * p.weight ** 2
    # the original's latency: its entries' errors, and the drift that its groups' median still carries (the
    # standard error of a median of G: `median_error` with sigma the drift)
    drift_of_median = MEDIAN_SE * terms.drift / math.sqrt(terms.reference_groups)
    reference_var += sum(e * e for e in terms.base_errors) + (original_s * drift_of_median) ** 2
    entries = math.sqrt(saving_var / original_s ** 2 + u * u * reference_var / original_s ** 2)  # of u
    if terms.in_model is not None:  # in-model pieces: the scale's error, and how the plan's pieces combine
        own = terms.in_model.together_error_s(pieces) / original_s
    else:
        own = abs(u) * terms.factor
    systematic = math.hypot(own, terms.interaction * changed / blocks if blocks else 0.0,
                            PIECE_INTERACTION * math.sqrt(deployed))
    sigma_u = math.hypot(entries, systematic)
    ln_s = math.hypot(speedup * sigma_u, terms.check)
    ln_t = math.sqrt((speedup * sigma_u) ** 2 + reference_var / original_s ** 2 + terms.drift ** 2)
    return Bounds(_log_normal(speedup, ln_s), _log_normal(total_s, ln_t),
                  Z95 * speedup * entries, Z95 * speedup * systematic, Z95 * terms.check, Z95 * terms.drift)


def _log_normal(value: float, ln_sigma: float) -> Estimate:
    """``value`` with its 95 % interval for a relative error ``ln_sigma`` on the log scale; an error too large to
    exponentiate (entries with absurd spreads, e.g. from a hand-edited file) gives the interval (0, inf), not an
    overflow."""
    width = Z95 * ln_sigma
    if width > 700:  # math.exp overflows past ~709
        return Estimate(value, 0.0, math.inf)
    return Estimate(value, value * math.exp(-width), value * math.exp(width))


def ratio_bounds(pieces: Sequence[Piece], total_s: float, reference: Sequence[Piece], reference_s: float,
                 terms: Terms | None = None) -> Estimate:
    """The predicted ratio of two plans' latencies in one LUT context (``total_s`` of the plan deployed as
    ``pieces`` over ``reference_s`` of the plan deployed as ``reference``: a plan's loss against another is it minus
    1), with its 95 % interval. Both latencies come from one LUT, so what the two plans share -- the rest of the
    model, the pieces they deploy alike, the machine's drift, which scales both -- cancels in the ratio; what differs
    is the median errors of the pieces only one of them deploys::

        a / b = 1 + (a - b) / b,    a - b = the savings of b's own pieces - the savings of a's own pieces,

    so the entries' part of the half-width is `Z95` x sqrt(sum of those pieces' squared median errors) / b (the errors
    `plan_bounds` sums; the denominator's own error is second order and left out). With the model's ``terms`` (the
    front's, `Terms`), three more parts, as a plan's own interval has them: the factor's systematic error, which
    scales the savings only one plan deploys (``terms.factor`` x |a / b - 1|), `PIECE_INTERACTION` for each piece
    that changes the model in one plan only (a share of the original, counted here as a share of b: a little narrower
    where b runs faster than the original, wider where slower), and the noise of the paired check that would measure
    the two plans (``terms.check``, relative). Issue #46: without them, eager's plans on other runtimes at 96 px were
    given losses of +7 to +17 % within +-1 point and measured -0 to +12 %."""
    key = lambda p: (p.start, p.stop, p.variant, p.errors_s, p.weight, p.changes)  # noqa: E731
    mine, theirs = Counter(map(key, pieces)), Counter(map(key, reference))
    only = (mine - theirs) + (theirs - mine)  # the pieces one plan deploys and the other does not
    # each counted by its weight, as `plan_bounds` counts the pieces' errors
    variance = sum(count * (e * weight) ** 2 for (_, _, _, errors, weight, _), count in only.items() for e in errors)
    value = total_s / reference_s
    relative = variance / reference_s ** 2
    if terms is not None and only:
        deployed = sum(count for k, count in only.items() if k[-1])
        relative += ((terms.factor * (value - 1)) ** 2 + (terms.check * value) ** 2
                     + PIECE_INTERACTION ** 2 * deployed)
    half = Z95 * math.sqrt(relative)
    # a ratio of two latencies is above 0: a half-width wider than the ratio (a LUT of a few samples) ends there,
    # not at a loss below -100 %
    return Estimate(value, max(value - half, 0.0), value + half)


# -- the drift probe: this machine now against the LUT's runs ----------------------------------------------


def lut_probe(lut: LUT, context: DeviceContext) -> LUTEntry:
    """The LUT's drift probe entry in ``context``; raises `LUTMissError` (saying what to do) without one."""
    entry = lut.find(PROBE_NAME, "original", context, scope=PROBE_SCOPE)
    if entry is None:
        raise LUTMissError(
            f"the LUT {lut.source} has no drift probe ({PROBE_NAME}) in {context}: its measurement files "
            "predate the probe. Measure again (`dsprof measure`, any model, the same settings) and rebuild the LUT "
            "with the new file, or predict without `probe=`"
        )
    return entry


def probe_ratio(samples_s: Sequence[float], entry: LUTEntry) -> float:
    """Now over then: the median of ``samples_s`` (the probe timed now, `dsprof.profiler.probe_now`) over the
    LUT's probe median (> 1: the machine is slower now)."""
    return statistics.median(samples_s) / entry.median_s
