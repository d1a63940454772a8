"""A new device context from a few measurements (`dsprof measure --few N --like LUT`): which N entries of a model to
measure there, and the rest of its entries predicted from a full LUT of another context.

The entries a plan of the model reads (`candidates`: each block's original, merged and linear forms, each span's
merged convolution, the whole model, its stem and head) are known in the full context ("like"). In the new one the
model is, on log latencies,

    log t_new = a + a_group + b * log t_like,

with one offset per group of workloads that run alike -- ``original`` blocks, ``linear`` blocks (both with their
depthwise convolutions), ``dense`` convolutions (merged blocks and spans), ``rest`` (the whole model, its stem and head)
-- held near the common intercept by a small ridge penalty (a group with few measurements borrows from the others),
and a common slope b (a context whose fixed cost per call differs scales small workloads unlike large ones). A context
that is exactly c times the other fits a = log c, offsets 0, b = 1 with no residual: its predictions are exactly c
times the like entries.

`choose` takes the whole model (the anchor of the rest and of every speed-up) and then, greedily, the entry that most
lowers the fit's average prediction variance over all candidates (I-optimal design), so the N entries spread over the
groups and the range of latencies. The fit's leave-one-out error on the measured entries becomes each predicted
entry's spread (``iqr_s``, with ``n_samples`` 1: its median error is that relative error), so that predictions from
such a LUT carry wider intervals. Predicted entries' ``sources`` start with ``predicted:`` (`dsprof.lut.schema`).
Pure arithmetic on LUT entries (NumPy); `dsprof.workflows.few` measures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ..device_context import DeviceContext
from ..errors import LUTError, UsageError
from ..models import Block
from .lookup import Lookup, span_key
from .interval import IQR_TO_SD, MEDIAN_SE
from .schema import COLUMNS, PREDICTED, SCHEMA
from .table import LUT, LUTEntry
from ..models.spans import span_ranges

__all__ = ["GROUPS", "Candidate", "FewFit", "candidates", "choose", "few_lut", "fit"]

GROUPS = ("original", "linear", "dense", "rest")
_RIDGE = 0.1  # penalty on the group offsets (log units): weak against data, enough to pool an empty group
_MIN = 5  # measured entries below which no fit is tried


@dataclass(frozen=True)
class Candidate:
    """One LUT key of the model (scope, workload, variant), the group its fit shares, and its entry in the full
    context (``like``)."""

    scope: str
    workload: str
    variant: str
    group: str
    like: LUTEntry
    span: int = 0  # blocks that a span's convolution merges (0: not a span)
    macs: int = 0  # of the workload for one image (0: not known)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.scope, self.workload, self.variant)


def candidates(like: LUT, key: DeviceContext, label: str, blocks: list[Block], max_span: int,
               macs: Mapping[tuple[str, str, str], int] | None = None) -> list[Candidate]:
    """The entries of ``label`` (a model label, `model_label`) that a plan with spans of up to ``max_span`` blocks
    reads and that context ``key`` of ``like`` holds, in block order, each once; ``macs``: each key's MACs for one
    image (`dsprof.workflows.few.workload_macs`), a feature of the fit."""
    lookup = Lookup.of(like, key)
    found: dict[tuple[str, str, str], Candidate] = {}

    def add(scope: str, workload: str, variant: str, group: str, span: int = 0) -> None:
        entry = lookup(workload, variant, scope)
        if entry is not None and (scope, workload, variant) not in found:
            found[(scope, workload, variant)] = Candidate(scope, workload, variant, group, entry, span,
                                                          int((macs or {}).get((scope, workload, variant), 0)))

    add("model", label, "original", "rest")
    for b in blocks:
        spec = b.spec.to_str()
        add("block", spec, "original", "original")
        add("block", spec, "linear", "linear")
        add("block", spec, "merged", "dense")
    for start, stop in span_ranges(blocks, (0,) * len(blocks), max_span):
        add("block", span_key(blocks, start, stop), "merged", "dense", stop - start)
    add("stem", label, "original", "rest")
    add("head", label, "original", "rest")
    if not found:
        raise LUTError(f"{like.source} holds no entry of {label} in {key}: give a LUT measured for this model (and "
                       "resolution) as `like=`")
    return list(found.values())


def _design(cands: Sequence[Candidate]) -> np.ndarray:
    """One row per candidate: 1, the group's indicator, log of its like latency, log of its MACs (0 where unknown)."""
    x = np.zeros((len(cands), 3 + len(GROUPS)))
    x[:, 0] = 1.0
    for i, c in enumerate(cands):
        x[i, 1 + GROUPS.index(c.group)] = 1.0
        x[i, -2] = math.log(c.like.median_s)
        x[i, -1] = math.log(c.macs) if c.macs > 0 else 0.0
    return x


