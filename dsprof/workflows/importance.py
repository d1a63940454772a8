"""`dsprof importance` as a Python function: each block's importance (what it loses without its activations) by a
proxy (`dsprof.search.proxies`), written as the file `dsprof plan --importance` takes
(`dsprof.records.importance`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from torch import nn

from .._moved import moved_keywords
from ..constants import DEFAULT_FINETUNE
from ..io import check_output_path
from ..models import ModelRef
from ..names import DEFAULT_PROXY
from ..search.build import training_model
from ..search.importance import importance_record
from ..records.importance import write_importance
from ..search.proxies import ProxyScores, ProxySettings, proxy_input, score_blocks
from ..search.loop import seed_all
from ..search.settings import TrainConfig
from ..search.training import setup_runtime, teardown_runtime

__all__ = ["Importance", "importance"]

#: The keywords of before (deprecated): each old keyword -> (the parameter that holds it now, its object, field).
_OLD_KEYWORDS = {k: ("model", "ModelRef.of", k) for k in ("options", "resolution", "weights")}


@dataclass(frozen=True)
class Importance:
    """What `importance` found: the proxy's scores (``scores.scores``, one per block; ``scores.ranking``, most
    important first), the importance file's record, and the file (None where none was written)."""

    scores: ProxyScores
    record: dict[str, Any]
    path: Path | None = None

    def text(self, words: Callable[[str], str] = str) -> str:
        """What `dsprof importance` prints: each block's importance, the ranking, the proxy's time and the file; in
        the caller's words (``words``: `dsprof.cli.flags.command_line_text` gives the command line's options where
        this names parameters)."""
        blocks, scored = self.record["model"]["blocks"], self.scores
        width = max(map(len, blocks), default=5)
        lines = [f"{'block':<{width + 4}}  importance ({scored.unit})"]
        lines += [f"{i:>2}  {name:<{width}}  {value:.6g}" for i, (name, value) in enumerate(zip(blocks, scored.scores))]
        lines += ["ranking (most important first): " + " ".join(map(str, scored.ranking)),
                  f"{scored.proxy}: {scored.seconds:.2f} s on {self.record['cost']['device']}"]
        if self.path is not None:
            lines.append(words(f"wrote {self.path} (for `dsprof.plan(importance=)`)"))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()


def importance(
    model: str | nn.Module | ModelRef = "mobilenet_v2",
    *,
    proxy: str = DEFAULT_PROXY,
    data: str | Path = "digits",
    out: str | Path | None = None,
    settings: ProxySettings | None = None,
    config: TrainConfig | None = None,
    device: str = "auto",
    **old: Any,
) -> Importance:
    """`dsprof importance`: every block's importance of ``model`` (a registered name, a ``path.py:factory`` file,
    an ``nn.Module``, scored on a copy, or a `ModelRef` with its options, resolution and weights: resolution None,
    `default_training_resolution`) on ``data`` by ``proxy``, written to ``out`` as the file `dsprof.plan(importance=)`
    takes (none: not written). ``config``: the full measurement's fine-tunes (``proxy="finetune"``).
    Returns the scores, the file's record and where it went (`Importance`). The keywords of before (``options=``,
    ``resolution=``, ``weights=``) still work for a release, with a `DeprecationWarning`."""
    moved = moved_keywords("dsprof.importance", old, _OLD_KEYWORDS)
    if out is not None:
        check_output_path(out, "the importance file ")
    ref, weights = training_model(model, data, **moved.get("model", {}))
    config = config or TrainConfig(**DEFAULT_FINETUNE)
    rt = setup_runtime(device, config.threads)
    try:
        seed_all(config.seed)
        inp = proxy_input(ref, proxy, weights=weights, data=data, settings=settings, config=config, device=rt.device)
        scored = score_blocks(proxy, inp)
        record = importance_record(scored, inp)
        if out is not None and rt.is_main:
            write_importance(out, record)
        return Importance(scored, record, Path(out) if out is not None else None)
    finally:
        teardown_runtime(rt)
