"""Statistics and the timing loop against a seeded fake clock: no hardware, no timing asserts."""

import math
import random
import statistics

import numpy as np
import pytest

from dsprof.profiler import CpuTimer, TimingConfig, time_interleaved
from dsprof.portable import timing_loop
from dsprof.records.stats import median_ci, median_relative_halfwidth, paired_speedup, summarize


class FakeClock:
    """A nanosecond clock that only moves when a fake workload advances it."""

    def __init__(self) -> None:
        self.ns = 0

    def __call__(self) -> int:
        return self.ns

    def advance(self, seconds: float) -> None:
        self.ns += round(seconds * 1e9)


def fake_workload(clock: FakeClock, rng: random.Random, median_s: float, sigma: float, drawn: list):
    def run() -> None:
        t = median_s * rng.lognormvariate(0.0, sigma)
        drawn.append(t)
        clock.advance(t)

    return run


FAST = dict(warmup_s=0.0, warmup_min_iters=2, warmup_max_s=0.0, min_sample_s=0.0)


def test_summarize_matches_numpy():
    rng = np.random.default_rng(0)
    samples = list(rng.lognormal(-7, 0.3, size=501))
    s = summarize(samples)
    q25, q50, q75, p90, p99 = np.percentile(samples, [25, 50, 75, 90, 99])
    assert s.count == 501
    assert s.median == pytest.approx(q50, rel=1e-12)
    assert s.iqr == pytest.approx(q75 - q25, rel=1e-12)
    assert s.p90 == pytest.approx(p90, rel=1e-12) and s.p99 == pytest.approx(p99, rel=1e-12)
    assert s.mean == pytest.approx(np.mean(samples), rel=1e-12)
    assert s.cov == pytest.approx(np.std(samples, ddof=1) / np.mean(samples), rel=1e-9)


def test_noise_flag_at_ten_percent_iqr():
    assert not summarize([0.95, 0.99, 1.0, 1.01, 1.05]).noisy  # IQR/median = 0.02
    assert summarize([0.8, 0.9, 1.0, 1.1, 1.2]).noisy  # IQR/median = 0.2
    with pytest.raises(ValueError, match="no samples"):
        summarize([])


def test_median_ci_covers_the_true_median_about_95_percent_of_the_time():
    rng = random.Random(1)
    hits = 0
    trials = 400
    for _ in range(trials):
        xs = [rng.expovariate(1.0) for _ in range(60)]
        lo, hi = median_ci(xs)
        hits += lo <= math.log(2) <= hi
    assert 0.90 <= hits / trials <= 0.995


def test_median_ci_ranks_from_the_standard_library_quantile_are_normaldists():
    """The loop's z (bisection on math.erf, for Python 3.6) against statistics.NormalDist (Python >= 3.8): the
    same order statistics for every sample count a run can take, at the usual confidences."""
    for confidence in (0.8, 0.9, 0.95, 0.99):
        ours, exact = timing_loop.normal_quantile(confidence), statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
        assert ours == pytest.approx(exact, abs=1e-13)
        for n in range(6, 20_001):
            a, b = ours * math.sqrt(n) / 2, exact * math.sqrt(n) / 2
            assert (math.floor(n / 2 - a), math.ceil(n / 2 + a)) == (math.floor(n / 2 - b), math.ceil(n / 2 + b)), n
    assert timing_loop.normal_quantile(0.95) == pytest.approx(1.959963984540054, abs=1e-12)  # the 97.5 % quantile
    samples = [1.0, 2.0, 3.0, 4.0, 100.0]
    assert median_ci(samples) == (1.0, 100.0)  # below 6 samples: the full range
    assert median_relative_halfwidth(samples) == pytest.approx((100.0 - 1.0) / 2 / 3.0)
    assert math.isinf(median_relative_halfwidth([1.0]))
    with pytest.raises(ValueError, match="confidence"):
        median_ci(samples, 1.0)


def test_first_group_warms_up_longer():
    config = TimingConfig(warmup_s=0.05, warmup_max_s=2.0, first_warmup_s=0.5)
    first = config.first_group()
    assert (first.warmup_s, first.warmup_max_s) == (0.5, 2.0)
    assert first == TimingConfig(warmup_s=0.5, warmup_max_s=2.0, first_warmup_s=0.5)
    assert TimingConfig(warmup_s=0.0, warmup_max_s=0.1, first_warmup_s=0.3).first_group().warmup_max_s == 0.3


