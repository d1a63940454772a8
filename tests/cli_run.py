"""`dsprof ARGS` run in the test's own process: `dsprof.cli.main.main`, the function the console script calls, with
its stdout and stderr captured, in a given folder.

Why not a subprocess each time: a fresh `dsprof` process spends 3-5 s on this 2-core machine importing torch (and
torch._dynamo, which torchvision imports) before it reads its arguments, and the suite ran ~60 such processes. The
console script itself (its exit status, its one line on stderr, a traceback for a bug) is still run as a real process
by tests/test_cli.py, tests/test_cli_startup.py, tests/test_bad_input.py's first case and the kill-and-resume tests.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import warnings
from pathlib import Path

import torch

from dsprof.cli.main import main


def dsprof_here(*args, cwd: str | Path | None = None) -> subprocess.CompletedProcess:
    """``dsprof ARGS`` (in ``cwd``, where given) as a `CompletedProcess`: exit status, stdout, stderr. A warning is
    shown as a new process would show it (once, whatever earlier calls warned), and the command's ``--threads`` do
    not outlast it."""
    argv = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    threads = torch.get_num_threads()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings(), \
                (contextlib.chdir(cwd) if cwd is not None else contextlib.nullcontext()):
            warnings.resetwarnings()  # a new process's filters: each warning once, library deprecations hidden
            warnings.simplefilter("default")
            for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
                warnings.simplefilter("ignore", category)
            code = main(argv)
    finally:
        torch.set_num_threads(threads)
    return subprocess.CompletedProcess(["dsprof", *argv], code, out.getvalue(), err.getvalue())
