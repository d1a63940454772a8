"""How long `dsprof` takes before it does anything: wall time of the quick commands, per checkout.

    python benchmarks/cli_startup.py [--repeat 5] [CHECKOUT ...]

Each CHECKOUT (default: this one) is the working folder and PYTHONPATH, and the console script's module is run
with this interpreter (`python -c "from dsprof.cli import main; ..."`, what `.venv/bin/dsprof` does),
``--repeat`` times per command, interleaved across checkouts so that load changes hit them alike. Prints
the median and fastest wall time per command and checkout, and the load average before and after:
on a shared machine the figures are inflated by the load, the ratio between checkouts is the one to read.
To compare with the code before the lazy imports, unpack it beside this checkout:
``mkdir /tmp/before && git archive bfe3c06 dsprof | tar -x -C /tmp/before``, then
``python benchmarks/cli_startup.py /tmp/before .``. tests/test_cli_startup.py checks the cause (no heavy imports).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = (["--version"], ["--help"], ["models"], ["measure", "--help"], ["report", "--help"])
ENTRY = "import sys; from dsprof.cli import main; sys.exit(main())"


def wall_time(checkout: Path, argv: list[str]) -> float:
    """Seconds from starting the interpreter to its exit, for ``dsprof ARGV`` from ``checkout``."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    start = time.perf_counter()
    # cwd: `python -c` puts the working folder first on sys.path, ahead of PYTHONPATH
    subprocess.run([sys.executable, "-c", ENTRY, *argv], env=env, cwd=checkout, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkouts", nargs="*", type=Path, default=[Path(__file__).resolve().parents[1]])
    parser.add_argument("--repeat", type=int, default=5, help="runs per command and checkout")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.repeat):
        for command in COMMANDS:
            for checkout in args.checkouts:
                times.setdefault((" ".join(command), str(checkout)), []).append(wall_time(checkout, command))
    load_after = os.getloadavg()
    print(f"load average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
          f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f} ({os.cpu_count()} CPUs)")
    print("| command | checkout | median (s) | fastest (s) |\n| --- | --- | --- | --- |")
    for (command, checkout), samples in times.items():
        print(f"| `dsprof {command}` | {checkout} | {statistics.median(samples):.2f} | {min(samples):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