def test_fake_clock_samples_are_the_drawn_times():
    clock, rng, drawn = FakeClock(), random.Random(2), []
    config = TimingConfig(**FAST, min_samples=20, max_samples=20, budget_s=1e9, target_precision=1e-6)
    result = time_interleaved({"a": fake_workload(clock, rng, 1e-3, 0.05, drawn)}, config, CpuTimer(clock), clock)["a"]
    assert result.stop_reason == "max_samples"
    assert result.iterations_per_sample == 1 and len(result.samples_s) == 20
    timed = drawn[result.warmup_iterations :]
    np.testing.assert_allclose(result.samples_s, timed, rtol=0, atol=2e-9)
    assert summarize(result.samples_s).median == pytest.approx(float(np.median(timed)), abs=2e-9)


def test_adaptive_stop_at_target_precision_with_little_noise():
    clock, rng, drawn = FakeClock(), random.Random(3), []
    config = TimingConfig(**FAST, min_samples=10, max_samples=5000, budget_s=1e9, target_precision=0.02)
    result = time_interleaved({"a": fake_workload(clock, rng, 1e-3, 0.02, drawn)}, config, CpuTimer(clock), clock)["a"]
    assert result.stop_reason == "precision"
    assert median_relative_halfwidth(result.samples_s) <= 0.02
    # One fewer sample would not have met the target (it stopped at the first round that did), unless at min_samples.
    assert len(result.samples_s) == 10 or median_relative_halfwidth(result.samples_s[:-1]) > 0.02
    assert summarize(result.samples_s).median == pytest.approx(1e-3, rel=0.02)


def test_adaptive_stop_on_budget_with_much_noise():
    clock, rng, drawn = FakeClock(), random.Random(4), []
    config = TimingConfig(**FAST, min_samples=10, max_samples=100_000, budget_s=0.05, target_precision=0.001)
    result = time_interleaved({"a": fake_workload(clock, rng, 1e-3, 0.5, drawn)}, config, CpuTimer(clock), clock)["a"]
    assert result.stop_reason == "budget"
    timed_s = sum(result.samples_s)
    assert 0.05 <= timed_s <= 0.05 + 0.02  # stops in the round after the budget is spent
    assert summarize(result.samples_s).noisy


def test_iterations_per_sample_calibrated_from_warm_up():
    clock, drawn = FakeClock(), []
    run = lambda: clock.advance(1e-4)  # noqa: E731 - exactly 100 us per call
    config = TimingConfig(warmup_s=0.001, warmup_min_iters=3, min_sample_s=1e-3, min_samples=5, max_samples=5)
    result = time_interleaved({"a": run}, config, CpuTimer(clock), clock)["a"]
    assert result.iterations_per_sample == 10
    np.testing.assert_allclose(result.samples_s, [1e-4] * 5, rtol=1e-9)


def test_one_count_of_calls_per_sample_for_the_group_keeps_a_cache_refill_out_of_the_ratio():
    """Issue #46: the first call after another workload ran pays a refill (here 1 ms, on calls of 3 ms and 1 ms).
    Both workloads take the slower one's count (2 calls fill a 5 ms sample), so each per-call sample carries the
    same 0.5 ms: (1 + 0.5) / (3 + 0.5), worked by hand. With a count each (5 for the fast one) the fast one would
    carry 0.2 ms and the ratio read (1 + 0.2) / (3 + 0.5) = 0.343, a saving over-stated by 8 points."""
    clock, last = FakeClock(), []

    def workload(name: str, seconds: float):
        def run() -> None:
            clock.advance(seconds + (1e-3 if last and last[-1] != name else 0.0))
            last.append(name)

        return run

    config = TimingConfig(warmup_s=0.0, warmup_min_iters=6, warmup_max_s=1.0, min_sample_s=5e-3, min_samples=8,
                          max_samples=8)
    out = time_interleaved({"slow": workload("slow", 3e-3), "fast": workload("fast", 1e-3)}, config,
                           CpuTimer(clock), clock)
    assert out["slow"].iterations_per_sample == out["fast"].iterations_per_sample == 2
    ratios = [f / s for s, f in zip(out["slow"].samples_s, out["fast"].samples_s)]
    assert statistics.median(ratios) == pytest.approx(1.5 / 3.5, rel=1e-9)


