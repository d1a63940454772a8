"""What the messages about one model's prices name: the `dsprof measure` that times what they read (`measure_hint`)
and the miss of a lone block the planner cannot decide (`undecided`). Split from `dsprof.lut.prices` (issue #44,
item 11): `Prices.hints` builds one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..device_context import DeviceContext
from ..errors import HINT, LUTMissError, MeasureHint
from ..models import registry
from .schema import split_label

__all__ = ["PriceHints", "label_model_args"]


def label_model_args(label: str, resolution: int | None = None) -> str:
    """The API argument that builds the model of a LUT ``label`` (`registry.model_args`: its name and build options),
    at ``resolution`` pixels (None: the label's own)."""
    name, options = split_label(label)
    own = options.pop("resolution", None)
    options.pop("resolution_w", None)
    return registry.model_args(name, options, own if resolution is None else resolution)


@dataclass(frozen=True)
class PriceHints:
    """The hints of one model's prices in one LUT context ``key`` (of the LUT file ``source``): ``label`` the model's
    LUT label, ``specs`` its blocks' specs, ``model_args`` the API argument that builds it (`dsprof.models.model_args`;
    empty: read from its label), ``in_situ`` whether its prices read (or could use) blocks timed in situ."""

    key: DeviceContext
    source: str
    label: str
    specs: tuple[str, ...]
    model_args: str = ""
    reads_in_situ: bool = False

    @property
    def measure_args(self) -> str:
        """The API argument that builds this model (`model_args`; where none was given, its label's name, options and
        resolution)."""
        return self.model_args or label_model_args(self.label)

    def measure_hint(self, max_span: int = 1) -> MeasureHint:
        """What to time so that the LUT holds what these prices read, spans of up to ``max_span`` blocks included."""
        return MeasureHint(self.key, self.measure_args, max_span, self.reads_in_situ)

    def undecided(self, undecided: Sequence[int]) -> LUTMissError:
        """The miss of blocks linearised alone whose merged or unmerged entry the LUT lacks (``undecided``, indices):
        the first one, its entries, what to time to add them: the planner cannot choose whether they merge."""
        spec = self.specs[undecided[0]]
        more = f" (and {len(undecided) - 1} more blocks)" if len(undecided) > 1 else ""
        return LUTMissError(
            f"the LUT {self.source} lacks the merged or the unmerged entry (linear, else original) of "
            f"block {undecided[0]} ({spec}) of {self.label} on {self.key}{more}, so it cannot decide whether it "
            f"merges: run {HINT} and rebuild the LUT with `dsprof.build_lut()` (or decide by MACs: `merge_by='macs'`)",
            hint=self.measure_hint(),
        )
