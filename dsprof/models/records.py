"""The records block discovery returns: `Block` (with its `Unit`s), `Refusal`, `Discovery`, and `ChainSite`
(where in the graph a chain that no module owns lies, for graph surgery)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch.fx as fx
from torch import nn

from .blockspec import BlockSpec

__all__ = ["Block", "ChainSite", "Discovery", "Refusal", "Unit"]


@dataclass(frozen=True)
class ChainSite:
    """Where a chain that no module owns lies in the traced graph, so that surgery finds it again.

    ``opened``: the module paths whose forwards hold a node of the chain ("" is the model); surgery traces
    through these and keeps every other module whole. ``main``: the nodes from the first convolution to
    the chain's output, in order, ``shortcut``: the nodes on the skip path from the chain's input to the
    addition -- each as its signature (a module's path, or a function's or method's name).
    """

    opened: tuple[str, ...]
    main: tuple[str, ...]
    shortcut: tuple[str, ...] = ()


@dataclass(frozen=True, eq=False)
class Unit:
    """One convolution of a block with its BatchNorm and its *removable* activation.

    ``act`` is the activation the search may remove (a module; functional activations get one);
    ``act_in_norm`` is True when it lives inside ``norm`` (timm's BatchNormAct2d). ``concat`` > 0: the unit's output
    is ``cat([its input, act(norm(conv(input)))], dim=1)[:, :concat]`` (a Ghost module's cheap operation, its input
    the primary convolution's output); 0: the unit's own output.
    """

    conv: nn.Conv2d
    norm: nn.Module | None
    act: nn.Module | None
    act_in_norm: bool
    conv_name: str
    act_name: str = "none"
    concat: int = 0


@dataclass(frozen=True, eq=False)
class Block:
    """One block of a model: where it is, its module, its shape, and what every stage needs of it.

    ``name`` is the owning module's path (``features.3``), a run of an ``nn.Sequential``'s children
    (``layers[0:8]``), or, for a chain no module owns, its first and last convolutions
    (``conv1..conv3``); ``module`` the owning module (a new ``nn.Sequential`` over the run's children; a
    `dsprof.models.surgery.Chain` over the chain's modules, which `own_chains` installs). ``site`` is
    where such a chain lies in the graph (None for a block a module owns).
    ``units`` are its convolutions in order; ``shortcut`` is None without a skip connection, ``()`` for
    an identity skip, else the modules on the skip path; ``tail`` the activation after the block's
    output (kept by the merge: ResNet's ReLU after the addition, a chain's last activation). ``input_shared``: its
    input is also read outside the block (a chain inside a residual block whose addition it does not own, e.g. the
    convolutions before a squeeze-excitation), so it cannot merge with the block before it (`follows`).
    """

    name: str
    module: nn.Module
    spec: BlockSpec
    units: tuple[Unit, ...] = ()
    shortcut: tuple[nn.Module, ...] | None = None
    tail: nn.Module | None = None
    input_node: str = ""
    output_node: str = ""
    site: ChainSite | None = None
    input_shared: bool = False

    def follows(self, previous: "Block") -> bool:
        """Whether this block reads ``previous``'s output and is its only reader: then the two can merge as one
        span (the output they share goes away)."""
        return previous.output_node == self.input_node and not self.input_shared

    @property
    def residual(self) -> bool:
        return self.shortcut is not None

    @property
    def activations(self) -> tuple[nn.Module, ...]:
        """The removable activations (what gating and linearising act on)."""
        return tuple(u.act for u in self.units if u.act is not None)


@dataclass(frozen=True)
class Refusal:
    """A block-like part of the model that dsprof cannot treat as a block, and why."""

    name: str
    type_name: str
    reason: str
    node: str

    def __str__(self) -> str:
        return f"{self.name or '(model)'} ({self.type_name}): {self.reason} [node {self.node}]"


@dataclass(frozen=True, eq=False)
class Discovery:
    """What `discover_blocks` found: the blocks in execution order, the refusals, the traced graph, and, for a model
    without a block, ``nothing``: why, in one line that fits the model (no convolution, one, none in a row, all refused)."""

    blocks: list[Block]
    refusals: list[Refusal]
    graph_module: fx.GraphModule = field(repr=False)
    nothing: str | None = None
    fusable: tuple[str, ...] = ()  # the types of modules with train-time branches at a refused part (`reparameterize`)

