"""benchmarks/planner_vs_random.py's `time_pairs`, the check that times each plan with the original in a group of two
(planner_vs_random and tie_break_check both time their plans with it): which runs are called, in which order, with
which seeds. The calls are counted, not timed: the order is worked out here from `random.Random`, not from the code."""

import importlib.util
import random
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1] / "benchmarks"
WARMUP = 5  # calls of each run before a group's rounds (planner_vs_random.time_group)


def load_script(name: str):
    sys.path.insert(0, str(SCRIPTS))  # tie_break_check imports planner_vs_random beside it
    try:
        spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(SCRIPTS))


def test_each_plan_is_built_then_timed_with_the_original_in_a_group_of_two_seeded_in_turn():
    pvr = load_script("planner_vs_random")
    calls: list[str] = []
    built: list[str] = []

    def build(plan: str):
        built.append(plan)
        calls.append(f"build {plan}")
        return lambda: calls.append(plan)

    pairs = pvr.time_pairs(lambda: calls.append("original"), ["a", "b", "c"], build, seconds=0.0, min_rounds=3,
                           seed=2000)
    want = []
    for i, plan in enumerate(["a", "b", "c"]):  # one group after the other, plan i shuffled with seed 2000 + i
        want += [f"build {plan}", *["original"] * WARMUP, *[plan] * WARMUP]
        rng = random.Random(2000 + i)
        for _ in range(3):  # no seconds to spend: the minimum of rounds
            order = [0, 1]
            rng.shuffle(order)
            want += [("original", plan)[j] for j in order]
    assert calls == want and built == ["a", "b", "c"]
    assert len(pairs) == 3 and all(len(o) == len(p) == 3 for o, p in pairs)  # (original's, plan's) samples, a round each
    assert all(s >= 0 for o, p in pairs for s in o + p)

