"""Run the dsprof command line and SIGKILL the process right after the N-th call of one function returns.

A deterministic stand-in for a user who kills a run at that point (the kill-and-resume tests):

    python tests/die_after.py dsprof.profiler.records:MeasurementWriter.write 2 measure --out run.jsonl ...

The process dies by signal 9 exactly there, whatever the machine's speed or load.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
from typing import Any, Callable


def die_after(target: str, calls: int) -> None:
    """Wrap ``module:attr.path`` so that the process kills itself when its ``calls``-th call returns."""
    module, _, path = target.partition(":")
    owner: Any = importlib.import_module(module)
    *parents, name = path.split(".")
    for parent in parents:
        owner = getattr(owner, parent)
    original: Callable[..., Any] = getattr(owner, name)
    count = 0

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nonlocal count
        result = original(*args, **kwargs)
        count += 1
        if count == calls:
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    setattr(owner, name, wrapper)


if __name__ == "__main__":
    die_after(sys.argv[1], int(sys.argv[2]))
    from dsprof.cli import main

    sys.exit(main(sys.argv[3:]))
