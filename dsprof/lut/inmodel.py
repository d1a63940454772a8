"""In-model prices (issue #36): what a piece saves inside the running model, from the pieces the LUT timed there.

A piece -- a block linearised alone, merged or not, or a span merged as one convolution -- timed alone saves
``alone`` (its blocks' originals minus its own entry). Inside the model it saves something else: on this CPU the
first stride-2 block of MobileNetV2 (112 px) saved 8 % of the model where its saving alone promised 14 %, and spans
that take it over-promised the same; ONNX Runtime's blocks timed alone each pay a session call the model does not.
`dsprof measure --calibrate` times the front's pieces inside the model (`dsprof.profiler.calibration`): the whole
model and the model with only that piece deployed, paired round by round, so the machine's moves divide out; the
piece's measured saving is ``m = R (1 - ratio)`` (R the whole model's median) with standard error ``sigma``.

From those pieces (at least `MIN_PIECES`), `InModel` estimates

- the **scale** c: how much of their savings alone the pieces save in the model, all together: the least-squares
  line through the origin, sum m alone / sum alone^2 (pieces that cost time, ResNet's linear blocks, count as much as
  those that save it; paired, unlike the in-model factor, a ratio of the whole model and its blocks timed in other groups, which the
  machine's drift between groups moves);
- the **spread** t: how far one piece's in-model saving lies from c times its saving alone, relative (a method of
  moments: the mean of ((m - c alone)^2 - sigma^2) / (c alone)^2 over the pieces that save at least `MIN_SHARE` of
  the model, each term clipped to [-1, 1], at least 0);

and prices every piece with what the LUT says of it (then times `combined`, below):

- a piece timed in the model: c alone moved toward m by w = tau^2 / (tau^2 + sigma^2), tau = t |c alone| (a
  measurement as noisy as the prior moves it halfway; a precise one all the way), standard error sqrt(w) sigma;
- any other piece: c alone, standard error tau (one piece's in-model saving is known to that much).

Pieces timed one at a time do not add up exactly when several are deployed together: the calibration group (the
whole model with every block linearised, merged by the LUT's rule, timed paired with the original) measures how
much of the sum of its pieces' savings a whole plan realises, ``combined`` = rho (on this CPU, 0.93 for MobileNetV2
through ONNX Runtime, 1.40 for EfficientNet-Lite0 through PyTorch eager; benchmarks/RESULTS.md, issue #36), and
every piece's saving counts that much: a plan's predicted saving is rho times the sum of its pieces'. The interval's
systematic term covers the plans that interact less than the calibration plan (`dsprof.lut.interval`).

The planner and `dsprof predict` price with these (the ``in-model`` method, `auto`), so a piece that does not pay
inside the model is not chosen once it is on the front: the front's pieces are the ones timed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

__all__ = ["MIN_PIECES", "MIN_SHARE", "InModel", "Timed"]

#: Fewer pieces timed in the model than this estimate no scale (the in-model factor is used instead).
MIN_PIECES = 5
#: Pieces that save less than this share of the model are left out of the spread's estimate: mostly noise.
MIN_SHARE = 0.005


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
    """The scale, spread and timed pieces of one model in one LUT context (see the module docstring)."""

    scale: float
    scale_se: float  # relative standard error of the scale
    spread: float
    reference_s: float
    timed: dict[tuple[int, int, str], Timed] = field(repr=False)
    combined: float = 1.0  # the calibration group's measured saving over the sum of its pieces' (1: not timed)
    combined_se: float = 0.0  # its relative standard error
    combined_source: str = ""

    @classmethod
    def estimate(cls, timed: Sequence[Timed], reference_s: float) -> "InModel | None":
        """From the pieces timed in the model; None with fewer than `MIN_PIECES`, or where the scale is not positive."""
        if len(timed) < MIN_PIECES or not reference_s > 0:
            return None
        square = sum(t.alone_s ** 2 for t in timed)
        if not square > 0:
            return None
        scale = sum(t.saving_s * t.alone_s for t in timed) / square  # least squares through the origin
        if not scale > 0:
            return None
        residuals = [t.saving_s - scale * t.alone_s for t in timed]
        scale_se = math.sqrt(sum((r * t.alone_s) ** 2 for r, t in zip(residuals, timed))) / square / scale
        terms = [max(-1.0, min(1.0, (r * r - t.se_s ** 2) / (scale * t.alone_s) ** 2))
                 for r, t in zip(residuals, timed) if abs(scale * t.alone_s) >= MIN_SHARE * reference_s]
        spread = math.sqrt(max(0.0, sum(terms) / len(terms))) if terms else 0.0
        return cls(scale, scale_se, spread, reference_s, {(t.start, t.stop, t.variant): t for t in timed})

    def price(self, start: int, stop: int, variant: str, alone_s: float) -> tuple[float, float, bool]:
        """(saving, its standard error, whether it was timed in the model), seconds, of blocks start..stop-1 as
        ``variant`` that save ``alone_s`` timed alone."""
        prior = self.scale * alone_s
        tau = self.spread * abs(prior)
        t = self.timed.get((start, stop, variant))
        c = self.combined
        if t is None:
            return c * prior, c * tau, False
        w = 1.0 if tau == 0.0 and t.se_s == 0.0 else tau ** 2 / (tau ** 2 + t.se_s ** 2)
        return c * (prior + w * (t.saving_s - prior)), c * math.sqrt(w) * t.se_s, True

    def describe(self) -> str:
        """One line: how many pieces, the scale and the spread, and how the pieces combine."""
        line = (f"{len(self.timed)} pieces timed in the model save x{self.scale:.3f} (+-{self.scale_se:.1%}) of their "
                f"savings alone; one piece lies +-{self.spread:.0%} from that")
        if self.combined != 1.0:
            line += f"; together they save x{self.combined:.3f} of their sum ({self.combined_source})"
        return line


def timed_pieces(lookup: Any, label: str, blocks: Sequence[Any], originals: Sequence[Any], reference_s: float,
                 span_key: Any, in_model_name: Any) -> list[Timed]:
    """Every piece of ``label`` the LUT context (``lookup``) timed inside the model, with its saving alone:
    ``in_model_name(start, stop)`` names a piece there, ``span_key(start, stop)`` is a span's block workload."""
    from .interval import saving_error_s
    from .schema import context_workload

    out = []
    n = len(blocks)
    candidates = [(i, i + 1, v) for i in range(n) for v in ("merged", "linear")]
    candidates += [(a, b, "span") for a in range(n) for b in range(a + 2, n + 1)
                   if lookup(context_workload(label, in_model_name(a, b)), "original", "context") is not None]
    for start, stop, variant in candidates:
        workload = context_workload(label, in_model_name(start, stop))
        base = lookup(workload, "original", "context")
        swap = lookup(workload, "merged" if variant == "span" else variant, "context")
        alone_entry = (lookup(span_key(start, stop), "merged") if variant == "span"
                       else lookup(blocks[start].spec.to_str(), variant))
        group = originals[start:stop]
        if base is None or swap is None or alone_entry is None or any(o is None for o in group):
            continue
        ratio = swap.ratio if swap.ratio == swap.ratio else swap.median_s / base.median_s
        saving = reference_s * (1 - ratio)
        se = saving_error_s(base, swap) * reference_s / base.median_s
        out.append(Timed(start, stop, variant, sum(o.median_s for o in group) - alone_entry.median_s, saving, se))
    return out
