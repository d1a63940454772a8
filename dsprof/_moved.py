"""The old homes of moved names, kept for one release (dsprof 0.2 removes them): ``from dsprof.merge import Plan``
still works, and warns (`DeprecationWarning`) with the new home.

`dsprof.plan` and `dsprof.merge` are the API functions (plain functions, so that ``help(dsprof.plan)`` shows their
parameters); the packages they once were are `dsprof.planning` and `dsprof.merging`, and `Plan`, the measurement
records, their statistics and the importance file live in `dsprof.records`, and the standard-library modules that
export bundles carry in `dsprof.portable`. Each old module name is an entry of
``sys.modules`` that forwards attribute lookups, so importing from it finds the new home; importing it does not
replace the API function on the ``dsprof`` package (Python binds a submodule onto its parent only when it loads one).

The keywords a function took one by one before an object held them (`dsprof.measure(variants=...)`, now
``workloads=Workloads(variants=...)``) are sorted to their new parameter by `moved_keywords`, with one warning, and `as_request` puts them into the
request object each verb takes (`Pricing`, `Workloads`, ...): the one check of that object at the door. Anything else
for the parameter, or an old keyword that contradicts the object, is refused in one line naming the parameter.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import types
import warnings
from dataclasses import replace
from typing import Any, Mapping

from .errors import UsageError
from .fields import shown

#: old module -> the modules that hold its names now, searched in order.
MOVED = {
    "dsprof.plan": ("dsprof.planning",),
    "dsprof.merge": ("dsprof.merging", "dsprof.records.plan"),  # it held Plan and the presets before plans moved out
    "dsprof.merge.plan": ("dsprof.records.plan",),
    "dsprof.plan.plan": ("dsprof.records.plan",),
    "dsprof.profiler.records": ("dsprof.records.measurement",),
    "dsprof.profiler.stats": ("dsprof.records.stats",),
    "dsprof.search.importance_file": ("dsprof.records.importance",),
    "dsprof.merging.rule": ("dsprof.records.merges",),
    "dsprof.profiler.timing_loop": ("dsprof.portable.timing_loop",),
    "dsprof.profiler.hardware": ("dsprof.portable.hardware",),
    "dsprof.profiler.cpu_share": ("dsprof.portable.cpu_share",),
    "dsprof.profiler.sessions": ("dsprof.portable.sessions",),
}


class MovedModule(types.ModuleType):
    """A module that is only an old name: each attribute comes from its new home, with a `DeprecationWarning`."""

    def __init__(self, name: str, homes: tuple[str, ...]) -> None:
        super().__init__(name, f"Moved: import from {' or '.join(homes)} (this name goes in dsprof 0.2).")
        self.__spec__ = importlib.machinery.ModuleSpec(name, None)
        self._homes = homes

    def __getattr__(self, name: str) -> object:
        if name.startswith("__"):
            raise AttributeError(name)
        for home in self._homes:
            module = importlib.import_module(home)
            try:
                value = getattr(module, name)
            except AttributeError:
                continue
            warnings.warn(f"{self.__name__}.{name} moved to {home}.{name}: import it from there "
                          f"({self.__name__} goes in dsprof 0.2)", DeprecationWarning, stacklevel=2)
            return value
        raise AttributeError(f"module {self.__name__!r} has no attribute {name!r} (it moved: see {', '.join(self._homes)})")


def install() -> None:
    """Put the old names into ``sys.modules`` (once; a real module of that name, if any, is left alone)."""
    for old, homes in MOVED.items():
        sys.modules.setdefault(old, MovedModule(old, homes))


def moved_keywords(verb: str, given: Mapping[str, Any], homes: Mapping[str, tuple[str, str, str]],
                   stacklevel: int = 3) -> dict[str, dict[str, Any]]:
    """The keywords of before that a call of ``verb`` (e.g. ``"dsprof.measure"``) was ``given``, sorted by the
    parameter that holds them now: ``homes`` maps each old keyword to (parameter, its object's type name, field), and
    the answer maps each parameter to {field: value} (an empty type name: the keyword's value is the parameter's). Says so once, with a `DeprecationWarning` that names each new
    parameter and field; a keyword ``homes`` does not know is the `TypeError` Python raises for it."""
    unknown = sorted(set(given) - set(homes))
    if unknown:
        raise TypeError(f"{verb.rpartition('.')[2]}() got an unexpected keyword argument {unknown[0]!r}")
    moved: dict[str, dict[str, Any]] = {}
    for keyword, value in given.items():
        moved.setdefault(homes[keyword][0], {})[homes[keyword][2]] = value
    if moved:
        now = ", ".join(
            _now(parameter, homes[next(k for k in given if homes[k][0] == parameter)][1], fields)
            for parameter, fields in moved.items())
        warnings.warn(f"{verb}({'=, '.join(given)}=) is now {verb}({now}); the keywords of before go in dsprof 0.2",
                      DeprecationWarning, stacklevel=stacklevel)
    return moved


def _now(parameter: str, kind: str, fields: Mapping[str, Any]) -> str:
    """``workloads=Workloads(variants=, spans=)``, or ``progress=`` where the keyword is the parameter's value."""
    return f"{parameter}={kind}({', '.join(f'{f}=' for f in fields)})" if kind else f"{parameter}="


def as_request(value: Any, kind: type, parameter: str, moved: Mapping[str, Mapping[str, Any]] | None = None) -> Any:
    """The request object of ``parameter`` (``value``, a ``kind``; None: ``kind``'s defaults), with the keywords of
    before that `moved_keywords` sorted to it in place of their fields. Anything else for ``parameter``, or an old
    keyword that contradicts a field the object sets, is refused in one line that names the parameter."""
    given = (moved or {}).get(parameter, {})
    if value is None:
        value = kind()
    elif not isinstance(value, kind):
        raise UsageError(f"`{parameter}=` takes a {_home(kind)}, not {type(value).__name__} {shown(value)}")
    else:
        default = kind()
        for field, old in given.items():
            own = getattr(value, field)
            if own != getattr(default, field) and own != old:
                raise UsageError(f"`{field}=` and `{parameter}={kind.__name__}({field}=)` disagree ({old!r} and "
                                 f"{own!r}): give it once, in `{parameter}=` (`{field}=` is its old spelling)")
    return replace(value, **given) if given else value


def _home(kind: type) -> str:
    """``kind``'s public name: the shortest package of its module that exports it (``dsprof.lut.Pricing``)."""
    parts = kind.__module__.split(".")
    for end in range(1, len(parts) + 1):
        package = sys.modules.get(".".join(parts[:end]))
        if package is not None and getattr(package, "__dict__", {}).get(kind.__name__) is kind:
            return f"{'.'.join(parts[:end])}.{kind.__name__}"
    return f"{kind.__module__}.{kind.__name__}"
