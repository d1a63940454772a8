"""Predicting a model's latency from a LUT: stem + blocks (original or merged per the plan) + head."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
from torch import nn

from ..errors import LUTError
from ..models import find_blocks, input_size_of, named_model
from .schema import DeviceKey, model_label
from .table import LUT, LUTMissError, LUTMissWarning

__all__ = ["Prediction", "predict_latency", "profiled_options"]


@dataclass(frozen=True)
class Prediction:
    """A predicted latency (seconds per batch) with its parts and its coverage.

    ``rest_s`` is everything outside the blocks (stem, head, and what passes between blocks): the
    whole original model minus its blocks, both measured on the device (``"model-minus-blocks"``),
    or the stem and head timed alone (``rest_method="stem+head"``).
    ``coverage`` is the share of blocks found in the LUT; ``missing`` names the misses.
    """

    model: str
    device: DeviceKey
    total_s: float
    rest_s: float
    rest_method: str
    blocks: pd.DataFrame = field(repr=False)
    coverage: float
    missing: tuple[str, ...]

    @property
    def fps(self) -> float:
        """Images per second at the LUT's batch size."""
        return self.device.batch / self.total_s

    def __str__(self) -> str:
        merged = int((self.blocks["variant"] == "merged").sum())
        return (
            f"{self.model} on {self.device}: {self.total_s * 1e3:.3f} ms per batch of {self.device.batch} "
            f"({self.fps:.1f} FPS); {merged} of {len(self.blocks)} blocks merged; "
            f"coverage {self.coverage:.0%}; rest ({self.rest_method}) {self.rest_s * 1e3:.3f} ms"
            + (f"\nPARTIAL PREDICTION: the LUT lacks {len(self.missing)} of the keys it needs (block coverage "
               f"{self.coverage:.0%}); the total leaves their latency out" if self.missing else "")
        )


