"""The merged-model file: a state dict, the plan, and what rebuilds the model; and ONNX export.

The file is ``torch.save`` of a dict of plain values and tensors, readable with
``torch.load(path, weights_only=True)``::

    {"format": "dsprof.merged", "version": 1,
     "model": "mobilenet_v2", "options": {"width": 1.4}, "num_classes": 1000, "resolution": [224, 224],
     "plan": "<plan JSON, with the per-block merge decisions>", "dtype": "float32",
     "graph": null, "state_dict": {...}, "state_metadata": {"": {"version": 1}, ...}}

`load_merged` rebuilds the architecture by replaying the plan on a fresh model of that name and
options (no weights are downloaded), then loads the state dict strictly. A model whose chains no module
owns were merged by rewriting its graph (a `dsprof.models.ChainGraph`) also stores that graph, as one
``"op target"`` line per node (``"graph"``); the graph rebuilt from the model file and the plan must be
the same, node for node, so that the weights go where they were: no code from the merged file runs.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import torch
from torch import nn

from ..errors import DsprofError, MergeError
from ..fields import MERGED_DTYPES, FieldError, check_model_options
from ..io import atomic_torch_save, load_torch_payload
from ..models import ChainGraph, get_model, input_size_of
from ..models.tracing import eval_forward, example_input
from .model import merge_model, merge_report
from ..records.plan import Plan
from ..models.onnx_export import export_onnx as export_at_shape

__all__ = ["MERGED_FORMAT", "save_merged", "load_merged", "export_onnx"]

MERGED_FORMAT = "dsprof.merged"
MERGED_VERSION = 1


def _num_classes(model: nn.Module) -> int:
    """The classes the model outputs: its last Linear layer's outputs, else (a convolution as the classifier: DLA)
    the width of its output for one image at its input size."""
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    if linears:
        return linears[-1].out_features
    out = eval_forward(model, example_input(model, input_size_of(model)))
    if not isinstance(out, torch.Tensor) or out.dim() != 2:
        raise MergeError(f"cannot tell the number of classes: the model outputs {tuple(getattr(out, 'shape', ()))} "
                         "for one image, not (1, classes)")
    return int(out.shape[1])


def graph_lines(model: nn.Module) -> list[str] | None:
    """The rewritten graph of a `ChainGraph` as ``"op target"`` lines, in order; None for any other model."""
    if not isinstance(model, ChainGraph):
        return None
    return [f"{n.op} {getattr(n.target, '__name__', n.target)}" for n in model.graph.nodes]


def _check_graph(path: str | Path, saved: list[str] | None, model: nn.Module) -> None:
    rebuilt = graph_lines(model)
    if saved == rebuilt:
        return
    if saved is None or rebuilt is None:
        what = "a rewritten graph" if rebuilt is not None else "no rewritten graph"
        raise MergeError(f"{path}: the model file and plan now give {what}, unlike the saved model; merge it again")
    at = next((i for i, (a, b) in enumerate(zip(saved, rebuilt)) if a != b), min(len(saved), len(rebuilt)))
    got = rebuilt[at] if at < len(rebuilt) else "the end"
    want = saved[at] if at < len(saved) else "the end"
    raise MergeError(f"{path}: the graph rebuilt from the model file and the plan differs from the saved one at node "
                     f"{at} ({got!r}, saved {want!r}); the model file changed since: merge it again")


def save_merged(model: nn.Module, path: str | Path) -> Path:
    """Write a model returned by `merge_model` to ``path`` (atomically); returns the path."""
    plan = merge_report(model).plan
    state = model.state_dict()
    payload = {
        "format": MERGED_FORMAT,
        "version": MERGED_VERSION,
        "model": plan.model,
        "options": dict(plan.options),
        "num_classes": _num_classes(model),
        "resolution": list(input_size_of(model)),
        "plan": plan.to_json(),
        "dtype": str(next(model.parameters()).dtype).removeprefix("torch."),
        "graph": graph_lines(model),
        "state_dict": {k: v.detach().cpu() for k, v in state.items()},
        # each module's state version (plain data), which a plain dict drops: torchvision's MNASNet refuses to load
        # without its own
        "state_metadata": {k: dict(v) for k, v in getattr(state, "_metadata", {}).items()},
    }
    return atomic_torch_save(path, payload)


def merged_plan(path: str | Path) -> Plan:
    """The plan a merged model file (`save_merged`) was merged by, its merge decisions included, without
    building the model (what `dsprof report` predicts a model timed with `measure --merged-model` by)."""
    payload = load_torch_payload(path, MERGED_FORMAT, "dsprof merged model", "write one with `dsprof.merge(out=)`")
    return Plan.from_json(payload["plan"])


def load_merged(path: str | Path) -> nn.Module:
    """The merged model saved by `save_merged` (eval mode), without running code from the file."""
    payload = load_torch_payload(path, MERGED_FORMAT, "dsprof merged model", "write one with `dsprof.merge(out=)`")
    if payload.get("version", 0) > MERGED_VERSION:
        raise MergeError(f"{path} was written by a newer dsprof (version {payload['version']}); update dsprof to load it")
    try:
        plan = Plan.from_json(payload["plan"])
        h, w = payload["resolution"]
        if h != w:
            raise MergeError(f"{path}: non-square resolution {h}x{w} is not supported by the model registry")
        dtype = payload.get("dtype", "float32")
        try:  # sizes, options and dtype checked before anything is built: `dsprof.fields`
            check_model_options(payload["options"], "options")
            check_model_options({"num_classes": payload["num_classes"], "resolution": h}, "model")
            if dtype not in MERGED_DTYPES:
                raise FieldError(f"field 'dtype' is {dtype!r}: one of {', '.join(MERGED_DTYPES)}")
        except FieldError as exc:
            raise MergeError(f"{path}: {exc}; write it again with `dsprof.merge(out=)`") from None
        fresh = get_model(payload["model"], resolution=h, **{**payload["options"], "num_classes": payload["num_classes"]})
        fresh = fresh.to(getattr(torch, dtype))
        model = merge_model(fresh, plan)
        _check_graph(path, payload.get("graph"), model)
        state = OrderedDict(payload["state_dict"])
        state._metadata = payload.get("state_metadata", {})  # type: ignore[attr-defined]
        model.load_state_dict(state, strict=True)
    except DsprofError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, RuntimeError) as exc:  # fields missing or damaged
        detail = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise MergeError(f"{path} is a damaged dsprof merged model ({detail}); write it again with `dsprof.merge(out=)`") from None
    return model.eval()


def export_onnx(model: nn.Module, path: str | Path, *, batch: int = 1, opset: int = 17) -> Path:
    """Export ``model`` to ONNX for an input of ``batch`` images at the model's resolution (the
    profiler's exporter: static shapes, written atomically)."""
    h, w = input_size_of(model)
    first = next(m for m in model.modules() if isinstance(m, nn.Conv2d))
    dtype = next(model.parameters()).dtype
    return export_at_shape(model, (batch, first.in_channels, h, w), Path(path), dtype=dtype, opset=opset)
