"""In-model prices (issue #36): what a piece saves inside the running model, from the pieces the LUT timed there.

A piece -- a block linearised alone, merged or not, or a span merged as one convolution -- timed alone saves
``alone`` (its blocks' originals minus its own entry). Inside the model it saves something else, and spans and lone
blocks differently: on this 2-vCPU VM through ONNX Runtime, EfficientNet-Lite0's spans saved 0.14 of their savings
alone inside the session (each block timed alone pays a session call the model does not), its lone blocks 1.15;
through PyTorch eager, MobileNetV2's spans 0.76 and its lone blocks 0.56 (benchmarks/RESULTS.md, issue #36).
`dsprof measure --calibrate` times the front's pieces inside the model (`dsprof.workflows.calibrate`): the whole
model and the model with only that piece deployed, paired round by round, so the machine's moves divide out; the
piece's measured saving is ``m = R (1 - ratio)`` (R the whole model's median) with standard error ``sigma``.

From those pieces (at least `MIN_PIECES`), `InModel` estimates

- the **scale** of each kind of piece, spans and lone blocks (and, where at least `MIN_KIND` are timed, the pieces
  that cost time alone, whichever their form: `costs_apart`): how much of their savings alone they save inside the
  model, the least-squares line through the origin, c = sum m alone / sum alone^2 (pieces that cost time, ResNet's
  linear blocks, count as much as those that save it), for a kind with at least `MIN_KIND` pieces timed, else the line
  through all of them (through all that save, where those that cost have their own line: issue #46, SemNASNet-0.75 on
  ONNX Runtime at 224 px, whose two spans that save took a line of x1.15 set by three spans that cost 3.5-5.8 ms, and
  its span 1-2, which saved 330 us of 890 us alone inside the model, was priced at 1022 us); paired, unlike the
  in-model factor (a ratio of the whole model and its blocks timed in other groups, which the machine's drift between
  groups moves), then **shrunk toward 1** (`shrink`, the rule below);
- how far one piece's in-model saving lies from c times its saving alone, tau^2 = tau0^2 + (t c alone)^2: a part
  every piece has whatever it saves alone, tau0 (what a piece changes around it that its timing alone does not see,
  and the session a group runs in: ONNX Runtime's sessions of one model differ by a few per cent; seconds), and a
  part that grows with the saving, the **spread** t (relative). Both by the method of moments on the squared
  residuals less their measurement error, r^2 - sigma^2 - s^2 (r = m - c alone; s the part of a group's paired ratio
  that two sessions of one model differ by beyond its rounds, from the LUT's session pairs where it has them,
  `dsprof.lut.interval.session_noise`, times R: each piece's group is a session pair of its own, and a later check
  carries its own, `Terms.check`): tau0^2 their median over the half of the
  pieces that save least alone (at least 3), at least 0; t^2 the mean of (r^2 - sigma^2 - tau0^2) / (c alone)^2 over
  the pieces that save at least `MIN_SHARE` of the model, each term clipped to [-1, 1], at least 0. It is how far the
  LUT's paired ratios move between its groups, beyond what the scales explain: the part of a prediction's error that
  a LUT measured at another time moves too.

A piece not timed inside the model is priced at c times its saving alone, with standard error tau. A piece timed
there is priced at the posterior mean of that prior, N(c alone, tau^2), and its own measurement m, whose noise is its
rounds' and its sessions' (sigma^2 + s^2)::

    price = c alone + w (m - c alone),   w = tau^2 / (tau^2 + sigma^2 + s^2),   se = sqrt(w (sigma^2 + s^2))

A measurement moves its price as far as it is more precise than the line is for one piece: where the pieces lie near
their line (tau small) it hardly moves, and a piece far from its line beyond its timing noise is priced near what it
measured. The weight is what guards against the winner's curse (the planner picks the pieces whose one measurement
came out high): a measurement counts no more than its whole noise allows. The line alone (issue #36's rule, chosen on
pvrA, where pricing the timed pieces so, without the sessions' part, over-predicted re-priced front plans by a median
2.3 % against 1.5 %) let a runtime's own front take pieces that save a third of their price inside the model: issue
#46, MobileNetV2-0.75's spans of blocks 7-9 and 10-11 on torch.compile at 224 px, 608 and 600 us measured inside
against 1576 and 1080 us priced, so that eager's plan ran 4.6 % faster there than torch.compile's own, where a loss of
5.2 % was predicted (benchmarks/RESULTS.md, "Timed pieces priced at their posterior").

Pieces timed one at a time do not add up exactly when several are deployed together: the calibration group (the
whole model with every block linearised, merged by the LUT's rule, timed paired with the original) measures how
much of the sum of its pieces' prices a whole plan realises, ``combined`` = rho (on this VM 0.93 for MobileNetV2
through ONNX Runtime, 1.1-1.4 through PyTorch eager, 2.1-2.7 through torch.compile at 96 px). How a plan's pieces
combine depends on which way rho points (``InModel.together``, the one rule):

- **rho below 1**: the pieces together save less than their savings' sum, and every plan's savings count rho::

      saving = rho S+ + S-,   S+ = the sum of the plan's pieces' prices that save, S- = of those that cost (< 0)

  what the whole model then runs short of (a session's fixed costs, memory traffic) takes a share of every saving.
  A piece that costs time is priced by its own in-model line already (`costs_apart`), and rho, measured on a plan
  of savings, does not shrink it: rho on the net sum priced eager's plans on other runtimes' LUTs, which hold such
  pieces, 6-17 points short of their losses (issue #46, item 4: HardCoRe-NAS-B's eager plan on ONNX Runtime at
  224 px, a net loss of 662 us priced as 95 us under rho 0.14). rho itself is measured so: the calibration plan's
  measured saving less its costs' sum, over its savings' sum. Each piece's ``weight`` is what one second of its
  saving counts for (`InModel.weight`), so the planner's exact search adds up each piece's weighted saving
  (`dsprof.lut.piece.Piece.gain_s`), and picks the plans this prices fastest.
- **rho above 1**: they save more than their sum, (rho - 1) S_cal beyond it (S_cal the calibration plan's S+). On a
  runtime that compiles the model (torch.compile, ONNX Runtime, OpenVINO, TFLite) that comes from blocks deployed side
  by side: pairs of them (a compiler fuses linear neighbours). A plan that linearises m of the n blocks holds
  m (m - 1) / 2 of the calibration plan's n (n - 1) / 2 pairs, and that share::

      saving = S + (rho - 1) S_cal q,   q = m (m - 1) / (n (n - 1)),   S = S+ + S-

  the calibration plan's measured saving for itself (q = 1), its pieces' sum for one block alone (q = 0), which is
  what the in-model scales price, as they were measured. On a runtime that runs each activation as a kernel of its
  own (PyTorch eager: `dsprof.runtimes.BackendEntry.separate_activations`) nothing fuses, and each linearised block
  takes an equal share, q = m / n (`InModel.excess_by` ``blocks``): on the 15 plans of PyTorch eager LUTs at 64 px
  whose rho was above 1 and whose chosen plan (k about n / 2) was checked paired (`benchmarks/new_user_loop.py`,
  benchmarks/RESULTS.md, "How a plan shares the calibration's excess"), m / n priced 12 closer to their check than
  pairs did, and all but one were under-priced by pairs. Either term depends on m = n - k alone, so the planner's
  exact search, which sums pieces for each k, picks the same plans either way.
- **rho says nothing** (the calibration plan is predicted to save under 2 % of the model, or measured a loss where a
  saving was predicted: `dsprof.lut.interval.calibration_of`): the calibration plan still measured its **gap**, G =
  what it saved less its pieces' sum (seconds, ``gap_s``), and a plan that linearises m of the n blocks is priced
  its share of blocks of it::

      saving = S + G m / n

  the straight line between the original (m = 0) and the calibration plan as it ran (m = n). Also m / n alone, so
  the planner picks the same plans. Issue #46's pvr89 is why: SE-ResNet-34 on ONNX Runtime at 128 px, whose
  calibration plan was predicted to save 10.4 % and ran 5.6 % slower (G = -16.1 % of the model); its 18 plans
  priced at their pieces' sum were over-predicted by 3-22 %, and missed by about m / n G (0.6-1.9 times it). Re-scored
  on the 672 plans of pvr83-89 (330 of them on LUTs with such a gap), pricing at m / n G put 100 % within +-10 % of
  their checks (98.8 % at the pieces' sum) and 96.9 % inside their intervals (96.0 %); half of it, m / 2n G, and the
  pairs' share did worse (benchmarks/RESULTS.md, "Priced at the calibration plan's gap"). The interval keeps the
  whole range from the pieces' sum to this price (`dsprof.lut.interval`, the gap's term).

Issue #46's runs are why (benchmarks/RESULTS.md, pvrK-pvrN): rho in full priced torch.compile's fronts at 96 px 10-14 %
high where rho was 2.1-2.7 (plans that linearise half the blocks ran about as their pieces add up); the pairs, tried
next on new models, priced the plans of LUTs whose rho was below 1 up to 5 points higher than rho in full, and worse.
The interval's systematic term covers plans that combine otherwise (`InModel.together_error_s`,
`dsprof.lut.interval`): below 1, uniform between x1 and rho around rho, as a share of the saving, for the part of
the plan that the calibration plan does not pin down: 1 - q, q the share of the calibration plan's summed saving the
plan's savings sum to (`InModel.saving_share`; a plan that holds all of it is the calibration plan as far as its
prices tell, and carries rho's own error alone), with the scale's error on that part too; above 1, the
interaction uniform between none and the plan's share of blocks, m / n, of the calibration plan's (the most a plan of m
blocks would carry if it came from single blocks), around its share of pairs, rho's own error carried by q, and the
scale's error where the calibration does not pin the plan down (1 - q of it). The pieces' own errors count as their
savings do (each piece's ``weight``): rho times for a saving below 1, else once.

The planner and `dsprof predict` price with these (the ``in-model`` method, `auto`), so a kind of piece that does not
pay inside the model (ONNX Runtime's spans) is priced as it runs there.

**Shrinkage** (issue #46; the one rule for the scales and rho, `shrink`): a scale is only as good as the pieces that
pin it down. Pieces that save almost nothing alone say almost nothing of it: issue #46's pvrD front plans were
priced 10-12 % high from a lone-block scale of x1.77 fitted to such pieces, with rho 1.26 on top. So each kind's
scale c, and rho, is pulled toward 1 (a piece saves inside the model what it saves alone) by how well it is
determined, the precision-weighted mean of the estimate and that prior (empirical Bayes with a normal prior; for
the line, the same as a ridge penalty toward 1)::

    c* = (w c + w0 x 1) / (w + w0),   w = 1 / se(c)^2,   w0 = 1 / PRIOR_SD^2,   se(c*) = 1 / sqrt(w + w0)

with ``PRIOR_SD`` = 0.5: a scale is believed to lie within 1 +- 1 (0 to 2, 95 %) before any piece is timed -- the
range of every scale and rho measured on this VM in issues #27 and #36 (0.14 for ONNX Runtime's spans to 1.4 for
PyTorch eager's rho), no narrower, so that a well-timed model keeps what it measured. se(c) is the least-squares
line's own standard error, sqrt(sum alone^2 v) / sum alone^2, with each piece's variance around the line v =
max(r^2 n / (n - 1), sigma^2) (its residual, as the heteroskedasticity-robust HC1 estimate counts it, but never
below its own measurement's error; one piece: sigma^2): a piece weighs by its saving alone squared, so pieces that
save nearly nothing alone hardly move c, and a scale from few or noisy pieces stays near 1. rho's se is its
calibration group's (`dsprof.lut.interval.Calibration.rho_se` times rho). A standard error of 0 (pieces exactly on
their line, hand-made) leaves the estimate as it is; an unknown one (NaN) too. The floor and the spread are read from
the pieces' residuals around their kind's own (unshrunk) line: the scatter of the pieces, not the shrinkage.

Fewer than `MIN_PIECES` pieces (a model with 4 blocks and no spans has only 4 to time) estimate no scale of their
own kinds; `InModel.estimate` with ``minimum=1`` still gives the one line through them, shrunk as above, which is
what the prices fall back to then (`dsprof.lut.prices`, with a `CalibrationFallbackWarning`): it counts only what
the pieces change, where the in-model factor counts the time of everything the whole model runs beyond its blocks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from .piece import Piece, linearised

__all__ = ["EXCESS_BY", "MIN_KIND", "MIN_PIECES", "MIN_SHARE", "PRIOR_SD", "InModel", "Timed", "block_share", "costs_apart",
           "pair_share", "shrink"]

#: Fewer pieces timed in the model than this estimate no scale of their own kinds (the prices fall back to the one
#: line through them, shrunk: see the module docstring).
MIN_PIECES = 5
#: A kind of piece (spans, lone blocks) gets a scale of its own from this many pieces timed on.
MIN_KIND = 3
#: Pieces that save less than this share of the model are left out of the spread's estimate: mostly noise.
MIN_SHARE = 0.005
#: The prior's standard deviation around 1 that the scales and rho shrink toward (`shrink`).
PRIOR_SD = 0.5


def shrink(value: float, se: float) -> tuple[float, float]:
    """(``value`` shrunk toward 1, its standard error): the precision-weighted mean of ``value`` (absolute standard
    error ``se``) and the prior 1 +- `PRIOR_SD` (the module docstring's rule). ``se`` 0 or NaN: ``value`` as it is."""
    if not se > 0 or not value == value:
        return value, (se if se == se else math.nan)
    w, w0 = 1 / se ** 2, 1 / PRIOR_SD ** 2
    return (w * value + w0) / (w + w0), 1 / math.sqrt(w + w0)


@dataclass(frozen=True)
class Timed:
    """One piece timed inside the model: blocks start..stop-1 as ``variant``; its saving alone (seconds, unscaled)
    and inside the model (``saving_s``, with its standard error ``se_s``)."""

    start: int
    stop: int
    variant: str
    alone_s: float
    saving_s: float
    se_s: float


@dataclass(frozen=True)
class InModel:
    """The scales, spread and timed pieces of one model in one LUT context (see the module docstring)."""

    scale: float  # the line through every piece timed, shrunk toward 1
    scale_se: float  # relative standard error of the (shrunk) scale
    spread: float
    reference_s: float
    floor_s: float  # tau0: what every piece's in-model saving is known to, whatever it saves alone (seconds)
    timed: dict[tuple[int, int, str], Timed] = field(repr=False)
    scales: dict[str, float] = field(default_factory=dict)  # "span", "block", "cost": each kind's own, where it has one
    combined: float = 1.0  # the calibration group's measured saving over the sum of its pieces' (1: not timed), shrunk
    combined_se: float = 0.0  # its relative standard error
    combined_source: str = ""
    calibration_s: float = math.nan  # the sum of the calibration plan's pieces' prices (NaN: rho counts in full)
    excess_by: str = "pairs"  # how a plan takes its share of the excess above 1: `EXCESS_BY` (the module docstring)
    fitted: float = math.nan  # the line through every piece before shrinking
    session_s: float = 0.0  # what a piece's measured saving carries from its group's two sessions (seconds)
    gap_s: float = 0.0  # where rho says nothing: the calibration plan's measured saving less its pieces' sum (seconds)

    @property
    def few(self) -> bool:
        """Fewer pieces than `MIN_PIECES`: the one line through them, no scale of each kind (the prices' fallback)."""
        return len(self.timed) < MIN_PIECES

    @classmethod
    def estimate(cls, timed: Sequence[Timed], reference_s: float, minimum: int = MIN_PIECES,
                 session_s: float = 0.0) -> "InModel | None":
        """From the pieces timed in the model; None with fewer than ``minimum`` (at least 1), or where no piece saves
        or costs anything alone (no line). Below `MIN_PIECES` every kind takes the one line through all the pieces.
        A line that stays below 0 once shrunk is kept: the pieces lose time inside the model (issue #46: at 64 px,
        hardcorenas_a's merged pieces saved 1-2 % of the model alone and cost 2-4 % inside it), and the prices say so,
        where a fallback to the in-model factor priced every plan 6-10 % faster than it ran. ``session_s``: what a
        piece's measured saving carries from its group's two sessions beyond its standard error (seconds; s R in the
        module docstring)."""
        if len(timed) < max(1, minimum) or not reference_s > 0:
            return None
        fitted = _line(timed)
        scale, scale_se = shrink(fitted, _line_se(timed, fitted))
        if not scale == scale:
            return None
        lines, scales = {}, {}
        apart = costs_apart(timed)
        # a kind without a line of its own takes the line through the pieces that save, where those that cost have
        # their own: costs of milliseconds would otherwise set the line of savings of a few hundred microseconds
        saving = [t for t in timed if _kind(t.start, t.stop, t.alone_s, apart) != "cost"]
        rest = _line(saving) if apart else math.nan
        rest, rest_scale = (rest, shrink(rest, _line_se(saving, rest))[0]) if rest == rest else (fitted, scale)
        for kind in KINDS if apart else KINDS[:-1]:
            mine = [t for t in timed if _kind(t.start, t.stop, t.alone_s, apart) == kind]
            own = _line(mine) if len(mine) >= MIN_KIND and len(timed) >= MIN_PIECES else math.nan
            lines[kind] = own if own == own else rest
            scales[kind] = shrink(own, _line_se(mine, own))[0] if own == own else rest_scale
        residuals = [t.saving_s - lines[_kind(t.start, t.stop, t.alone_s, apart)] * t.alone_s for t in timed]
        # the residual's variance less its measurement's noise: its rounds' and its sessions'
        excess = [r * r - t.se_s ** 2 - session_s ** 2 for r, t in zip(residuals, timed)]
        by_size = sorted(range(len(timed)), key=lambda i: abs(timed[i].alone_s))
        smallest = by_size[: max(3, len(timed) // 2)]
        floor = math.sqrt(max(0.0, _median([excess[i] for i in smallest])))
        terms = []
        for e, t in zip(excess, timed):
            prior = lines[_kind(t.start, t.stop, t.alone_s, apart)] * t.alone_s
            if abs(prior) >= MIN_SHARE * reference_s:
                terms.append(max(-1.0, min(1.0, (e - floor ** 2) / prior ** 2)))
        spread = math.sqrt(max(0.0, sum(terms) / len(terms))) if terms else 0.0
        return cls(scale, scale_se / abs(scale) if scale_se == scale_se and scale else 0.0, spread, reference_s, floor,
                   {(t.start, t.stop, t.variant): t for t in timed}, scales, fitted=fitted, session_s=session_s)

    def price(self, start: int, stop: int, variant: str, alone_s: float) -> tuple[float, float, bool]:
        """(saving, its standard error, whether the piece was timed in the model), seconds, of blocks start..stop-1 as
        ``variant`` that save ``alone_s`` timed alone: its kind's scale times ``alone_s``, known to tau, and for a
        piece timed in the model that prior moved toward its measurement by their precisions (the module docstring's
        rule; how a plan's pieces combine is the plan's: `together`); a piece that costs time alone is of the kind
        ``cost`` where the pieces timed had their own line for those (`costs_apart`)."""
        scale, tau, w, timed = self._posterior(start, stop, variant, alone_s)
        prior = scale * alone_s
        if timed is None or w is None:
            return prior, tau, timed is not None
        noise = timed.se_s ** 2 + self.session_s ** 2
        return prior + w * (timed.saving_s - prior), math.sqrt(w * noise), True

    def slope(self, start: int, stop: int, variant: str, alone_s: float) -> float:
        """How far `price` moves per second of ``alone_s``: what the error of a saving timed alone carries into the
        price. The kind's scale, times 1 - w for a piece timed in the model (its measurement carries w of the price).
        Not the price over ``alone_s``: issue #46's pvr91, GC-ResNet-33ts on ONNX Runtime at 224 px, whose block 5
        saved almost nothing alone and 0.18 ms inside the model, carried a standard error of 0.33 ms as -44 ms so, and
        its plans' intervals were 0.42-2.68x."""
        scale, _, w, timed = self._posterior(start, stop, variant, alone_s)
        return scale * (1 - w) if timed is not None and w is not None else scale

    def _posterior(self, start: int, stop: int, variant: str, alone_s: float) -> tuple[float, float, float | None,
                                                                                         Timed | None]:
        """(the piece's kind's scale, tau, the weight w of its measurement in the model, the piece as timed there):
        w None where the piece was not timed, or where neither its line nor its timing has an error to weigh by."""
        scale = self.scales.get(_kind(start, stop, alone_s, "cost" in self.scales), self.scale)
        tau = math.hypot(self.floor_s, self.spread * scale * alone_s)
        timed = self.timed.get((start, stop, variant))
        if timed is None:
            return scale, tau, None, None
        noise = timed.se_s ** 2 + self.session_s ** 2
        if not tau ** 2 + noise > 0:
            return scale, tau, None, timed
        return scale, tau, tau ** 2 / (tau ** 2 + noise), timed

    @property
    def by_pairs(self) -> bool:
        """Whether the pieces combine by pairs (rho above 1, the calibration plan's sum known), else by rho in full."""
        return self.combined > 1.0 and self.calibration_s == self.calibration_s

    def weight(self, saving_s: float) -> float:
        """What one second of a piece's saving ``saving_s`` counts for in a plan's (`together`): rho below 1 where it
        saves, else 1 (a cost, or pieces that combine by pairs)."""
        return self.combined if not self.by_pairs and saving_s > 0 else 1.0

    def together(self, pieces: Sequence[Piece]) -> float:
        """What a plan deployed as ``pieces`` saves (seconds): its pieces' savings, each counted by its ``weight``
        (rho times a saving below 1), plus, above 1, its share of the calibration plan's pairs of what that plan saved
        beyond its sum; where rho says nothing, its share of blocks of the calibration plan's gap (the module
        docstring's rule)."""
        saving = sum(p.gain_s for p in pieces if p.saving_s == p.saving_s)
        if self.by_pairs:
            return saving + (self.combined - 1) * self.calibration_s * self.share(*linearised(pieces))
        return saving + self.gap_s * block_share(*linearised(pieces))  # 0 without a gap

    def share(self, changed: int, blocks: int) -> float:
        """The share of the calibration plan's excess that a plan linearising ``changed`` of ``blocks`` blocks takes,
        as ``excess_by`` says (`EXCESS_BY`)."""
        return EXCESS_BY[self.excess_by](changed, blocks)

    @property
    def combined_error(self) -> float:
        """The relative error of how the calibration plan's pieces combine: uniform between x1 and rho around rho, and
        rho's own error (0 without a calibration). By pairs, the calibration plan itself (q = 1) has the same."""
        if self.combined == 1.0:
            return 0.0
        return math.hypot(self._combined_spread, self._combined_se)

    @property
    def _combined_spread(self) -> float:
        """A uniform between x1 and rho around rho, relative to rho: its standard deviation."""
        return abs(self.combined - 1) / math.sqrt(3) / self.combined

    @property
    def _combined_se(self) -> float:
        """rho's own relative error (0 where unknown)."""
        return self.combined_se if self.combined_se == self.combined_se else 0.0

    def together_error_s(self, pieces: Sequence[Piece]) -> float:
        """The systematic error (seconds) of `together` for a plan deployed as ``pieces`` (the module docstring's
        rule): by rho in full, a uniform between x1 and rho around rho times the share of the calibration plan's
        savings the plan does not hold (1 - q, `saving_share`), and rho's own error, as shares of its rho-counted
        savings, and the scale's own error on the pieces' sum times 1 - q; by pairs, the interaction uniform
        between none and the plan's share of blocks of the calibration plan's, around its share of pairs, rho's own
        error times that share of pairs, and the scale's error on the pieces' sum where the calibration does not pin
        it down (1 - q of it). The scale's error alone where no calibration group says how the pieces combine."""
        savings = [p.saving_s for p in pieces if p.saving_s == p.saving_s]
        scale = abs(sum(savings)) * self.scale_se
        if self.combined == 1.0:
            return scale
        se = self._combined_se
        if not self.by_pairs:  # rho in full: pinned by the share of the calibration plan's savings the plan holds
            saved = sum(s for s in savings if s > 0)
            q = self.saving_share(saved)
            relative = math.hypot(self._combined_spread * (1 - q), se)
            return math.hypot(self.combined * saved * relative, scale * (1 - q))
        changed, blocks = linearised(pieces)
        q = self.share(changed, blocks)
        full = (self.combined - 1) * self.calibration_s
        linear = full * (changed / blocks if blocks else 1.0)
        spread = math.sqrt(linear ** 2 / 12 + (full * q - linear / 2) ** 2)
        return math.sqrt(spread ** 2 + (se * self.combined * self.calibration_s * q) ** 2 + (scale * (1 - q)) ** 2)

    def saving_share(self, saving_s: float) -> float:
        """The share of the calibration plan's summed savings that a plan whose savings sum to ``saving_s`` holds, in
        [0, 1] (0 where that sum is unknown or not a saving): how far the calibration pins the plan down below 1."""
        if not self.calibration_s > 0:
            return 0.0
        return min(1.0, max(0.0, saving_s / self.calibration_s))

    def describe(self) -> str:
        """One line: how many pieces, the scale and the spread, and how the pieces combine."""
        kinds = ", ".join(f"{KIND_NAMES[k]} x{v:.3f}" for k, v in self.scales.items() if v != self.scale)
        moved = f"{self.fitted:.3f}" != f"{self.scale:.3f}"
        shrunk = f", x{self.fitted:.3f} before shrinking toward 1" if moved else ""
        few = f" (fewer than {MIN_PIECES}: one line through them)" if self.few else ""
        line = (f"{len(self.timed)} pieces timed in the model{few} save x{self.scale:.3f} (+-{self.scale_se:.1%}"
                f"{shrunk}) of their savings alone{f' ({kinds})' if kinds else ''}; ")
        if self.floor_s == 0 and self.spread == 0:  # the estimates' floor at 0: no scatter beyond the timing's own
            line += "the pieces lie within their own timing noise of that line"
        else:
            line += (f"one piece lies +-{self.floor_s / self.reference_s:.2%} of the model and +-{self.spread:.0%} "
                     "of its saving from that")
        if self.combined != 1.0:
            how = (f"a plan that linearises some of its blocks its share of their {self.excess_by} of the excess"
                   if self.by_pairs else "and so does every plan")
            line += (f"; the calibration plan's pieces together save x{self.combined:.3f} of their sum, {how} "
                     f"({self.combined_source})")
        return line


def block_share(changed: int, blocks: int) -> float:
    """The share of the calibration plan's linearised blocks (every one of ``blocks``) that a plan which linearises
    ``changed`` of them holds: m / n."""
    return changed / blocks if blocks else 0.0


def pair_share(changed: int, blocks: int) -> float:
    """The share of the calibration plan's pairs of linearised blocks (every one of ``blocks``) that a plan which
    linearises ``changed`` of them holds: m (m - 1) / (n (n - 1)); m / n for a model of one block."""
    if blocks <= 1:
        return changed / blocks if blocks else 0.0
    return changed * (changed - 1) / (blocks * (blocks - 1))


#: How a plan takes its share of the calibration plan's excess above 1, by the runtime (the module docstring): by its
#: share of the pairs of linearised blocks, or of the blocks.
EXCESS_BY = {"pairs": pair_share, "blocks": block_share}


#: The kinds of piece that get a scale of their own: a span, a block linearised alone (merged or not), and, where
#: enough of them were timed (`costs_apart`), a piece of either that costs time alone.
KINDS = ("span", "block", "cost")
KIND_NAMES = {"span": "spans", "block": "lone blocks", "cost": "pieces that cost time alone"}


def costs_apart(timed: Sequence[Timed]) -> bool:
    """Whether the pieces that cost time alone get a line of their own: at least `MIN_KIND` of them among at least
    `MIN_PIECES` pieces timed. A piece that costs time alone is one no front of its own runtime takes, but another
    runtime's plan does (issue #46, item 4): on ONNX Runtime, OpenVINO and torch.compile, two of MobileNetV2's spans
    that cost 12-250 us alone at 96 px cost 115-801 us inside the model (benchmarks/RESULTS.md), where the spans' line,
    drawn through spans that save, prices a cost at 0.16-0.89 of itself on this VM's ONNX Runtime LUTs. Fewer: they
    stay with their span or block line, as before `dsprof.workflows.calibrate.COSTLY_PIECES` were timed."""
    return len(timed) >= MIN_PIECES and sum(t.alone_s < 0 for t in timed) >= MIN_KIND


def _kind(start: int, stop: int, alone_s: float, apart: bool) -> str:
    if apart and alone_s < 0:
        return "cost"
    return "span" if stop - start > 1 else "block"


def _line(timed: Sequence[Timed]) -> float:
    """The least-squares line through the origin of the pieces' savings inside the model against alone (NaN without
    pieces that save or cost anything alone)."""
    square = sum(t.alone_s ** 2 for t in timed)
    return sum(t.saving_s * t.alone_s for t in timed) / square if square > 0 else math.nan


def _line_se(timed: Sequence[Timed], c: float) -> float:
    """The standard error of the line through the origin ``c`` fitted to ``timed`` (absolute; NaN without pieces that
    save or cost anything alone): sqrt(sum alone^2 v) / sum alone^2, each piece's variance v = max(r^2 n / (n - 1),
    sigma^2) (r its residual; one piece: sigma^2)."""
    square = sum(t.alone_s ** 2 for t in timed)
    if not square > 0 or not c == c:
        return math.nan
    n = len(timed)
    inflate = n / (n - 1) if n > 1 else 0.0
    v = [max((t.saving_s - c * t.alone_s) ** 2 * inflate, t.se_s ** 2) for t in timed]
    return math.sqrt(sum(t.alone_s ** 2 * x for t, x in zip(timed, v))) / square


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    return (ordered[(n - 1) // 2] + ordered[n // 2]) / 2