def profiled_options(model: nn.Module, options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The model options as `dsprof measure` records them: the build options plus the resolution."""
    out = dict(options or {})
    h, w = input_size_of(model)
    out["resolution"] = h
    if h != w:
        out["resolution_w"] = w
    return out


def predict_latency(
    model: str | nn.Module,
    lut: LUT | str | Path,
    plan: Any = None,
    *,
    device: DeviceKey | str | None = None,
    name: str | None = None,
    options: Mapping[str, Any] | None = None,
    resolution: int | None = None,
    strict: bool = False,
    variant: str | None = None,
    rest: str = "auto",
) -> Prediction:
    """Latency of ``model`` (a registered name, or a module with ``name``) on one LUT context.

    ``plan`` (a `dsprof.merge.Plan`, preset name or plan file) says which blocks are merged: a
    linearised block counts as merged where the plan's ``merge`` list says so, else where the LUT
    says merging saves time (what `merge_model` decides given the same LUT). ``options`` are the
    model's build options (``width``, ``depths``...). Misses warn, or raise with ``strict=True``.
    ``variant`` (instead of a plan) counts every block as that LUT variant, e.g. ``"flops_matched"``
    for the paper's Tab. 1 dense counterpart of the whole model. ``rest`` picks what stands for the
    part outside the blocks: ``"stem+head"`` (timed alone), ``"model-minus-blocks"`` (the measured
    original model minus its measured blocks) or ``"auto"``: the latter where the LUT has the whole
    model, else the former.
    """
    if rest not in ("auto", "stem+head", "model-minus-blocks"):
        raise LUTError(f"rest is 'auto', 'stem+head' or 'model-minus-blocks', got {rest!r}")
    if variant is not None and plan is not None:
        raise LUTError("give a plan or a variant for every block, not both")
    lut = lut if isinstance(lut, LUT) else LUT.load(lut)
    key = lut.resolve(device)
    options = dict(options or {})
    name, net = named_model(model, name, resolution, options)
    label = model_label(name, profiled_options(net, options))
    blocks = find_blocks(net)

    linearized: set[int] = set()
    merge_flags = None
    if plan is not None:
        from ..merge.plan import Plan  # the merge package imports models only; keep lut importable alone

        plan = Plan.coerce(plan)
        plan.check_blocks(len(blocks))
        linearized = set(plan.linearized)
        merge_flags = plan.merge

    def get(workload: str, variant: str, scope: str = "block"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LUTMissWarning)
            return lut.lookup(workload, variant, key, scope=scope)

    specs = [b.spec.to_str() for b in blocks]
    originals = [get(spec, "original") for spec in specs]
    rows, missing = [], []
    for i, (block, spec, original) in enumerate(zip(blocks, specs, originals)):
        if variant is not None:
            chosen, entry = variant, get(spec, variant)
        elif i not in linearized:
            chosen, entry = "original", original
        else:
            merged = get(spec, "merged")
            if merge_flags is not None:
                merge = merge_flags[i]
            elif merged is not None and original is not None:
                merge = merged.median_s < original.median_s
            else:
                merge = True
            if merge:
                chosen, entry = "merged", merged
            else:
                # Linearised but not merged: the activation-free block, when the LUT has it.
                linear = get(spec, "linear")
                chosen, entry = ("linear", linear) if linear is not None else ("original", original)
        if entry is None:
            missing.append(f"block {spec} [{chosen}]")
        rows.append({"index": i, "block": block.name, "spec": spec, "variant": chosen,
                     "latency_s": entry.median_s if entry else float("nan"), "noisy": bool(entry and entry.noisy)})
    table = pd.DataFrame(rows, columns=["index", "block", "spec", "variant", "latency_s", "noisy"])

    stem, head = get(label, "original", "stem"), get(label, "original", "head")
    whole = get(label, "original", "model")
    # auto: the measured whole model first. It carries what a sum of parts timed alone misses
    # (on a CPU the parts timed alone add up to less, likely warm caches: see benchmarks/RESULTS.md)
    if whole is not None and all(o is not None for o in originals) and rest != "stem+head":
        rest_s, method = whole.median_s - sum(o.median_s for o in originals), "model-minus-blocks"
    elif stem is not None and head is not None and rest != "model-minus-blocks":
        rest_s, method = stem.median_s + head.median_s, "stem+head"
    else:
        rest_s, method = 0.0, "missing"
        wanted = {"auto": "stem/head entries or a whole-model entry with all its blocks",
                  "stem+head": "stem/head entries", "model-minus-blocks": "a whole-model entry with all its blocks"}[rest]
        missing.append(f"{wanted} of {label}")

    found = table["latency_s"].notna()
    if len(table) and not found.any():  # nothing to add up: not a prediction, whatever `strict` says
        raise LUTMissError(
            f"the LUT {lut.source} covers none of the {len(table)} blocks of {label} on {key} (coverage 0 %), e.g. "
            f"{missing[0]}: it holds other models, resolutions or variants. Measure {name} there "
            f"(`dsprof measure --model {name}`, the same options) and rebuild the LUT."
        )
    if missing:
        message = (
            f"LUT {lut.source} lacks {len(missing)} key(s) for {label} on {key}: " + "; ".join(missing[:5])
            + ("; ..." if len(missing) > 5 else "")
            + ". Measure this model on that device (`dsprof measure`) and rebuild the LUT."
        )
        if strict:
            raise LUTMissError(message)
        warnings.warn(message, LUTMissWarning, stacklevel=2)
    total = rest_s + float(table.loc[found, "latency_s"].sum())
    if total <= 0 and method == "model-minus-blocks" and found.all():
        raise LUTError(
            f"the LUT's entries for {label} on {key} contradict each other (predicted {total * 1e3:.3f} ms): "
            "the whole model measured faster than its blocks by more than they take. Measure again on a "
            "quiet machine (see the noisy column) and rebuild the LUT."
        )
    coverage = float(found.mean()) if len(table) else 1.0
    return Prediction(label, key, total, rest_s, method, table, coverage, tuple(missing))
