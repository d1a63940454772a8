"""Run the dsprof command line and SIGKILL the process right after the N-th call of one function returns.

A deterministic stand-in for a user who kills a run at that point (the kill-and-resume tests):

    python tests/die_after.py dsprof.records.measurement:MeasurementWriter.write 2 measure --out run.jsonl ...

The process dies by signal 9 exactly there, whatever the machine's speed or load. With
``--pause GO_FILE`` before the target, it waits there instead until the file GO_FILE exists (a run held
midway, for the concurrent-writer tests), then goes on.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, Callable


def after_calls(target: str, calls: int, action: Callable[[], None]) -> None:
    """Wrap ``module:attr.path`` so that ``action`` runs when its ``calls``-th call returns."""
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
            action()
        return result

    setattr(owner, name, wrapper)


def die_after(target: str, calls: int) -> None:
    """Kill the process (SIGKILL) when the ``calls``-th call of ``target`` returns."""
    after_calls(target, calls, lambda: os.kill(os.getpid(), signal.SIGKILL))


def pause_after(target: str, calls: int, go_file: Path, timeout_s: float = 300.0) -> None:
    """Wait until ``go_file`` exists when the ``calls``-th call of ``target`` returns."""
    def wait() -> None:
        deadline = time.monotonic() + timeout_s
        while not go_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)

    after_calls(target, calls, wait)


if __name__ == "__main__":
    argv = sys.argv[1:]
    if argv[0] == "--pause":
        pause_after(argv[2], int(argv[3]), Path(argv[1]))
        argv = argv[4:]
    else:
        die_after(argv[0], int(argv[1]))
        argv = argv[2:]
    from dsprof.cli import main

    sys.exit(main(argv))