def _penalty() -> np.ndarray:
    """Ridge on the group offsets and the MACs slope (an exact multiple of the like context needs neither)."""
    return np.diag([0.0] + [_RIDGE] * len(GROUPS) + [0.0, _RIDGE])


def choose(cands: Sequence[Candidate], n: int) -> list[Candidate]:
    """The ``n`` candidates to measure: the whole model first, then greedily the one that most lowers the average
    prediction variance of the fit over all candidates (a tiny prior on the unpenalised terms keeps the first steps
    defined). Deterministic; in the order chosen."""
    if n < _MIN:
        raise UsageError(f"`n=` (the entries to time) is at least {_MIN}, to fit the rest from; got {n}")
    if n > len(cands):
        raise UsageError(f"`n={n}` asks for more entries than the model has in the `like=` LUT ({len(cands)}); "
                         "measure it in full instead")
    x = _design(cands)
    chosen = [i for i, c in enumerate(cands) if c.scope == "model"][:1]
    info = _penalty() + 1e-6 * np.eye(x.shape[1]) + x[chosen].T @ x[chosen]
    while len(chosen) < n:
        inverse = np.linalg.inv(info)
        best, best_score = -1, math.inf
        for i in range(len(cands)):
            if i in chosen:
                continue
            u = inverse @ x[i]  # Sherman-Morrison: the inverse after adding row i
            after = inverse - np.outer(u, u) / (1.0 + x[i] @ u)
            score = float(np.einsum("ij,jk,ik->", x, after, x))  # the sum of prediction variances over all candidates
            if score < best_score - 1e-12:
                best, best_score = i, score
        chosen.append(best)
        info += np.outer(x[best], x[best])
    return [cands[i] for i in chosen]


@dataclass(frozen=True)
class FewFit:
    """The fitted model of the module docstring: ``coef`` (a, the group offsets, b) and the relative leave-one-out
    error of the measured entries (root mean square of their log residuals)."""

    coef: tuple[float, ...]
    loo_error: float
    n: int

    def predict_s(self, cands: Sequence[Candidate]) -> np.ndarray:
        """Predicted medians (seconds) of ``cands`` in the new context."""
        return np.exp(_design(cands) @ np.asarray(self.coef))


def fit(measured: Sequence[tuple[Candidate, float]]) -> FewFit:
    """Fit the model to (candidate, its median measured in the new context, seconds) pairs."""
    if len(measured) < _MIN:
        raise UsageError(f"a fit needs at least {_MIN} measured entries, got {len(measured)}")
    x = _design([c for c, _ in measured])
    y = np.log([t for _, t in measured])
    inverse = np.linalg.inv(x.T @ x + _penalty())
    coef = inverse @ x.T @ y
    hat = np.einsum("ij,jk,ik->i", x, inverse, x)
    loo = (y - x @ coef) / np.maximum(1.0 - hat, 1e-6)  # leave-one-out residuals of a ridge fit
    return FewFit(tuple(float(v) for v in coef), float(math.sqrt(np.mean(loo ** 2))), len(measured))


def few_lut(like: LUT, cands: Sequence[Candidate], measured: LUT) -> tuple[LUT, FewFit]:
    """The new context's LUT: ``measured`` (one context: the entries measured there, and its drift probe) and, for
    every other candidate, its prediction by `fit` on the measured ones, marked as predicted. Returns the LUT and
    the fit."""
    contexts = measured.devices()
    if len(contexts) != 1:
        raise LUTError(f"the measured entries must be of one context, got {len(contexts)}; measure the chosen entries "
                       "in the new context first")
    key = contexts[0]
    lookup = Lookup.of(measured, key)
    pairs = [(c, lookup(c.workload, c.variant, c.scope)) for c in cands]
    done = [(c, e.median_s) for c, e in pairs if e is not None]
    model = fit(done)
    rest = [c for c, e in pairs if e is None]
    frame = measured.to_dataframe()
    device_name = str(frame["device_name"].iloc[0])
    sources = (f"{PREDICTED} from {like.source} by a fit on {len(done)} entries measured in this context "
               f"(leave-one-out error {model.loo_error:.1%}; dsprof.lut.few)")
    rows = []
    for c, median in zip(rest, model.predict_s(rest)):
        iqr = model.loo_error * median / (MEDIAN_SE * IQR_TO_SD)  # so that the entry's median error is that error
        rows.append({"schema": SCHEMA, **key.as_dict(), "device_name": device_name, "scope": c.scope,
                     "workload": c.workload, "variant": c.variant, "median_s": float(median), "iqr_s": float(iqr),
                     "n_samples": 1, "noisy": bool(iqr / median > 0.10), "sources": sources,
                     "groups": 1, "group_iqr_s": 0.0, "ratio": float("nan"), "ratio_se": float("nan"), "time_utc": ""})
    predicted = pd.DataFrame(rows, columns=list(COLUMNS))
    return LUT(pd.concat([frame, predicted], ignore_index=True), f"{measured.source} + predicted"), model
