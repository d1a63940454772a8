"""`dsprof importance` as a Python function: each block's importance (what it loses without its activations) by a
proxy (`dsprof.search.proxies`), written as the file `dsprof plan --importance` takes
(`dsprof.records.importance`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

from ..constants import DEFAULT_FINETUNE
from ..io import check_output_path
from ..models import ModelRef
from ..names import DEFAULT_PROXY
from ..search.build import default_training_resolution
from ..search.importance import importance_record
from ..records.importance import write_importance
from ..search.proxies import ProxyScores, ProxySettings, proxy_input, score_blocks
from ..search.loop import seed_all
from ..search.settings import TrainConfig
from ..search.training import setup_runtime, teardown_runtime

__all__ = ["Importance", "importance"]


@dataclass(frozen=True)
class Importance:
    """What `importance` found: the proxy's scores (``scores.scores``, one per block; ``scores.ranking``, most
    important first), the importance file's record, and the file (None where none was written)."""

    scores: ProxyScores
    record: dict[str, Any]
    path: Path | None = None


def importance(
    model: str | nn.Module | ModelRef = "mobilenet_v2",
    *,
    proxy: str = DEFAULT_PROXY,
    data: str | Path = "digits",
    out: str | Path | None = None,
    options: dict[str, Any] | None = None,
    resolution: int | None = None,
    weights: bool | str | Path | None = None,
    settings: ProxySettings | None = None,
    config: TrainConfig | None = None,
    device: str = "auto",
) -> Importance:
    """`dsprof importance`: every block's importance of ``model`` (a registered name, a ``path.py:factory`` file,
    or an ``nn.Module``, scored on a copy; from ``weights``) on ``data`` by ``proxy``,
    written to ``out`` as the file `dsprof plan --importance` takes (none: not written). ``resolution`` None:
    `default_training_resolution`. ``config``: the full measurement's fine-tunes (``proxy="finetune"``).
    Returns the scores, the file's record and where it went (`Importance`)."""
    if out is not None:
        check_output_path(out, "the importance file ")
    if not isinstance(model, str):  # a module passed as an object (or a `ModelRef`): scored on a copy
        model = ModelRef.of(model, options=options)
        options = model.options
    if resolution is None:
        resolution = default_training_resolution(model, data)
    config = config or TrainConfig(**DEFAULT_FINETUNE)
    rt = setup_runtime(device, config.threads)
    try:
        seed_all(config.seed)
        inp = proxy_input(model, proxy, options=options, weights=weights, data=data, resolution=resolution,
                          settings=settings, config=config, device=rt.device)
        scored = score_blocks(proxy, inp)
        record = importance_record(scored, inp)
        if out is not None and rt.is_main:
            write_importance(out, record)
        return Importance(scored, record, Path(out) if out is not None else None)
    finally:
        teardown_runtime(rt)
