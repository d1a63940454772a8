"""The ways of choosing a plan, by name, and `search(method=...)` that runs one.

Each method is a function ``SearchRequest -> SearchResult`` (`method`) in a module of its own; a new
method is one new module and one line in `SEARCHES` (and its name in `dsprof.names.SEARCH_METHODS`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..constants import DEFAULT_MAX_SPAN
from ..errors import UsageError, look_up
from ..models import ModelRef
from ..names import DEFAULT_SEARCH_METHOD, SEARCH_METHODS
from ..planning.front import check_budget
from .build import default_training_resolution
from .differentiable import search_differentiable
from .importance import search_importance
from .method import SearchMethod, SearchRequest, SearchResult
from .planned import search_planner
from .proxies import ProxySettings
from .random_plan import search_random
from .loop import TrainConfig

__all__ = ["SEARCHES", "search", "search_method"]

#: Each of `dsprof.names.SEARCH_METHODS` and the function that runs it.
SEARCHES: dict[str, SearchMethod] = dict(zip(SEARCH_METHODS, (search_importance, search_differentiable, search_planner,
                                                              search_random)))


def search_method(name: str) -> SearchMethod:
    """The search method called ``name``; an unknown name lists the methods there are."""
    return look_up(SEARCHES, name, "search method")


def search(
    model: str = "mobilenet_v2",
    *,
    keep: int | float | None = None,
    data: str | Path = "digits",
    options: dict[str, Any] | None = None,
    resolution: int | None = None,
    weights: bool | str | Path | None = None,
    method: str = DEFAULT_SEARCH_METHOD,
    lut: str | Path | None = None,
    device_key: str | None = None,
    lut_resolution: int | None = None,
    lam: float = 1e-3,
    score_lr: float = 0.01,
    score_init: float = 1.0,
    score_normalize: bool = False,
    score_bound: float | None = None,
    anneal_epochs: float = 0.0,
    config: TrainConfig = TrainConfig(),
    out: str | Path | None = None,
    checkpoint: str | Path | None = None,
    resume: bool = False,
    device: str = "auto",
    name: str | None = None,
    weights_out: str | Path | None = None,
    stop_after_epochs: int | None = None,
    budget_ms: float | None = None,
    speedup: float | None = None,
    max_span: int = DEFAULT_MAX_SPAN,
    proxy: str | None = None,
    proxy_settings: ProxySettings | None = None,
) -> SearchResult:
    """Search which blocks keep their activations (``keep``: count or fraction) and write the plan to ``out``.

    ``method="importance"`` (the default: the one the ground truth supports, docs/search.md) scores each
    block's importance with ``proxy`` (`proxies.PROXIES`, settings ``proxy_settings``; default
    `proxies.DEFAULT_PROXY`; ``"finetune"``: the accuracy lost when it alone is linearised and fine-tuned
    ``config.epochs``) and chooses through the planner: with ``lut`` the plan of least summed importance for ``keep`` (or
    the least loss within ``budget_ms`` per batch or ``speedup`` over the original, as the LUT predicts
    them), its merges and spans (up to ``max_span`` blocks) the LUT's; without a LUT the k most important
    blocks keep their activations. ``method="differentiable"`` (paper Sec. 4.2) trains weights and gate
    scores on ``data`` for ``config.epochs`` with task loss + ``lam`` * sum_b w_b |m_b| (w_b: LUT latency
    saving for ``device_key``, measured at ``lut_resolution``, or MAC saving); ``score_normalize``
    divides the scores' straight-through gradient by its largest entry, ``score_bound`` keeps the scores
    in [-bound, bound], ``anneal_epochs`` lowers the number of kept blocks from all to k over that many
    epochs. ``method="planner"``: the LUT's fastest plan for ``keep`` (or the most activations within
    the budget), no training. ``method="random"`` draws k blocks with seed ``config.seed``. `SEARCHES`
    lists them all.
    ``resolution``: None for `default_training_resolution` (32 px on 'digits' and 'shapes').
    The differentiable search rewrites the plan after every epoch, with a checkpoint (``checkpoint``,
    default ``OUT.ckpt.pt``) that ``resume`` continues from; ``stop_after_epochs``: leave after that many
    epochs of this call. ``weights_out``: also save the searched weights (original architecture).
    """
    chosen = search_method(method)
    check_budget(budget_ms, speedup)  # before any training
    if resume and method != "differentiable":  # the only method that trains for epochs and checkpoints them
        raise UsageError(f"`resume=True` continues a differentiable search from its checkpoint; `method={method!r}` "
                         "keeps none: run it again without `resume=True`, or resume with `method='differentiable'`")
    if proxy is not None and method != "importance":
        raise UsageError(f"`proxy=` scores blocks for `method='importance'`, not {method}: drop it, or use "
                         "`method='importance'`")
    if not isinstance(model, str):  # a module passed as an object (or a `ModelRef`): the one reference, resolved here
        model = ModelRef.of(model, options=options)
        options = model.options
    if resolution is None:
        resolution = default_training_resolution(model, data)
    return chosen(SearchRequest(
        model=model, keep=keep, data=data, options=dict(options or {}), resolution=resolution, weights=weights,
        lut=lut, device_key=device_key, lut_resolution=lut_resolution, lam=lam, score_lr=score_lr,
        score_init=score_init, score_normalize=score_normalize, score_bound=score_bound, anneal_epochs=anneal_epochs,
        config=config, out=out, checkpoint=checkpoint, resume=resume, device=device, name=name,
        weights_out=weights_out, stop_after_epochs=stop_after_epochs, budget_ms=budget_ms, speedup=speedup,
        max_span=max_span, method=method, proxy=proxy, proxy_settings=proxy_settings,
    ))
