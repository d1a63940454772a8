"""What block discovery traces through and what it keeps whole: the leaf registry and the tracer.

Convolutions, BatchNorms, the removable activations and pass-through modules (dropout, identity) are
leaves of the traced graph, and so are dsprof's own linearised/merged/gated blocks (``dsprof_leaf``),
timm's modules that torch.fx cannot trace, and whatever `register_leaf_module` adds. Everything else is
traced through, so that a block is found whatever module layout holds it.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn

from ..errors import GraphTraceError

__all__ = ["register_leaf_module", "trace_model", "trace_opaque", "act_module_name"]

_ACT_MODULES: tuple[tuple[type, str], ...] = (
    (nn.ReLU6, "relu6"), (nn.ReLU, "relu"), (nn.Hardswish, "hardswish"), (nn.SiLU, "silu"),
    (nn.GELU, "gelu"), (nn.LeakyReLU, "leaky_relu"), (nn.Hardtanh, "hardtanh"),
)
_ACT_FUNCTIONS: dict[Callable, str] = {
    F.relu: "relu", torch.relu: "relu", F.relu6: "relu6", F.hardswish: "hardswish", F.silu: "silu",
    F.gelu: "gelu", F.leaky_relu: "leaky_relu", F.hardtanh: "hardtanh",
}
_ACT_METHODS = {"relu": "relu", "relu_": "relu"}
_PASS_MODULES: tuple[type, ...] = (nn.Identity, nn.Dropout, nn.Dropout2d)
_PASS_FUNCTIONS: set[Callable] = {F.dropout, F.dropout2d}

#: Modules traced as opaque leaves (besides convolutions, normalisations and activations): dsprof's own
#: linearised/merged/gated blocks, and whatever `register_leaf_module` adds.
_LEAF_TYPES: list[type] = []


def leaf_types() -> tuple[type, ...]:
    """The classes `register_leaf_module` added so far (what a trace keeps whole besides dsprof's own)."""
    return tuple(_LEAF_TYPES)


def register_leaf_module(cls: type) -> type:
    """Trace modules of class ``cls`` as opaque leaves (e.g. a module torch.fx cannot trace). A leaf ends
    any chain it touches. Usable as a class decorator."""
    if cls not in _LEAF_TYPES:
        _LEAF_TYPES.append(cls)
    return cls


def is_pass_function(target: object) -> bool:
    """True for a function that passes its input through in eval: dropout, and torchvision's stochastic depth
    (torch.fx-wrapped there). torchvision is looked up, not imported: a graph that calls its stochastic depth was
    traced from a model that imported it, and a model without it need not pay torchvision's import."""
    if target in _PASS_FUNCTIONS:
        return True
    ops = sys.modules.get("torchvision.ops")
    return ops is not None and target is getattr(ops, "stochastic_depth", None)


def act_module_name(m: nn.Module) -> str | None:
    """The name of a removable activation module (``"relu6"``, ...), None for anything else."""
    for cls, name in _ACT_MODULES:
        if type(m) is cls:
            return name
    for cls, name in _ACT_MODULES:
        if isinstance(m, cls):
            return name
    return None


class _Tracer(fx.Tracer):
    def __init__(self, opened: set[str] | None = None, opaque: tuple[type, ...] = ()) -> None:
        super().__init__()
        self.path_stack: list[str] = []
        self.failed_at: str | None = None
        self.opened = opened
        self.opaque = opaque

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        if self.opened is not None:
            return qualname not in self.opened
        if isinstance(m, (nn.Conv2d, nn.BatchNorm2d, _PASS_MODULES)) or act_module_name(m) is not None:
            return True
        if isinstance(m, tuple(_LEAF_TYPES) + self.opaque) or getattr(type(m), "dsprof_leaf", False):
            return True
        return super().is_leaf_module(m, qualname)

    def call_module(self, m: nn.Module, forward: Callable, args: tuple, kwargs: dict) -> Any:
        path = self.path_of_module(m)
        self.path_stack.append(path)
        try:
            return super().call_module(m, forward, args, kwargs)
        except Exception:
            if self.failed_at is None:
                self.failed_at = path  # the innermost module whose forward could not be traced
            raise
        finally:
            self.path_stack.pop()


_timm_leaves_added = False


def _timm_leaves() -> None:
    """timm's own list of modules torch.fx cannot trace (dynamic padding, ...), added at the first trace after
    timm is imported (a model with timm's modules has imported it; importing it here would cost every command)."""
    global _timm_leaves_added
    if _timm_leaves_added or "timm" not in sys.modules:
        return
    _timm_leaves_added = True
    try:
        from timm.models._features_fx import _leaf_modules  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - timm reorganised: nothing to add
        return
    for cls in _leaf_modules:
        if not issubclass(cls, (nn.Conv2d, nn.BatchNorm2d)):
            register_leaf_module(cls)


#: Classes of a user's model that discovery keeps whole because torch.fx cannot trace them, at most (each costs a
#: trace of the model; beyond it the model is refused naming the module).
MAX_OPAQUE_CLASSES = 16


def trace_model(model: nn.Module, opened: set[str] | None = None) -> fx.Graph:
    """The graph of ``model`` traced in eval mode (training branches resolved as inference runs them).

    ``opened`` (module paths, "" for the model): trace through these modules only and keep every other one
    whole, as graph surgery does; default: discovery's leaves, and every module of a class torch.fx cannot trace
    kept whole (`trace_opaque`). Raises `GraphTraceError` naming the module that fails."""
    return trace_opaque(model, opened)[0]


def trace_opaque(model: nn.Module, opened: set[str] | None = None) -> tuple[fx.Graph, dict[str, str]]:
    """`trace_model`'s graph, and the modules kept whole because torch.fx cannot trace their class ({path of the
    first of its class that failed: why}): an attention or a Python branch on tensor values inside a CNN (timm's
    EfficientViT, MobileViT) ends the chains it touches, as a leaf does, and the rest of the model is traced. Only
    where the model itself traces (a failure in its own forward is refused) and ``opened`` is None."""
    _timm_leaves()
    opaque: dict[type, tuple[str, str]] = {}
    was_training = model.training
    model.eval()  # tracing resolves `if self.training` branches: trace what inference runs
    try:
        while True:
            tracer = _Tracer(opened, tuple(opaque))
            try:
                graph = tracer.trace(model)
                break
            except Exception as exc:  # noqa: BLE001 - any tracing failure becomes one clear error
                where = tracer.failed_at or ""
                module = model.get_submodule(where) if where else model
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                if opened is None and where and type(module) not in opaque and len(opaque) < MAX_OPAQUE_CLASSES:
                    opaque[type(module)] = (where, first[:200])  # kept whole, and the model traced again
                    continue
                raise GraphTraceError(
                    f"torch.fx cannot trace {where or 'the model'} ({type(module).__name__}): {first[:200]}. dsprof "
                    "finds blocks in the traced graph: make that module traceable (no Python control flow on tensor "
                    "values), or mark it opaque with dsprof.models.register_leaf_module(<its class>) so the rest can "
                    "be traced"
                ) from None
    finally:
        model.train(was_training)
    return graph, {where: why for where, why in opaque.values()}
