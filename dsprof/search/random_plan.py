"""The random-search baseline: `search(method="random")` draws k blocks with ``config.seed`` (of the blocks with a
removable activation, which k counts)."""

from __future__ import annotations

from ..records.plan import Plan
from .baselines import random_keep
from .build import block_acts
from .method import SearchRequest, SearchResult, write_plan

__all__ = ["search_random"]


def search_random(req: SearchRequest) -> SearchResult:
    """A plan that keeps k blocks drawn with seed ``req.config.seed`` (no training)."""
    seed = req.config.seed
    counted = block_acts(req.ref)
    k = req.k(sum(counted))
    plan = Plan(
        req.model, random_keep(len(counted), k, seed, counted), req.options, name=req.name or f"random-k{k}-s{seed}",
        source=f"dsprof search, method random (seed {seed})", search={"method": "random", "seed": seed, "k": k},
    )
    return SearchResult(plan, [], [], [], write_plan(plan, req.out), counted)