def test_warm_up_runs_on_until_the_call_time_settles():
    clock, calls = FakeClock(), []

    def run():  # starts 5x slower and settles towards 1 ms (caches, allocator, thread pool)
        calls.append(1)
        clock.advance(1e-3 + 4e-3 * 0.8 ** len(calls))

    config = TimingConfig(warmup_s=0.0, warmup_min_iters=3, warmup_max_s=10.0, min_sample_s=0.0, min_samples=5, max_samples=5)
    result = time_interleaved({"a": run}, config, CpuTimer(clock), clock)["a"]
    assert result.warmup_iterations > 6  # went on past the minimum while the time kept falling
    assert all(t < 1.25e-3 for t in result.samples_s)


def test_a_group_warms_up_in_rounds_so_no_workload_has_cooled_by_the_first_round():
    """Two copies of one workload whose call warms its caches (3 ms cold, 1 ms + 2 ms / 2^n after n calls) and which
    a run of more than 4 calls of the other evicts. Warmed one after the other, the first had cooled by the first
    round (3, 2, 1.5 ms ...: an A/A group read the copy timed first slower, as PyTorch eager did,
    benchmarks/warm_order.py); warmed in rounds, as they are timed, every round of both orders reads the two alike."""
    clock, warm, idle = FakeClock(), {"a": 0, "b": 0}, {"a": 0, "b": 0}

    def copy(name: str, other: str):
        def run() -> None:
            warm[name] = 0 if idle[name] > 4 else warm[name]
            clock.advance(1e-3 + 2e-3 * 0.5 ** warm[name])
            warm[name], idle[name], idle[other] = warm[name] + 1, 0, idle[other] + 1

        return run

    config = TimingConfig(warmup_s=0.0, warmup_min_iters=6, warmup_max_s=1.0, min_sample_s=0.0, min_samples=6,
                          max_samples=100, budget_s=1e9, target_precision=0.5)
    out = time_interleaved({"a": copy("a", "b"), "b": copy("b", "a")}, config, CpuTimer(clock), clock)
    assert out["a"].warmup_iterations == out["b"].warmup_iterations >= 6  # one call each a round
    ratios = [b / a for a, b in zip(out["a"].samples_s, out["b"].samples_s)]
    assert len(ratios) == 12  # 6 rounds a b, 6 rounds b a
    assert ratios == pytest.approx([1.0] * 12, abs=0.02)  # 2 ms / 2^6 at most apart: 1 ms + 31 us against 1 ms


def test_variants_are_interleaved_in_rotating_order():
    clock, order = FakeClock(), []

    def make(name, t):
        def run():
            order.append(name)
            clock.advance(t)

        return run

    config = TimingConfig(**FAST, min_samples=3, max_samples=3, budget_s=1e9)
    result = time_interleaved({"a": make("a", 1e-3), "b": make("b", 2e-3), "c": make("c", 3e-3)}, config, CpuTimer(clock), clock)
    timed = order[-9:]
    assert timed == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert {k: len(v.samples_s) for k, v in result.items()} == {"a": 3, "b": 3, "c": 3}


def test_two_variants_are_timed_half_in_each_order_and_neither_runs_right_after_itself():
    """Timed in one order, a group of two reads its second workload faster (the timing loop's module docstring:
    0.5-1.5 % on PyTorch eager here), so half of the rounds take each order. Rotating two every round ("ab", "ba")
    would time each back to back, warm, every other round (issue #27: a merged model against the original on ONNX
    Runtime gave per-round ratios alternating 1.33 and 1.72), so the order changes once, after a sample of the first
    workload that is not kept. Written out by hand: 3 rounds a b (no noise: precise at min_samples), the spacer a,
    3 rounds b a."""
    clock, order = FakeClock(), []

    def make(name, seconds):
        def run():
            order.append(name)
            clock.advance(seconds)

        return run

    config = TimingConfig(**FAST, min_samples=3, max_samples=100, budget_s=1e9)
    out = time_interleaved({"a": make("a", 1e-3), "b": make("b", 2e-3)}, config, CpuTimer(clock), clock)
    timed = order[-13:]  # after the warm-up calls, one call a sample (min_sample_s=0)
    assert timed == ["a", "b"] * 3 + ["a"] + ["b", "a"] * 3
    assert all(x != y for x, y in zip(timed, timed[1:]))
    assert out["a"].samples_s == pytest.approx([1e-3] * 6) and out["b"].samples_s == pytest.approx([2e-3] * 6)
    assert out["a"].stop_reason == "precision"


