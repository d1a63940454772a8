"""The ways of choosing a plan, by name, and `search(method=...)` that runs one.

Each method is a function ``SearchRequest -> SearchResult`` (`method`) in a module of its own; a new
method is one new module and one line in `SEARCHES` (and its name in `dsprof.names.SEARCH_METHODS`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from .._moved import as_request, moved_keywords
from ..constants import DEFAULT_MAX_SPAN
from ..lut.choice import Pricing
from ..errors import UsageError, look_up
from ..fields import FieldError, check_text
from ..names import DEFAULT_PROXY, DEFAULT_SEARCH_METHOD, SEARCH_METHODS
from ..planning.front import LatencyBudget
from .build import training_model
from .differentiable import search_differentiable
from .importance import search_importance
from .method import SearchMethod, SearchRequest, SearchResult
from .planned import search_planner
from .proxies import ProxySettings
from .settings import GateSettings, TrainRun
from .random_plan import search_random
from .loop import TrainConfig

__all__ = ["SEARCHES", "search", "search_method"]

#: Each of `dsprof.names.SEARCH_METHODS` and the function that runs it.
SEARCHES: dict[str, SearchMethod] = dict(zip(SEARCH_METHODS, (search_importance, search_differentiable, search_planner,
                                                              search_random)))


def search_method(name: str) -> SearchMethod:
    """The search method called ``name``; an unknown name lists the methods there are."""
    return look_up(SEARCHES, name, "search method")


#: The keywords of before (deprecated): each old keyword -> (the parameter that holds it now, its object, field).
_OLD_KEYWORDS = {
    **{k: ("model", "ModelRef.of", k) for k in ("options", "resolution", "weights")},
    **{k: ("budget", "LatencyBudget", k) for k in ("budget_ms", "speedup")},
    "device_key": ("pricing", "Pricing", "device_key"), "lut_resolution": ("pricing", "Pricing", "resolution"),
    "max_span": ("pricing", "Pricing", "max_span"),
    **{k: ("settings", "GateSettings", k) for k in ("lam", "score_lr", "score_init", "score_normalize", "score_bound",
                                                     "anneal_epochs")},
    "proxy_settings": ("settings", "", "proxy_settings"),
    **{k: ("run", "TrainRun", k) for k in ("device", "checkpoint", "resume", "stop_after_epochs", "weights_out")},
}


def search(
    model: Any = "mobilenet_v2",
    *,
    keep: int | float | None = None,
    budget: LatencyBudget | None = None,
    data: str | Path = "digits",
    method: str = DEFAULT_SEARCH_METHOD,
    lut: Any = None,
    pricing: Pricing | None = None,
    config: TrainConfig = TrainConfig(),
    settings: GateSettings | ProxySettings | None = None,
    proxy: str | None = None,
    out: str | Path | None = None,
    name: str | None = None,
    run: TrainRun | None = None,
    **old: Any,
) -> SearchResult:
    """Search which blocks of ``model`` keep their activations (``keep``: count or fraction) and write the plan to
    ``out`` (named ``name``; default after the method and k).

    ``model``: a registered name, a model file, an ``nn.Module`` or a `dsprof.models.ModelRef` (with its options,
    resolution and weights; resolution None: `default_training_resolution`, 32 px on 'digits' and 'shapes').
    ``method="importance"`` (the default: the one the ground truth supports, docs/search.md) scores each
    block's importance with ``proxy`` (`proxies.PROXIES`, ``settings`` a `ProxySettings`; default
    `proxies.DEFAULT_PROXY`; ``"finetune"``: the accuracy lost when it alone is linearised and fine-tuned
    ``config.epochs``) and chooses through the planner: with ``lut`` the plan of least summed importance for ``keep``
    (or the least loss within ``budget``, a `dsprof.planning.LatencyBudget`: ``budget_ms`` per batch or ``speedup``
    over the original, as the LUT predicts them), its merges and spans (up to ``pricing.max_span`` blocks, default
    `DEFAULT_MAX_SPAN`) the LUT's; without a LUT the k most important blocks keep their activations.
    ``method="differentiable"`` (paper Sec. 4.2) trains weights and gate scores on ``data`` for ``config.epochs``
    (``settings`` a `GateSettings`: the decay ``lam`` weighted by each block's LUT latency saving, or MAC saving,
    and the scores' options). ``lut`` is priced as ``pricing`` says (a `dsprof.lut.Pricing`: its context
    ``device_key``, and ``resolution``, the input size its entries were measured at where it is not the training
    one). ``method="planner"``: the LUT's fastest plan for ``keep`` (or the most activations within the budget), no
    training. ``method="random"`` draws k blocks with seed ``config.seed``. `SEARCHES` lists them all.
    ``run`` (a `TrainRun`): the device; the differentiable search rewrites the plan after every epoch, with a
    checkpoint (``run.checkpoint``, default ``OUT.ckpt.pt``) that ``run.resume`` continues from;
    ``run.stop_after_epochs``: leave after that many epochs of this call; ``run.weights_out``: also save the searched
    weights (original architecture). The keywords of before (``options=``, ``resolution=``, ``weights=``;
    ``budget_ms=``, ``speedup=``; ``device_key=``, ``lut_resolution=``, ``max_span=``; ``lam=``, ``score_lr=``,
    ``score_init=``, ``score_normalize=``, ``score_bound=``, ``anneal_epochs=``, ``proxy_settings=``; ``device=``,
    ``checkpoint=``, ``resume=``, ``stop_after_epochs=``, ``weights_out=``) still work for a release, with a
    `DeprecationWarning`.
    """
    moved = moved_keywords("dsprof.search.search", old, _OLD_KEYWORDS)
    budget = as_request(budget, LatencyBudget, "budget", moved)
    pricing = as_request(pricing, Pricing, "pricing", moved)
    run = as_request(run, TrainRun, "run", moved)
    scores = moved.get("settings", {})
    settings = scores.pop("proxy_settings", settings)
    if scores:  # the gate scores' keywords of before
        settings = replace(settings if isinstance(settings, GateSettings) else GateSettings(), **scores)
    gates = settings if isinstance(settings, GateSettings) else GateSettings()
    proxy_settings = settings if isinstance(settings, ProxySettings) else None
    if settings is not None and not isinstance(settings, (GateSettings, ProxySettings)):
        raise UsageError(f"`settings=` is a GateSettings (method='differentiable') or a ProxySettings "
                         f"(method='importance'), got {type(settings).__name__}")
    try:  # refused here, not after the search, by the rule the plan it writes is held to
        check_text(name, "name", none=True)
    except FieldError as exc:
        raise UsageError(f"`name=` cannot name a plan: {exc}") from None
    chosen = search_method(method)
    budget_ms, speedup = budget.budget_ms, budget.speedup
    keeps = method == "differentiable" or (method == "importance" and proxy == "finetune")  # a checkpoint
    if run.resume and not keeps:
        raise UsageError(f"`run=TrainRun(resume=True)` continues a differentiable search, or an importance search's "
                         f"fine-tunes (`proxy='finetune'`), from its checkpoint; `method={method!r}`"
                         f"{f' with `proxy={proxy or DEFAULT_PROXY!r}`' if method == 'importance' else ''} keeps none: run it again "
                         "without it")
    if proxy is not None and method != "importance":
        raise UsageError(f"`proxy=` scores blocks for `method='importance'`, not {method}: drop it, or use "
                         "`method='importance'`")
    ref, weights = training_model(model, data, **moved.get("model", {}))
    return chosen(SearchRequest(
        ref=ref, keep=keep, data=data, weights=weights,
        lut=lut, device_key=pricing.device_key, lut_resolution=pricing.resolution, gates=gates,
        config=config, out=out,
        checkpoint=run.checkpoint, resume=run.resume, device=run.device, name=name, weights_out=run.weights_out,
        stop_after_epochs=run.stop_after_epochs, budget_ms=budget_ms, speedup=speedup,
        max_span=pricing.max_span if pricing.max_span is not None else DEFAULT_MAX_SPAN, method=method, proxy=proxy,
        proxy_settings=proxy_settings,
    ))
