"""What a search method receives and returns: the contract behind `search(method=...)`.

A method is a function ``SearchRequest -> SearchResult`` in a module of its own, named in
`registry.SEARCHES`. The request carries every option of `dsprof search`; each method reads the ones it
uses (the differentiable search its score options, the importance search its ``proxy`` with its settings and
the fine-tune ``config``, the random search ``config.seed``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from torch import nn

from ..constants import DEFAULT_MAX_SPAN
from ..errors import UsageError
from ..io import atomic_write_text
from ..models import ModelRef
from ..records.plan import Plan
from .gates import resolve_k
from .objective import BlockWeights, block_weights
from .proxies import ProxySettings
from .loop import TrainConfig
from .settings import GateSettings

__all__ = ["SearchMethod", "SearchRequest", "SearchResult", "decay_weights", "write_plan"]


@dataclass(frozen=True)
class SearchRequest:
    """The options of one search (`search`'s arguments, resolved). ``ref``: the model to train as one reference,
    with its options at the training resolution, and ``weights``: the weights it starts from (both from
    `dsprof.search.build.training_model`, which says why the weights travel beside the reference)."""

    ref: ModelRef
    keep: int | float | None  # blocks that keep their activations; None: a budget chooses (the planner)
    data: str | Path
    weights: bool | str | Path | None = None
    lut: str | Path | None = None
    device_key: str | None = None
    lut_resolution: int | None = None
    gates: GateSettings = GateSettings()  # the differentiable search's scores and their latency weight
    config: TrainConfig = TrainConfig()
    out: str | Path | None = None
    checkpoint: str | Path | None = None
    resume: bool = False
    device: str = "auto"
    name: str | None = None
    weights_out: str | Path | None = None
    stop_after_epochs: int | None = None
    budget_ms: float | None = None  # predicted latency per batch (the LUT's), instead of keep
    speedup: float | None = None  # predicted speed-up over the original, instead of keep
    max_span: int = DEFAULT_MAX_SPAN  # the planner's spans: consecutive linear blocks merged as one (1: none)
    method: str = "importance"
    proxy: str | None = None  # the importance search's proxy (`proxies.PROXIES`); None: `proxies.DEFAULT_PROXY`
    proxy_settings: ProxySettings | None = None  # None: the defaults with config's seed and batch size

    @property
    def model(self) -> str | ModelRef:
        """What the search's plans record as their model: the registered name, or the reference of a module passed
        as an object (its ``str`` is its name, which a plan takes)."""
        return self.ref if self.ref.is_module else self.ref.entry

    @property
    def options(self) -> dict[str, Any]:
        """The model's build options (``width``, ``depths``...), as its plans record them."""
        return dict(self.ref.options)

    @property
    def checkpoint_path(self) -> Path | None:
        """Where the search keeps what it can resume from: ``checkpoint``, else the plan file with ``.ckpt.pt``
        (None without either)."""
        if self.checkpoint is not None:
            return Path(self.checkpoint)
        return Path(f"{self.out}.ckpt.pt") if self.out is not None else None

    @property
    def resolution(self) -> int:
        """The input height and width (pixels) the model is trained at."""
        return self.ref.input_size[0]

    def required_keep(self) -> int | float:
        """``keep``, for a method that needs it given."""
        if self.keep is None or self.budget_ms is not None or self.speedup is not None:
            raise UsageError(f"`method={self.method!r}` takes `keep=`; a latency budget "
                             "(`budget=LatencyBudget(budget_ms=, speedup=)`) is "
                             "chosen through the planner: `method='importance'` or `method='planner'`, with `lut=`")
        return self.keep

    def k(self, n_blocks: int) -> int:
        """The number of blocks that keep their activations (``keep`` resolved for ``n_blocks``: the blocks k counts,
        those with a removable activation, `dsprof.merging.partial.with_acts`, as the planner counts them), refused
        where nothing is left to choose (none or all of them)."""
        keep = self.required_keep()
        k = resolve_k(keep, n_blocks, "blocks with a removable activation")
        if k in (0, n_blocks):
            every = "no block keeps" if k == 0 else "every block keeps"
            raise UsageError(f"`keep={keep}` of {n_blocks} blocks with a removable activation: {every} its "
                             f"activations, so there is nothing to choose; give `keep=1..{n_blocks - 1}`")
        return k


@dataclass
class SearchResult:
    """The plan a search wrote and what led to it. ``counted``: per block, whether the search's k counts it (it has
    a removable activation: `dsprof.merging.partial.with_acts`); None: every block."""

    plan: Plan
    scores: list[float]
    ranking: list[int]
    history: list[dict[str, Any]] = field(default_factory=list)
    out: Path | None = None
    counted: tuple[bool, ...] | None = None

    @property
    def k(self) -> int:
        """The blocks that keep their activations, of those k counts (``counted``)."""
        counted = self.counted or (True,) * len(self.plan.keep)
        return sum(kept for kept, c in zip(self.plan.keep, counted) if c)


SearchMethod = Callable[[SearchRequest], SearchResult]


def write_plan(plan: Plan, out: str | Path | None) -> Path | None:
    """Write ``plan`` to ``out`` (atomically; nothing when None); the path written."""
    if out is None:
        return None
    atomic_write_text(out, plan.to_json())
    return Path(out)


def decay_weights(base: nn.Module, request: SearchRequest) -> BlockWeights:
    """The blocks' decay weights for ``request``: LUT latency savings (``request.lut``, its entries at
    ``lut_resolution``) or MAC savings at the training resolution."""
    size = request.lut_resolution or request.resolution
    return block_weights(base, lut=request.lut, device_key=request.device_key, input_size=(size, size))
