"""The random-search baseline: `search(method="random")` draws k blocks with ``config.seed``."""

from __future__ import annotations

from ..records.plan import Plan
from .baselines import random_keep
from .build import block_count
from .method import SearchRequest, SearchResult, write_plan

__all__ = ["search_random"]


def search_random(req: SearchRequest) -> SearchResult:
    """A plan that keeps k blocks drawn with seed ``req.config.seed`` (no training)."""
    seed = req.config.seed
    n = block_count(req.ref)
    k = req.k(n)
    plan = Plan(
        req.model, random_keep(n, k, seed), req.options, name=req.name or f"random-k{k}-s{seed}",
        source=f"dsprof search, method random (seed {seed})", search={"method": "random", "seed": seed, "k": k},
    )
    return SearchResult(plan, [], [], [], write_plan(plan, req.out))
