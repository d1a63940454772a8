"""The search objective: task loss + lambda * sum_b w_b * |m_b| (paper Sec. 4.2, latency-aware decay).

``w_b`` is what linearising block b saves: the block as built minus the block as the planner deploys it alone
(merged where that is cheaper: `dsprof.lut.piece.cheaper`), in seconds from a LUT for one device context (`lut_savings`), or,
without a LUT, in MACs (`mac_savings`). The decay pulls the scores of
the blocks that save most towards zero fastest, so that they drop out of the top-k first: costly
blocks lose their activations first. Savings are normalised to mean 1 over the blocks that save
anything, so that lambda does not depend on the unit; a block whose merge saves nothing (or prices)
gets weight 0 -- the decay does not push it, the task loss alone decides.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..errors import HINT, LUTMissError, MeasureHint
from ..lut.prices import Prices
from ..lut.table import LUT
from ..lut.macs import MacPrices
from ..models import find_blocks, input_size_of, model_args, model_identity

__all__ = ["BlockWeights", "block_weights", "latency_penalty", "mac_savings", "lut_savings"]


@dataclass(frozen=True)
class BlockWeights:
    """Per-block decay weights and the savings they come from (one entry per block, `find_blocks` order): in seconds
    from a LUT (``saving_s``), or in MACs without one (``saving_macs``)."""

    names: tuple[str, ...]
    specs: tuple[str, ...]
    source: str  # the LUT file and device key, or "MACs"
    saving_s: tuple[float, ...] | None = None
    saving_macs: tuple[float, ...] | None = None

    @property
    def unit(self) -> str:
        """``s`` (latency savings from a LUT) or ``macs``."""
        return "s" if self.saving_s is not None else "macs"

    @property
    def savings(self) -> tuple[float, ...]:
        """The savings the weights come from, in `unit`."""
        return self.saving_s if self.saving_s is not None else self.saving_macs

    @property
    def weights(self) -> torch.Tensor:
        """Savings clipped at 0 and normalised to mean 1 over the positive ones (float32)."""
        raw = torch.tensor([max(s, 0.0) for s in self.savings], dtype=torch.float64)
        positive = raw[raw > 0]
        if positive.numel() == 0:
            return torch.zeros(len(self.savings))
        return (raw / positive.mean()).float()

    def to_dict(self) -> dict[str, object]:
        return {
            "unit": self.unit,
            "source": self.source,
            "blocks": [
                {"name": n, "spec": s, "saving": v, "weight": round(float(w), 6)}
                for n, s, v, w in zip(self.names, self.specs, self.savings, self.weights.tolist())
            ],
        }


def mac_savings(model: nn.Module, input_size: tuple[int, int] | None = None) -> BlockWeights:
    """Per-block MAC saving of linearising each block, one image: the block as built minus the block as the planner
    deploys it on MACs (`dsprof.lut.macs.MacPrices`: merged where that lowers its MACs, else unmerged, which saves 0)."""
    size = input_size or input_size_of(model)
    blocks = find_blocks(model, size)
    macs = MacPrices(blocks)
    savings = [float(macs.linearized(i).saving_s) for i in range(len(blocks))]
    return BlockWeights(tuple(b.name for b in blocks), tuple(b.spec.to_str() for b in blocks), "MACs",
                        saving_macs=tuple(savings))


def lut_savings(
    model: nn.Module,
    lut,
    device_key=None,
    *,
    input_size: tuple[int, int] | None = None,
    **filters: object,
) -> BlockWeights:
    """Per-block latency saving of linearising each block (seconds: its original entry minus the block as
    deployed then -- merged where that is cheaper, `dsprof.lut.prices.Prices.linearized`), priced by
    `dsprof.lut.prices.Prices` as `predict_latency` prices it, from ``lut`` (a `LUT` or its path) for the context ``device_key`` (or the one
    ``filters`` leave). ``input_size`` is the resolution the LUT was measured at (it fixes the blocks' specs),
    which may differ from the training resolution. A block the LUT lacks raises, naming it and what to measure."""
    if not isinstance(lut, LUT):
        lut = LUT.load(lut)
    key = lut.resolve(device_key, **filters)
    blocks = find_blocks(model, input_size or input_size_of(model))
    prices = Prices.read(lut, key, "", blocks, method="isolated")  # block entries only: no model label needed
    savings = [prices.linearized(i).saving_s for i in range(len(blocks))]
    specs = [b.spec.to_str() for b in blocks]
    missing = [f"{b.name}: {s}" for b, s, v in zip(blocks, specs, savings) if v != v]
    if missing:
        raise LUTMissError(
            f"the LUT {lut.source} has no original+merged latency for {len(missing)} block(s) in context {key}:\n  "
            + "\n  ".join(missing)
            + f"\nMeasure the model at this resolution on that device ({HINT}), "
            "pass the resolution the LUT was measured at (`pricing=Pricing(resolution=)`), or search without a LUT "
            "(MAC weights)",
            hint=MeasureHint(key, _model_args(model, input_size)),
        )
    return BlockWeights(tuple(b.name for b in blocks), tuple(specs), f"{lut.source} {key}", saving_s=tuple(savings))


def block_weights(
    model: nn.Module,
    *,
    lut=None,
    device_key=None,
    input_size: tuple[int, int] | None = None,
    **filters: object,
) -> BlockWeights:
    """`lut_savings` when a LUT is given, else `mac_savings`."""
    if lut is not None:
        return lut_savings(model, lut, device_key, input_size=input_size, **filters)
    return mac_savings(model, input_size)


def latency_penalty(scores: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """sum_b w_b * |m_b|: the latency-weighted L1 decay of the gate scores."""
    return (weights.to(scores.device, scores.dtype) * scores.abs()).sum()


def _model_args(model: nn.Module, input_size: tuple[int, int] | None) -> str:
    """The API argument that builds ``model`` (built by `get_model`) at its resolution (`model_args`)."""
    name, options = model_identity(model) or ("PATH.py:FACTORY", None)  # a module from elsewhere: its file
    return model_args(name, options, (input_size or input_size_of(model))[0])
