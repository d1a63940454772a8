"""Plans: which blocks keep their activations, for one model; plain JSON; the paper's presets.

A plan's ``keep`` list has one entry per block of the model (in `find_blocks` order): 1 keeps the
block's activations, 0 removes them so the block can merge (paper Tab. 8, "1 = activations kept").
``merge`` optionally records, per block, whether it was merged (what `merge_model` decided), so that
replaying a plan on a fresh model gives the same structure whatever decided it then.
``acts`` optionally holds the plan at the level of single activations: per block, one 0/1 per removable activation
(`dsprof.records.activations` has its rules: ``keep`` is then its block view, 1 where a block keeps any).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..errors import PlanError  # noqa: F401  (defined once, in dsprof.errors)
from ..fields import FieldError, check_model_options, check_text, plain, shown
from .activations import check_acts, keep_of_acts
from ..io import one_or_many, read_json
from ..models import (format_span, is_library_name, is_module_name, model_entry, model_args, model_identity, module_name,
                      normalized_options)

__all__ = ["BORDER_MODES", "FREE_ACTIVATIONS", "Plan", "PlanError", "PlanModelError", "PRESETS", "check_plan", "list_presets", "load_preset",
           "load_plan", "named_plans", "same_family"]

PLAN_FORMAT = "dsprof.plan"
#: Blocks a plan read from a file may list at most.
MAX_BLOCKS = 10_000
PLAN_VERSION = 1
#: Where a plan file comes from (API calls: the command line shows them as its commands).
_WRITE_PLAN = "give a plan that `dsprof.plan(keep=K)` (one k of the front) or `dsprof.search()` wrote"
#: Where a linearised block's zero padding goes (see `dsprof.merging.linearize`); the first is a plan's default.
BORDER_MODES = ("in_front", "in_place")
#: The activation a plan may put after a merged block that has none of its own (paper Sec. 4.3); the first is
#: a plan's default.
FREE_ACTIVATIONS = ("relu6", "relu", "none")


class PlanModelError(PlanError):
    """A plan for a model this process does not know (a user's model whose file was not given); ``model`` is
    the plan's model, so that a command given another model can name both."""

    def __init__(self, message: str, model: str) -> None:
        super().__init__(message)
        self.model = model


def same_family(a: str, b: str) -> bool:
    """True when one plan fits both registered models (TF-ported and native twins, e.g. ``tf_efficientnet_lite0``)."""
    return a.removeprefix("tf_") == b.removeprefix("tf_")


@dataclass(frozen=True)
class Plan:
    """Which blocks of ``model`` keep their activations (1) and which are linearised (0). ``model`` is a registered
    name, or the name of a module passed as an object (given a module, or a `dsprof.models.ModelRef`, the plan takes
    its name: `dsprof.models.module_name`)."""

    model: str
    keep: tuple[int, ...]
    options: dict[str, Any] = field(default_factory=dict)
    free_activation: str | None = FREE_ACTIVATIONS[0]
    border: str = BORDER_MODES[0]
    merge: tuple[bool, ...] | None = None
    name: str | None = None
    source: str | None = None
    search: dict[str, Any] | None = None  # what `dsprof search` found: scores, ranking, weights (plain JSON)
    spans: tuple[tuple[int, int], ...] | None = None  # [start, stop) block ranges merged as one conv each (with
    # ``acts``, its ends may keep some activations: a crossing span, `dsprof.records.activations.span_units`)
    acts: tuple[tuple[int, ...], ...] | None = None  # per block, 1/0 per removable activation (None: the block plan)

    def __post_init__(self) -> None:
        object.__setattr__(self, "model", _model_name(self.model))
        try:
            # a module passed as an object here needs no registry entry; a library's model (timm:NAME) is looked up
            # in its library when built (reading a plan imports no library)
            if not is_module_name(self.model) and not is_library_name(self.model):
                model_entry(self.model)
        except KeyError:
            raise PlanModelError(
                f"plan for an unknown model {self.model!r}: neither a registered model (`dsprof.list_models()`) nor "
                "a module given in this process; a plan made for your own nn.Module is read once that module is named "
                f"here (`dsprof.ModelRef.of(module, name={self.model!r})`), and one for a model file with that file "
                "(`path.py:factory`) as the model", self.model) from None
        try:  # a name is shown in messages and pages: the rule a plan file's name is held to, for every plan
            check_text(self.name, "name", none=True)
        except FieldError as exc:
            raise PlanError(str(exc)) from None
        keep = tuple(self.keep)
        if not keep or any(isinstance(k, str) or k not in (0, 1) for k in keep):
            raise PlanError(f"'keep' must be a non-empty list of 0/1 (1 = activations kept), got {shown(list(self.keep))}")
        object.__setattr__(self, "keep", tuple(int(k) for k in keep))
        if self.border not in BORDER_MODES:
            raise PlanError(f"'border' must be one of {', '.join(BORDER_MODES)}, got {shown(self.border)}")
        if self.free_activation is not None and self.free_activation.lower() not in FREE_ACTIVATIONS:
            raise PlanError(f"'free_activation' must be one of {', '.join(FREE_ACTIVATIONS)} or null, got {shown(self.free_activation)}")
        if self.merge is not None:
            merge = tuple(self.merge)
            if len(merge) != len(keep) or any(not isinstance(m, bool) for m in merge):
                raise PlanError(f"'merge' must be {len(keep)} booleans (one per block) or null")
            if any(m and k for m, k in zip(merge, keep)):
                raise PlanError("'merge' marks a block whose activations are kept; only blocks with keep 0 can merge")
            object.__setattr__(self, "merge", merge)
        object.__setattr__(self, "options", dict(self.options))
        if self.spans is not None:
            spans = tuple(tuple(int(v) for v in span) for span in self.spans)
            last = 0
            for span in spans:
                if len(span) != 2 or not last <= span[0] < span[1] - 1 or span[1] > len(keep):
                    raise PlanError(f"'spans' must be sorted, non-overlapping [start, stop) ranges of 2+ blocks, got {shown(list(self.spans))}")
                ends = (span[0], span[1] - 1) if self.acts is not None else ()  # a crossing span's ends may keep some
                kept = [i for i in range(*span) if keep[i] and i not in ends]
                if kept:  # said as the command line writes spans (first-last), with the block
                    raise PlanError(f"span {format_span(span)} includes a block whose activations are kept (block "
                                    f"{kept[0]})" + (" (only its first and last may keep some)" if ends else ""))
                last = span[1]
            object.__setattr__(self, "spans", spans or None)
        if self.merge is not None and self.spans is not None:  # a span merges as one: its blocks are marked merged
            unmarked = sorted(i for start, stop in self.spans for i in range(start, stop) if not self.merge[i]
                              and not keep[i])
            if unmarked:
                raise PlanError(f"{self.name or 'the plan'}'s merge list leaves blocks {unmarked} unmerged, but they "
                                "lie in its spans, which merge: mark them true (or drop the spans)")
        if self.acts is not None:
            acts = check_acts(self.acts, len(keep))
            derived = keep_of_acts(acts)
            wrong = [i for i, (k, d, a) in enumerate(zip(keep, derived, acts)) if a and k != d]
            if wrong:
                raise PlanError(f"'keep' disagrees with 'acts' at block {wrong[0]}: a block keeps its activations (1) "
                                f"iff it keeps at least one of them, so 'keep' there is {derived[wrong[0]]}")
            object.__setattr__(self, "acts", acts)

    @property
    def digest(self) -> str:
        """What the plan deploys, as 12 hex digits of a SHA-256: its model, options, keep, merge and spans lists, free
        activation and border, not its ``name``, ``source`` or ``search`` notes. Two plans with one digest build the
        same merged model; a plan's identity is its name with this (`named_plans`)."""
        content = {"model": self.model, "options": self.options, "keep": list(self.keep),
                   "merge": list(self.merge) if self.merge is not None else None,
                   "spans": [list(s) for s in self.spans] if self.spans is not None else None,
                   "free_activation": self.free_activation, "border": self.border}
        if self.acts is not None:  # only then: a block plan's digest is what it was
            content["acts"] = [list(a) for a in self.acts]
        text = json.dumps(content, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def linearized(self) -> list[int]:
        """Indices of the blocks whose activations are removed."""
        return [i for i, k in enumerate(self.keep) if not k]

    def check_blocks(self, n_blocks: int) -> None:
        """Raise a `PlanError` unless the plan has one entry per block."""
        if len(self.keep) != n_blocks:
            label = self.name or "the plan"
            raise PlanError(
                f"{label} has {len(self.keep)} entries but the model has {n_blocks} blocks; a plan needs one 0/1 per "
                f"block (see `dsprof blocks` with `{model_args(self.model, self.options)}`), for the model and options "
                f"it was made for ({' '.join(filter(None, [self.model, json.dumps(self.options) if self.options else '']))})"
            )

    def check_model(self, model: Any) -> None:
        """Raise a `PlanError` when ``model`` was built by `get_model` for another model or other options than
        the plan's (`check_plan`); a module from elsewhere is checked by its block count only."""
        identity = model_identity(model)
        if identity is not None:
            check_plan(self, *identity)

    def with_merge(self, merge: Sequence[bool] | None) -> "Plan":
        """The same plan with the per-block merge decisions recorded (None: decide again)."""
        data = asdict(self)
        data["merge"] = tuple(merge) if merge is not None else None
        return Plan(**data)

    def to_dict(self) -> dict[str, Any]:
        data = {"format": PLAN_FORMAT, "version": PLAN_VERSION, **asdict(self)}
        data["keep"] = list(self.keep)
        data["merge"] = list(self.merge) if self.merge is not None else None
        data["spans"] = [list(s) for s in self.spans] if self.spans is not None else None
        if self.acts is None:
            data.pop("acts")  # a block plan's file is what it was
        else:
            data["acts"] = [list(a) for a in self.acts]
        return data

    def to_json(self) -> str:
        """Plain JSON text (one line per field), readable back with `from_json`."""
        return json.dumps(self.to_dict(), indent=1) + "\n"

    @classmethod
    def from_dict(cls, data: Any) -> "Plan":
        if not isinstance(data, dict):
            raise PlanError(f"a plan is a JSON object, got {type(data).__name__}")
        if data.get("format", PLAN_FORMAT) != PLAN_FORMAT:
            raise PlanError(f"not a plan: its format is {shown(data.get('format'))}, a plan's is {PLAN_FORMAT!r}")
        if not isinstance(data.get("version", PLAN_VERSION), int):
            raise PlanError(f"plan 'version' must be an integer, got {shown(data.get('version'))}")
        if data.get("version", PLAN_VERSION) > PLAN_VERSION:
            raise PlanError(f"plan version {data['version']} is newer than this dsprof understands ({PLAN_VERSION})")
        fields = {k: v for k, v in data.items() if k not in ("format", "version")}
        unknown = sorted(set(fields) - set(cls.__dataclass_fields__))
        if unknown:
            raise PlanError(f"unknown plan field(s) {', '.join(unknown)}; known: {', '.join(cls.__dataclass_fields__)}")
        for required in ("model", "keep"):
            if required not in fields:
                raise PlanError(f"the plan lacks {required!r}")
        if not isinstance(fields["keep"], list):
            raise PlanError("'keep' must be a list of 0/1")
        try:  # what a plan from someone else may carry into a model, a page or a command: `dsprof.fields`
            check_text(fields["model"], "model")
            check_model_options(fields.get("options", {}), "options")
            check_text(fields.get("source"), "source", none=True)  # the name: by `__post_init__`, for every plan
            if len(fields["keep"]) > MAX_BLOCKS:
                raise FieldError(f"field 'keep' holds {len(fields['keep'])} entries, more than {MAX_BLOCKS} blocks")
        except FieldError as exc:
            raise PlanError(str(exc)) from None
        fields["keep"] = tuple(fields["keep"])
        if fields.get("merge") is not None:
            fields["merge"] = tuple(fields["merge"])
        if fields.get("spans") is not None:
            fields["spans"] = tuple(tuple(s) for s in fields["spans"])
        if fields.get("acts") is not None:
            fields["acts"] = check_acts(fields["acts"], len(fields["keep"]))
        return cls(**fields)

    @classmethod
    def from_json(cls, text: str) -> "Plan":
        """Parse a plan; malformed JSON or fields raise `PlanError` naming the problem."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PlanError(f"the plan is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
        return cls.from_dict(data)

    @classmethod
    def from_acts(cls, model: Any, acts: Sequence[Sequence[int]], **fields: Any) -> "Plan":
        """A plan at the level of single activations: ``acts`` per block (1 = kept), its ``keep`` derived."""
        acts = check_acts(acts)
        return cls(model, keep_of_acts(acts), acts=acts, **fields)

    def check_acts(self, counts: Sequence[int]) -> None:
        """Raise a `PlanError` unless the plan's ``acts`` (if any) list ``counts[i]`` activations for block i."""
        if self.acts is None:
            return
        for i, (a, n) in enumerate(zip(self.acts, counts)):
            if len(a) != n:
                label = self.name or "the plan"
                raise PlanError(f"{label} lists {len(a)} activations for block {i}, which has {n} removable ones "
                                f"(see `dsprof blocks` with `{model_args(self.model, self.options)}`)")

    @classmethod
    def coerce(cls, plan: "Plan | str | Path") -> "Plan":
        """A `Plan` from a Plan, a preset name, a JSON file path or JSON text."""
        return plan if isinstance(plan, Plan) else load_plan(plan)


def _model_name(model: Any) -> str:
    """The name a plan gives ``model``: a name as it is; a module's (`module_name`); a `ModelRef`'s."""
    if isinstance(model, str):
        return model
    named = module_name(model) if hasattr(model, "named_modules") else getattr(model, "name", None)
    if not isinstance(named, str):
        raise PlanError(f"'model' is a model's name or an nn.Module, got {type(model).__name__}")
    return named


def check_plan(plan: "Plan | str | Path", model: Any, options: dict[str, Any] | None = None) -> Plan:
    """The plan (anything `Plan.coerce` reads), checked against the registered model ``model`` built with
    ``options``; the one check every command that takes a plan and a model makes. Refused (`PlanError`, with the
    options that build the plan's model) when it is for another model or other options; options are compared
    once defaults are dropped (`normalized_options`: ``width=1.0`` is MobileNetV2's default, the same model).
    A plan of the same family (``tf_efficientnet_lite0`` for ``efficientnet_lite0``) comes back re-targeted.
    ``model`` may be a module or a `dsprof.models.ModelRef` (its name)."""
    model = _model_name(model)
    try:
        plan = Plan.coerce(plan)
    except PlanModelError as exc:  # made for a user's model whose file was not given: name both models
        if same_family(exc.model, model):
            raise
        where = f"{plan} is a plan" if isinstance(plan, (str, Path)) and not str(plan).lstrip().startswith("{") else "the plan is"
        raise PlanError(f"{where} for {exc.model}, not for {model} (the model given): use a plan made for {model}, "
                        f"or the model the plan was made for (`{model_args(exc.model)}` with the file that defines "
                        f"{exc.model})") from None
    label = plan.name or "the plan"
    if not same_family(plan.model, model):
        raise PlanError(f"{label} is for model {plan.model!r}, not {model!r}: use it with the plan's model "
                        f"(`{model_args(plan.model, plan.options)}`), or a plan for {model}")
    ours, theirs = normalized_options(model, options), normalized_options(plan.model, plan.options)
    if ours != theirs:
        raise PlanError(f"{label} is for {plan.model} with options {theirs or '{}'}, not {ours or '{}'}: use it with "
                        f"the plan's model (`{model_args(plan.model, theirs)}`{'' if theirs else ', no other options'})")
    return plan if plan.model == model else replace(plan, model=model)


def plan_sources(plans: Any) -> list:
    """``plans`` as a list: one plan (a `Plan`, a preset name, a plan or merged-model file, JSON text) as a list of
    one, several as they are."""
    return one_or_many(plans, (str, Path, Plan))


def named_plans(plans: Iterable[tuple[Any, "Plan"]]) -> dict[str, tuple[Any, "Plan"]]:
    """``(source, plan)`` pairs under the name each is timed and reported by: the plan's ``name``, else its source's
    file stem, else (a `Plan` object without a name) ``plan-`` and its digest. The same plan (one `Plan.digest`) given
    twice under one name is kept once; two different plans under one name are refused in one line (`PlanError`) naming
    both: a measurement record names the plan it timed, so two plans in one slot would leave one of them untimed and
    the other's numbers under an ambiguous name."""
    out: dict[str, tuple[Any, Plan]] = {}
    where = lambda source: str(source) if isinstance(source, (str, Path)) else "a Plan object"  # noqa: E731
    for source, plan in plans:
        name = plan.name or (Path(str(source)).stem if isinstance(source, (str, Path)) else f"plan-{plan.digest}")
        if name in out:
            first, other = out[name]
            if other.digest == plan.digest:
                continue
            raise PlanError(f"two different plans are named {name!r} ({where(first)} and {where(source)}: digests "
                            f"{other.digest} "
                            f"and {plan.digest}); a record names the plan it timed, so give each plan its own name "
                            "(its 'name' field)")
        out[name] = (source, plan)
    return out


# Paper Tab. 8 ("remained activation functions", 1 = kept), one entry per block in find_blocks order.
_TAB8 = {
    "mbv2-1.4-ds-a": ("mobilenet_v2", {"width": 1.4}, "1 0 0 1 1 0 1 0 1 0 1 1 0 1 1 1 1"),
    "mbv2-1.4-ds-b": ("mobilenet_v2", {"width": 1.4}, "0 0 0 1 1 0 0 0 0 0 1 1 0 1 1 1 1"),
    "mbv2-1.4-ds-c": ("mobilenet_v2", {"width": 1.4}, "1 0 0 1 0 0 0 0 0 0 1 1 0 1 1 1 1"),
    "mbv2-1.4-ds-d": ("mobilenet_v2", {"width": 1.4}, "0 0 0 1 1 0 0 0 0 0 0 0 0 1 1 1 1"),
    "mbv2-1.4-ds-e": ("mobilenet_v2", {"width": 1.4}, "1 0 0 1 0 0 0 0 0 0 0 0 0 1 1 1 1"),
    "mbv2-1.4-ds-f": ("mobilenet_v2", {"width": 1.4}, "0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0"),
    "mbv2-ds-a": ("mobilenet_v2", {}, "0 0 1 0 1 1 1 0 0 1 1 1 1 1 1 1 1"),
    "mbv2-ds-b": ("mobilenet_v2", {}, "1 0 0 0 1 1 1 0 0 1 1 1 1 1 1 1 1"),
    "mbv2-ds-c": ("mobilenet_v2", {}, "1 0 0 1 1 0 1 0 0 0 1 0 0 1 1 1 1"),
    "mbv2-ds-d": ("mobilenet_v2", {}, "1 0 0 1 0 0 0 0 0 0 1 1 0 1 0 1 1"),
    "efflite0-ds-a": ("tf_efficientnet_lite0", {}, "0 0 1 1 0 1 0 0 1 0 0 1 1 1 1 1"),
    "efflite0-ds-b": ("tf_efficientnet_lite0", {}, "0 0 0 1 1 0 0 0 1 0 0 1 1 1 1 1"),
    "efflite0-ds-c": ("tf_efficientnet_lite0", {}, "0 0 0 1 0 0 0 0 0 0 0 1 1 1 1 1"),
    "efflite0-ds-d": ("tf_efficientnet_lite0", {}, "0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0"),
    "efflite3-ds-a": ("tf_efficientnet_lite3", {}, "0 0 0 1 1 0 0 0 0 0 0 0 0 0 0 1 0 0 1 1 1 1 1 1"),
    "efflite3-ds-b": ("tf_efficientnet_lite3", {}, "0 0 0 1 1 0 0 0 0 0 0 0 1 1 0 0 0 1 1 1 1 1 1 1"),
    "efflite3-ds-c": ("tf_efficientnet_lite3", {}, "0 0 0 1 1 0 0 0 0 0 1 0 1 1 1 0 0 1 1 1 1 1 1 1"),
    "efflite3-ds-d": ("tf_efficientnet_lite3", {}, "1 0 0 1 1 0 1 1 0 0 0 0 1 0 0 1 1 1 1 1 1 1 1 1"),
}

PRESETS: dict[str, Plan] = {
    name: Plan(model, tuple(int(v) for v in keep.split()), options, name=name, source="DepthShrinker paper, Tab. 8")
    for name, (model, options, keep) in _TAB8.items()
}


def list_presets() -> list[str]:
    """Names of the paper's plans, e.g. ``mbv2-1.4-ds-e``."""
    return sorted(PRESETS)


def load_preset(name: str) -> Plan:
    """The paper's plan ``name`` (case-insensitive, e.g. ``"MBV2-DS-A"``); unknown names list the presets."""
    key = name.lower()
    if key not in PRESETS:
        raise PlanError(f"unknown preset {name!r}; presets: {', '.join(list_presets())}")
    return PRESETS[key]


def load_plan(source: str | Path) -> Plan:
    """A plan from a preset name, a JSON file, or JSON text (a `Path` is a file where one exists, else a preset)."""
    if not isinstance(source, (str, Path)):
        raise PlanError(f"`plan=` takes a Plan, a preset name, a plan file or its JSON text, not "
                        f"{type(source).__name__} {shown(source)}")
    text = str(source)
    if text.lower() in PRESETS and (isinstance(source, str) or not Path(source).exists()):
        return load_preset(text)
    if text.lstrip().startswith("{"):
        return Plan.from_json(text)
    path = Path(source)
    if not path.exists():
        raise PlanError(f"no preset or plan file {text!r}; presets: {', '.join(list_presets())}")
    data = read_json(path, "plan (JSON)", _WRITE_PLAN + ", or a preset", kind="plan", error=PlanError)
    try:
        return Plan.from_dict(data)
    except PlanModelError as exc:
        raise PlanModelError(f"{path}: {exc}", exc.model) from None
    except PlanError as exc:
        raise PlanError(f"{path}: {exc}") from None
    except (TypeError, ValueError, AttributeError) as exc:  # a field of the wrong type, e.g. "keep": [[1]]
        raise PlanError(f"{path}: a plan field has the wrong type ({plain(exc)}); {_WRITE_PLAN}") from None
