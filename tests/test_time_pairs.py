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



def test_in_both_build_orders_each_plan_is_timed_once_built_after_the_original_and_once_before_a_fresh_one():
    # --check-groups both-orders: per plan, a group with the original built first (the one passed in), then the plan
    # built again and a fresh original built after it, in a second group (seeded 500 later); half the minimum of rounds
    # each, the two groups' samples pooled round by round
    pvr = load_script("planner_vs_random")
    calls: list[str] = []

    def build(plan: str):
        calls.append(f"build {plan}")
        return lambda: calls.append(plan)

    def rebuild():
        calls.append("build original")
        return lambda: calls.append("fresh original")

    pairs = pvr.time_pairs(lambda: calls.append("original"), ["a", "b"], build, seconds=0.0, min_rounds=4, seed=10,
                           rebuild=rebuild)
    want = []
    for i, plan in enumerate(["a", "b"]):
        for original, first_built, seed in (("original", f"build {plan}", 10 + i),
                                            ("fresh original", None, 10 + i + 500)):
            if first_built is not None:
                want += [first_built]
            else:  # the plan built first, then the fresh original
                want += [f"build {plan}", "build original"]
            want += [*[original] * WARMUP, *[plan] * WARMUP]
            rng = random.Random(seed)
            for _ in range(2):  # half of min_rounds=4 in each group
                order = [0, 1]
                rng.shuffle(order)
                want += [(original, plan)[j] for j in order]
    assert calls == want
    assert len(pairs) == 2 and all(len(o) == len(p) == 4 for o, p in pairs)  # two rounds of each group, pooled

def test_identical_plans_are_pooled_before_the_front_is_scored_against_the_best():
    """planner_vs_random's `near_best` and `below_median`: a random plan that deploys what the front deploys is the front
    checked again. Worked by hand: the front (plan A) checked at 1.00x, three copies of A at 1.05, 0.98 and 1.10x, a
    different plan B at 1.01 and 1.03x. Pooled, the front is the median of its four checks, 1.025x, B 1.02x: the front
    is the best. As checked, the best random row is a copy of A at 1.10x, and the front (1.00x) would miss it by 9 %."""
    pvr = load_script("planner_vs_random")
    a, b = "[[0, 1], null, null, null]", "[[1, 0], null, null, null]"
    row = {"front": {"plan": "front-k1", "content": a, "measured": 1.00},
           "random": [{"plan": f"random-k1-{i}", "content": c, "measured": m}
                      for i, (c, m) in enumerate([(a, 1.05), (a, 0.98), (a, 1.10), (b, 1.01), (b, 1.03)])]}
    assert pvr.pooled(row) == (1.025, [1.02])
    assert pvr.near_best(row) and not pvr.below_median(row)
    assert row["front"]["measured"] < max(r["measured"] for r in row["random"]) * (1 - pvr.NEAR_BEST)  # as checked
    # B better than the pooled front by more than 2 %: missed, and below the median of the plans that differ
    row["random"][3]["measured"], row["random"][4]["measured"] = 1.06, 1.08
    assert not pvr.near_best(row) and pvr.below_median(row)
    # a k whose random plans are all the front: met, never below
    only = {"front": row["front"], "random": row["random"][:3]}
    assert pvr.near_best(only) and not pvr.below_median(only)


def test_a_front_within_the_noise_of_the_best_random_plan_is_told_apart_from_one_beyond_it():
    """planner_vs_random's `within_noise_of_best` (a diagnostic beside the near-best target): the front's measured
    95 % interval reaches the best random plan's. Worked by hand: front 1.00x (0.98-1.02), best random 1.05x
    (1.01-1.09): 1.01 <= 1.02, within the noise; best random 1.08x (1.05-1.11): beyond it."""
    pvr = load_script("planner_vs_random")
    front = {"plan": "front-k1", "measured": 1.00, "measured_low": 0.98, "measured_high": 1.02}
    other = {"plan": "random-k1-0", "measured": 0.99, "measured_low": 0.97, "measured_high": 1.01}
    best = {"plan": "random-k1-1", "measured": 1.05, "measured_low": 1.01, "measured_high": 1.09}
    assert pvr.within_noise_of_best({"front": front, "random": [other, best]})
    best.update(measured=1.08, measured_low=1.05, measured_high=1.11)
    assert not pvr.within_noise_of_best({"front": front, "random": [other, best]})
    assert not pvr.within_noise_of_best({"front": front, "random": []})
