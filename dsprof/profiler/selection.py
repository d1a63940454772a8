"""What a measurement run times, as one object (`Workloads`): the blocks chosen, the variants of each, the whole
model's variants, the blocks timed inside the running model and the spans, as `dsprof.measure` and `dsprof.export`
take it. Plain data: no PyTorch (the command line builds it from its flags at start-up)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..errors import UsageError
from ..names import DEFAULT_MODEL_VARIANTS
from ..runtimes import default_block_variants

__all__ = ["Workloads", "comma_list"]


def comma_list(text: str) -> tuple[str, ...]:
    """The names of a comma-separated list (``"original, merged"``), blanks dropped."""
    return tuple(v.strip() for v in text.split(",") if v.strip())


@dataclass(frozen=True)
class Workloads:
    """What a run times. ``variants``: each chosen block as built and as its replacements (``original``, ``merged``,
    ``flops_matched``, ``linear``: `dsprof.names.BLOCK_VARIANTS`; None: the backend's, `for_backend`);
    ``model_variants``: the whole model's (`dsprof.names.MODEL_VARIANTS`); ``blocks``: fnmatch pattern(s) of the
    block names to time (None: no block); ``in_situ``: each chosen block also timed inside the running model,
    ``merged`` or ``linear``; ``spans``: also the one convolution each run of 2..``spans`` consecutive blocks merges
    into (0: none), and, with a partial variant (``fused-expand``, ``fused-project``), each crossing span of
    2..``spans`` blocks as it deploys; ``calibrate``: the run ends with the groups it plans from its own records
    (`dsprof.workflows.calibrate`: the front's pieces inside the model, then the calibration group). A string where
    a tuple of names goes is read as the command line reads it: ``"original,merged"``."""

    variants: tuple[str, ...] | None = None
    model_variants: tuple[str, ...] = DEFAULT_MODEL_VARIANTS
    blocks: str | tuple[str, ...] | None = "*"
    in_situ: tuple[str, ...] = ()
    spans: int = 0
    calibrate: bool = False

    def __post_init__(self) -> None:
        for name in ("variants", "model_variants", "in_situ"):
            value = getattr(self, name)
            if isinstance(value, str):  # "original" or "original,merged", as the command line takes them
                value = comma_list(value)
            if value is not None:
                object.__setattr__(self, name, tuple(value))
        if self.blocks is not None and not isinstance(self.blocks, str):
            object.__setattr__(self, "blocks", tuple(self.blocks))
        if isinstance(self.spans, bool) or not isinstance(self.spans, int) or self.spans < 0:
            raise UsageError(f"`Workloads(spans={self.spans!r})`: give the most blocks a span merges (2 or more), "
                             "or 0 for no spans")

    def for_backend(self, backend: str) -> "Workloads":
        """These workloads, their ``variants`` (where None) those ``backend`` times unless told
        (`dsprof.runtimes.default_block_variants`)."""
        return self if self.variants is not None else replace(self, variants=default_block_variants(backend))

    def as_kwargs(self) -> dict[str, Any]:
        """The keywords the profiler's and the bundle's functions take them as (``calibrate`` is the workflow's; no
        ``variants`` where None: the function's default)."""
        kwargs = {"variants": self.variants, "model_variants": self.model_variants, "blocks": self.blocks,
                  "in_situ": self.in_situ, "spans": self.spans}
        if self.variants is None:
            del kwargs["variants"]
        return kwargs
