"""A fake machine for the timing loop: a nanosecond clock that moves only when a workload runs, and workloads that
log each call. Standard library and Python 3.6 only: a test copies this file beside a bundle's runner and drives
it there, in a Python that has neither dsprof nor anything but the standard library.

``python fake_machine.py FOLDER COSTS_JSON CONFIG_JSON NOISE SEED`` imports the runner of the bundle in FOLDER
(``run_bundle.py``, which imports its ``timing_loop.py``), times the workloads of COSTS_JSON (a list of
[name, nanoseconds per call]) with its loop on a fake machine, and prints, as JSON, the results, the calls made
and the modules imported.
"""

import json
import random
import sys


class FakeMachine(object):
    """Each call of workload ``name`` advances the clock by ``costs_ns[name] * (1 + noise * U(0, 1))`` (seeded)
    and is logged in ``calls``."""

    def __init__(self, costs_ns, noise, seed):
        self.now, self.costs, self.noise, self.rng = 0, dict(costs_ns), noise, random.Random(seed)
        self.calls = []

    def clock(self):
        return self.now

    def fn(self, name):
        def call():
            self.calls.append(name)
            self.now += int(self.costs[name] * (1 + self.noise * self.rng.random()))

        return call


def sample_order(calls, names, results):
    """The order in which the loop took its samples, one name per sample, read from the logged calls: the warm-up
    calls come first, in rounds of one call of each workload in the group's order (as many rounds as each one's
    ``warmup_iterations``), then every sample is ``iterations_per_sample`` consecutive calls of one workload.
    Raises AssertionError where the calls do not follow that pattern."""
    counts = {results[name]["warmup_iterations"] for name in names}
    assert len(counts) == 1, counts  # one round gives each workload one call
    position = counts.pop() * len(names)
    assert calls[:position] == list(names) * (position // len(names)), calls[:position]
    order = []
    while position < len(calls):
        name = calls[position]
        count = results[name]["iterations_per_sample"]
        assert calls[position:position + count] == [name] * count, (name, calls[position:position + count])
        order.append(name)
        position += count
    return order


def main(argv):
    folder, costs, config, noise, seed = argv[0], json.loads(argv[1]), json.loads(argv[2]), float(argv[3]), int(argv[4])
    sys.path.insert(0, folder)
    import run_bundle  # noqa: E402 - from the bundle folder, as `python3 run_bundle.py` would run it

    machine = FakeMachine(costs, noise, seed)
    results = run_bundle.time_interleaved([(name, machine.fn(name)) for name, _ in costs], config, clock=machine.clock)
    print(json.dumps({"results": results, "calls": machine.calls, "modules": sorted(sys.modules)}))


if __name__ == "__main__":
    main(sys.argv[1:])