def test_two_variants_share_the_budget_and_the_most_samples_between_the_two_orders():
    """A budget or ``max_samples`` ends the first half at half of it: 5 rounds of 10 in the first order, then 5 in the
    other."""
    clock = FakeClock()
    rng = random.Random(1)

    def make(seconds):
        def run():
            clock.advance(seconds * rng.lognormvariate(0, 0.3))  # too noisy for any precision

        return run

    config = TimingConfig(**FAST, min_samples=3, max_samples=10, budget_s=1e9, target_precision=1e-9)
    out = time_interleaved({"a": make(1e-3), "b": make(2e-3)}, config, CpuTimer(clock), clock)
    assert len(out["a"].samples_s) == len(out["b"].samples_s) == 10 and out["a"].stop_reason == "max_samples"
    config = TimingConfig(**FAST, min_samples=3, max_samples=10_000, budget_s=0.1, target_precision=1e-9)
    out = time_interleaved({"a": make(1e-3), "b": make(2e-3)}, config, CpuTimer(clock), clock)
    # the first half stops once half of 2 x 0.1 s is spent (about 33 rounds of 1 + 2 ms); the second repeats it
    rounds = len(out["a"].samples_s) // 2
    assert out["a"].stop_reason == "budget" and len(out["a"].samples_s) == 2 * rounds
    assert 0.1 / 3e-3 * 0.7 < rounds < 0.1 / 3e-3 * 1.4


def test_paired_speedup_removes_common_drift():
    rng = random.Random(5)
    drift = [1 + 0.5 * math.sin(i / 5) for i in range(200)]  # a slow common drift of +-50 %
    original = [2e-3 * d * rng.lognormvariate(0, 0.01) for d in drift]
    dense = [1e-3 * d * rng.lognormvariate(0, 0.01) for d in drift]
    up = paired_speedup(original, dense)
    assert up.ratio == pytest.approx(2.0, rel=0.01)
    assert up.low <= 2.0 <= up.high and up.high - up.low < 0.02
    assert up.significant and up.pairs == 200
    same = paired_speedup(original, original)
    assert same.ratio == 1.0 and not same.significant
    with pytest.raises(ValueError, match="differ in length"):
        paired_speedup([1.0, 2.0], [1.0])


def test_timing_config_rejects_nonsense():
    with pytest.raises(ValueError, match="target_precision"):
        TimingConfig(target_precision=2)
    with pytest.raises(ValueError, match="budget_s"):
        TimingConfig(budget_s=0)
    with pytest.raises(ValueError, match="min_samples"):
        TimingConfig(min_samples=1)


def test_max_warmup_caps_every_groups_warm_up_the_first_one_too():
    """``--max-warmup S`` (measure, export): no workload warms up longer than S, though its time never settles and
    the first group of a run would otherwise warm up for 0.5 s; without it the caps stay 2 s and 0.5 s."""
    from dsprof.cli.main import build_parser
    from dsprof.cli.options import timing_from_args

    def settings(*flags):
        return timing_from_args(build_parser().parse_args(["measure", "--model", "mobilenet_v2", *flags]))

    assert (settings().warmup_max_s, settings().first_warmup_s) == (2.0, 0.5)
    assert settings("--warmup", "3").warmup_max_s == 3.0  # a longer shortest warm-up lifts the cap
    config = settings("--max-warmup", "0.02", "--warmup", "0", "--min-samples", "2", "--max-samples", "2",
                      "--min-sample-time", "0")
    clock = FakeClock()

    def run():  # 1 ms and 3 ms in turn: the last three calls never agree with the three before
        clock.advance(1e-3 if clock.ns // 1_000_000 % 2 else 3e-3)

    for first in (config.first_group(), config):
        start = clock.ns
        result = time_interleaved({"a": run}, first, CpuTimer(clock), clock)["a"]
        warm_s = (clock.ns - start) * 1e-9 - sum(result.samples_s) * result.iterations_per_sample
        assert warm_s <= 0.02 + 3e-3 + 1e-9  # the cap, and the one call that crossed it
        assert result.warmup_iterations <= 0.02 / 1e-3 + 1
    with pytest.raises(ValueError, match="warmup_max_s"):
        settings("--max-warmup", "0.01", "--warmup", "0.05")
    # NaN passed every bound, and NaN or inf let the run time on, to fail writing its records' JSON (an export's
    # manifest read "Infinity"): refused first, by name
    for flag, field, value in (("--max-warmup", "warmup_max_s", "nan"), ("--budget", "budget_s", "nan"),
                               ("--target-precision", "target_precision", "nan"), ("--budget", "budget_s", "inf"),
                               ("--max-warmup", "warmup_max_s", "inf")):
        with pytest.raises(ValueError, match=rf"`{field}={value}`: give a finite number"):
            settings(flag, value)
