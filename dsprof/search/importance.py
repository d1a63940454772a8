"""Importance search: score every block's activations with a proxy (or the full measurement), plan with it.

The differentiable search (paper Sec. 4.2) estimates each activation's importance from straight-through
gradients while the weights move. This search scores it instead, with one of `proxies.PROXIES`: by default the
cheapest proxy that kept the planner's plan in the top decile on both stored ground truths (`DEFAULT_PROXY`,
docs/search.md), or ``finetune``, the full measurement (`measured.measure_importance`: n + 1 short fine-tunes).

`search_importance` (`search(method="importance")`) hands the importances to the planner (`planned`,
`dsprof.plan`): with a LUT, the plan of least summed importance for k blocks with activations (the
fastest among equals, its merges and spans chosen by the LUT), or for a latency budget the least loss
within it; without a LUT, the k blocks of highest importance (`importance_keep`). k counts the blocks with a
removable activation (`dsprof.merging.partial.with_acts`), as the planner's k does.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Sequence

import torch

from ..errors import UsageError
from ..records.plan import Plan
from .gates import counted_flags
from .measured import BlockImportance, measure_importance  # noqa: F401  (importable from here, as before)
from .method import SearchRequest, SearchResult, write_plan
from .planned import choose_point, planned, planner_front
from .proxies import DEFAULT_PROXY, ProxyInput, ProxyScores, proxy_input, score_blocks
from .loop import seed_all
from .training import setup_runtime, teardown_runtime

__all__ = ["BlockImportance", "importance_info", "importance_keep", "importance_record", "measure_importance",
           "search_importance"]


def importance_keep(importance: Sequence[float], k: int, weights: Sequence[float] | None = None,
                    lam: float = 0.0, counted: Sequence[bool] | None = None) -> tuple[int, ...]:
    """The keep list of the ``k`` blocks with the highest ``importance_b - lam * weights_b`` (ties: the
    earlier block first), chosen among the ``counted`` blocks (None: all; the search passes
    `dsprof.merging.partial.with_acts`: those with a removable activation, which k counts). A block not counted is 0
    (linearised: it loses nothing, and the merge rule merges it or not by price)."""
    n = len(importance)
    places = [i for i, c in enumerate(counted_flags(counted, n)) if c]
    if not 0 <= k <= len(places):
        raise UsageError(f"k={k} must lie in 0..{len(places)}")
    w = list(weights) if weights is not None else [0.0] * n
    if len(w) != n:
        raise UsageError(f"{len(w)} weights for {n} blocks")
    merit = [float(importance[i]) - lam * float(w[i]) for i in range(n)]
    chosen = set(sorted(places, key=lambda i: (-merit[i], i))[:k])
    return tuple(int(i in chosen) for i in range(n))


def importance_info(scored: ProxyScores) -> dict:
    """What a plan's ``search`` field records of the importance it was chosen by: the scores, the ranking, the
    proxy with its settings and unit, its cost (wall seconds) and the original's figures."""
    return {"scores": [round(v, 6) for v in scored.scores], "ranking": scored.ranking, "proxy": scored.proxy,
            "proxy_settings": scored.settings, "unit": scored.unit, "seconds": scored.seconds, "base": scored.base}


def search_importance(req: SearchRequest) -> SearchResult:
    """Score each block with ``req.proxy`` (default `DEFAULT_PROXY`; ``finetune``: fine-tunes of ``req.config``,
    seed ``config.seed``) and choose the plan through the planner: with ``req.lut`` the front plan of least
    summed importance for ``keep`` (or within ``budget_ms`` / ``speedup``), its merges and spans the LUT's;
    without a LUT the k blocks of highest importance keep their activations (what the planner keeps at k
    whatever the latencies, ties aside), merging left to `dsprof merge`."""
    config = req.config
    proxy = req.proxy or DEFAULT_PROXY
    rt = setup_runtime(req.device, req.config.threads)
    try:
        # what could fail after the scoring fails before it (before the data is read): the LUT, its entries and the
        # budget; then k, once the model built for the data shows its blocks
        if req.lut is not None or req.keep is None:
            choose_point(planner_front(req), req)
        seed_all(config.seed)
        inp = proxy_input(req.ref, proxy, weights=req.weights, data=req.data, settings=req.proxy_settings,
                          config=config, device=rt.device, progress=req.checkpoint_path if proxy == "finetune" else None,
                          resume=req.resume)  # the full measurement keeps each fine-tune in the checkpoint
        n = sum(inp.counted)  # k counts the blocks with a removable activation, as the planner's k
        if req.lut is None:
            req.k(n)
        scored = score_blocks(proxy, inp)
        drops = list(scored.scores)
        info = importance_info(scored)
        if req.lut is not None:
            front = planner_front(req, drops)
            plan = planned(req, front, choose_point(front, req), info)
        else:
            k = req.k(n)
            plan = Plan(req.model, importance_keep(drops, k, counted=inp.counted), req.options,
                        name=req.name or f"importance-k{k}",
                        source="dsprof search, method importance (no LUT: top k)",
                        search={"method": "importance", "k": k, **info})
        rt.log(f"importance search ({proxy}, {scored.seconds:.1f} s): keep {''.join(map(str, plan.keep))} "
               f"ranking {' '.join(map(str, scored.ranking))}")
        if rt.is_main:
            write_plan(plan, req.out)
        return SearchResult(plan, drops, scored.ranking, [], Path(req.out) if req.out is not None else None,
                            inp.counted)
    finally:
        teardown_runtime(rt)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def importance_record(scored: ProxyScores, inp: ProxyInput) -> dict[str, Any]:
    """The importance file's fields (`importance_file`) for ``scored``, measured on ``inp``: the model's
    identity (name, options, block names, classes, weights file and its SHA-256), the data, the proxy with its
    settings, its cost and the original's figures."""
    weights = inp.source.get("weights")
    model = {"name": inp.name, "options": inp.options, "blocks": inp.blocks, "num_classes": _classes(inp.model),
             "weights": weights}
    if weights is not None and Path(weights).is_file():
        model["weights_sha256"] = _sha256(Path(weights))
    return {
        "model": model,
        "data": {"name": inp.source.get("data"), "resolution": inp.resolution, "num_classes": inp.data.num_classes},
        "proxy": {"name": scored.proxy, "unit": scored.unit, "settings": scored.settings},
        "cost": {"seconds": scored.seconds, "device": str(inp.device), "threads": torch.get_num_threads(),
                 "torch": torch.__version__},
        "base": scored.base,
        "importance": list(scored.scores),
        "ranking": scored.ranking,
    }


def _classes(model) -> int | None:
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    return linears[-1].out_features if linears else None
