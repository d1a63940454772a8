"""The timing loop, written once: warm-up, the order of the interleaved rounds, the stopping rule and the
statistics it stops on.

Standard library only, and Python 3.6 or later (``tests/test_edge_runner.py`` checks both): dsprof's profiler
runs it (`dsprof.profiler.timing` wraps it with `TimingConfig` and `TimingResult`), and every export bundle
carries this very file beside its runner (``run_bundle.py``, `dsprof.edge.runner`), which imports it. A device
without dsprof thus times a bundle exactly as ``dsprof measure`` times the same workloads.

* **Warm-up** (`warm_up_group`): in rounds of one call of each workload, as they are then timed, until each has
  made ``warmup_min_iters`` calls and its call time has settled (the median of the last 3 calls within 20 % of the
  3 before), and the group has run ``warmup_s`` per workload; at most until one has spent ``warmup_max_s``. The
  first group of a run warms up for at least ``first_warmup_s`` a workload (`first_group`). Warmed one after the
  other, the workload warmed first had cooled by the first round (`benchmarks/warm_order.py`, issue #46: two
  copies of one model, PyTorch eager, read the one warmed first 0.9-3.6 % slower in the first order's rounds).
  Each workload's last calls set how many calls make one sample: enough to last ``min_sample_s``, at most
  ``max_iterations_per_sample``.
* **One count for the group** (`group_number`): every workload of a group takes as many calls per sample as the
  slowest one needs. The first call of a sample, right after another workload ran, pays to refill the caches;
  a workload given more calls per sample spreads that cost thinner, so a count each tilts a paired ratio toward
  the faster one. Measured in the same rounds (`benchmarks/calls_per_sample.py`, issue #46): MobileNetV2-0.35 at
  128 px with every block merged, 2 calls a sample against the original's 1, read a saving of 54.2 % where one
  count for both read 52.9 % (a plain loop of one call each: 52.7 %); at 64 and 224 px the two agreed within
  0.5 points. Small, but one-sided, and in the groups the in-model prices are fitted from.
* **Rounds** (`round_order`): each round takes one sample of every workload of the group, in an order that
  rotates from round to round, so that drift hits all alike and sample ``i`` of each comes from round ``i``;
  two workloads keep one order (see `round_order`) for half of the rounds and take the other for the other half.
* **Two workloads, two halves**: timed in one order, a group of two reads its second workload faster. Two fresh
  copies of one model, PyTorch eager on one CPU thread (``benchmarks/pair_order.py``, issue #46): the second read
  0.5-1.5 % faster whichever copy it was; a plan's merged model against its original, 0.3-1.4 % (MobileNetV2-0.5 at
  96 px: 1.384x with the plan second, 1.347x first). Every check of one plan, every piece timed inside the model and
  every session pair is such a group. So the rounds the stopping rule ends (at most half of ``max_samples``, in half
  the budget) are followed by as many in the other order, after one sample of the first workload that is not kept
  (the second half must not open with the workload that closed the first, right after itself: "ab ba" rounds
  split a paired ratio into two modes, `round_order`). Sample ``i`` of both still comes from one round, and half
  of the rounds have each order: the position's effect cancels in the median of the per-round ratios.
* **Resuming** (`left_to_time`): a run resumed on a file that holds part of a group (a run that asked for fewer
  variants, or was cut short mid-group) times what the group lacks with its original again: a variant's paired
  ratio is over the original of its own group, round by round, and one timed alone has none.
* **Stopping** (`time_interleaved`): after ``min_samples`` rounds, as soon as the median of every workload is
  known to ``target_precision`` (`median_relative_halfwidth`); or once the budget (``budget_s`` per workload)
  is spent, after at least 2 rounds; or at ``max_samples``. The reason is one of `STOP_REASONS` (of the first half,
  for two workloads).

The clock is injectable (integer nanoseconds), so the whole loop can be tested with a fake clock.
"""

import math
import statistics
import time

__all__ = [
    "CLOCK",
    "DEFAULTS",
    "STOP_REASONS",
    "CpuTimer",
    "first_group",
    "group_number",
    "left_to_time",
    "median_ci",
    "median_relative_halfwidth",
    "normal_quantile",
    "round_order",
    "time_interleaved",
    "warm_up",
    "warm_up_group",
]

#: The timing settings and their defaults (seconds; ``target_precision`` and ``confidence`` are fractions).
#: `dsprof.profiler.TimingConfig` has these fields with these defaults; a bundle's manifest stores them.
DEFAULTS = {
    "warmup_s": 0.05,
    "warmup_min_iters": 3,
    "warmup_max_s": 2.0,
    "first_warmup_s": 0.5,
    "min_samples": 10,
    "max_samples": 2000,
    "target_precision": 0.02,
    "confidence": 0.95,
    "budget_s": 1.0,
    "min_sample_s": 5e-3,
    "max_iterations_per_sample": 1000,
}

#: Why a timed loop stopped.
STOP_REASONS = ("precision", "budget", "max_samples")

#: Warm-up calls at most, whatever the settings say (a call of a few nanoseconds would otherwise run for seconds).
_MAX_WARMUP_CALLS = 10000


def _perf_counter_ns():
    return int(time.perf_counter() * 1e9)


#: The default clock: integer nanoseconds from an arbitrary origin (``time.perf_counter_ns`` from Python 3.7 on).
CLOCK = getattr(time, "perf_counter_ns", _perf_counter_ns)


class CpuTimer(object):
    """Host-clock timer: ``clock()`` before and after ``number`` back-to-back calls of ``fn`` (after ``sync()``
    when given, e.g. a device synchronisation); returns seconds per call."""

    def __init__(self, clock=CLOCK, sync=None):
        self.clock = clock
        self.sync = sync

    def __call__(self, fn, number):
        sync, clock = self.sync, self.clock
        if sync is not None:
            sync()
        start = clock()
        for _ in range(number):
            fn()
        if sync is not None:
            sync()
        return (clock() - start) * 1e-9 / number


# -- statistics ------------------------------------------------------------------------------------------------

_QUANTILES = {}


def normal_quantile(confidence):
    """The two-sided normal quantile z of ``confidence`` (1.96 at 0.95): bisection on ``math.erf``, since
    ``statistics.NormalDist`` needs Python 3.8 (for every n up to 200,000 it gives the same ranks in `median_ci`)."""
    if not 0 < confidence < 1:
        raise ValueError("confidence must be within (0, 1), got %r" % (confidence,))
    if confidence not in _QUANTILES:
        target, lo, hi = 0.5 + confidence / 2, 0.0, 40.0
        for _ in range(200):
            mid = (lo + hi) / 2
            if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < target:
                lo = mid
            else:
                hi = mid
        _QUANTILES[confidence] = (lo + hi) / 2
    return _QUANTILES[confidence]


def median_ci(samples, confidence=0.95):
    """Distribution-free confidence interval (low, high) of the median: the order statistics at ranks
    n/2 -+ z*sqrt(n)/2 (normal approximation of the binomial). With fewer than 6 samples, the full range."""
    s = sorted(samples)
    n = len(s)
    if n == 0:
        raise ValueError("no samples")
    half = normal_quantile(confidence) * math.sqrt(n) / 2
    lo = max(0, int(math.floor(n / 2 - half)))
    hi = min(n - 1, int(math.ceil(n / 2 + half)) - 1)
    if n < 6:
        lo, hi = 0, n - 1
    return s[lo], s[hi]


def median_relative_halfwidth(samples, confidence=0.95):
    """Half-width of `median_ci` divided by the median: 0.02 means the median is known to +-2 % (inf below 2
    samples or at a median of 0)."""
    if len(samples) < 2:
        return math.inf
    lo, hi = median_ci(samples, confidence)
    med = statistics.median(samples)
    return (hi - lo) / 2 / med if med > 0 else math.inf


# -- the loop --------------------------------------------------------------------------------------------------


def _settled(times, tolerance=0.2):
    """True when the median of the last 3 warm-up calls is within ``tolerance`` of the 3 before."""
    if len(times) < 6:
        return False
    last, before = statistics.median(times[-3:]), statistics.median(times[-6:-3])
    return abs(last - before) <= tolerance * before


def warm_up(fn, timer, clock, config):
    """Run ``fn`` for at least ``warmup_s`` and ``warmup_min_iters`` calls, and on until the call time has
    settled (or ``warmup_max_s`` is spent); return (calls made, calls per sample)."""
    return warm_up_group([("", fn)], timer, clock, config)[""]


def warm_up_group(pairs, timer, clock, config):
    """Warm up the workloads of one group (``pairs``: (name, fn), in order) in rounds of one call each, as they are
    timed: on until each has made ``warmup_min_iters`` calls and its call time has settled, and the group has run
    ``warmup_s`` per workload; at most until one of them has spent ``warmup_max_s``. Return {name: (calls made,
    calls per sample)}. One after the other, the workload warmed up first had cooled by the first round: two copies
    of one model read it 0.9-3.6 % slower in the rounds of the first order (`benchmarks/warm_order.py`)."""
    times = dict((name, []) for name, _ in pairs)
    spent = dict((name, 0.0) for name, _ in pairs)
    start = clock()
    while True:
        for name, fn in pairs:
            before = clock()
            times[name].append(timer(fn, 1))
            spent[name] += (clock() - before) * 1e-9
        elapsed = (clock() - start) * 1e-9
        calls = len(times[pairs[0][0]])
        if calls >= _MAX_WARMUP_CALLS or max(spent.values()) >= config["warmup_max_s"]:
            break
        if (calls >= config["warmup_min_iters"] and elapsed >= config["warmup_s"] * len(pairs)
                and all(_settled(t) for t in times.values())):
            break
    return dict((name, (len(t), _calls_per_sample(t, config))) for name, t in times.items())


def _calls_per_sample(times, config):
    """Calls that make one sample of at least ``min_sample_s``, from the last warm-up calls (the first ones pay for
    caches, allocation, autotuning); at most ``max_iterations_per_sample``."""
    per_call = statistics.median(times[-3:])
    if per_call <= 0:
        number = config["max_iterations_per_sample"]
    else:
        number = int(math.ceil(config["min_sample_s"] / per_call))
    return max(1, min(config["max_iterations_per_sample"], number))


def group_number(numbers):
    """The calls per sample of every workload of a group, from each one's own count (`warm_up_group`): the slowest
    workload's, the smallest count (see the module docstring: one count, so that the cost of the first call of a
    sample weighs alike in every workload's time)."""
    return min(numbers)


def first_group(config):
    """``config`` (a mapping) for the first group of a run, which also pays for thread pools and allocator
    growth: warm-up and its cap raised to ``first_warmup_s`` at least."""
    out = dict(config)
    out["warmup_s"] = max(config["warmup_s"], config["first_warmup_s"])
    out["warmup_max_s"] = max(config["warmup_max_s"], config["first_warmup_s"])
    return out


def left_to_time(group, done, original):
    """What of ``group`` (workloads, in order) a resumed run times: those for which ``done(w)`` is false, and, where
    some of the group are done, the ones for which ``original(w)`` is true as well (the module docstring)."""
    missing = [w for w in group if not done(w)]
    if not missing or len(missing) == len(group):
        return missing
    return [w for w in group if not done(w) or original(w)]


def round_order(names, round_index):
    """The order in which round ``round_index`` (from 0) times ``names``.

    Rotating moves each workload's place in the round without ever timing one twice in a row (round i ends with
    the workload before round i + 1's first) -- except with two: "ab ba" would time each right after itself every
    other round, warm, and split the per-round ratios into two modes (a check of a merged model against the
    original on ONNX Runtime: 1.33 and 1.72 alternating). Two keep one order; `time_interleaved` then times as
    many rounds again in the other order.
    """
    names = list(names)
    shift = round_index % len(names) if len(names) > 2 else 0
    return names[shift:] + names[:shift]


def time_interleaved(fns, config=None, timer=None, clock=CLOCK):
    """Warm up and time the callables ``fns`` (a mapping or a list of (name, fn) pairs, in order) in interleaved
    rounds; see the module docstring.

    ``config`` holds `DEFAULTS` keys (missing ones take the default). ``timer(fn, number)`` returns seconds per
    call (default: a `CpuTimer` on ``clock``); the budget is always kept with ``clock``. Returns
    {name: {"samples_s", "iterations_per_sample", "warmup_iterations", "stop_reason"}}, all with as many samples
    (sample i of every name from round i).
    """
    pairs = list(fns.items()) if hasattr(fns, "items") else list(fns)
    if not pairs:
        raise ValueError("nothing to time")
    settings = dict(DEFAULTS)
    settings.update(config or {})
    timer = timer or CpuTimer(clock)
    names = [name for name, _ in pairs]
    table = dict(pairs)
    warm = warm_up_group(pairs, timer, clock, settings)
    number = group_number(warm[name][1] for name in names)
    samples = dict((name, []) for name in names)
    halves = 2 if len(names) == 2 else 1  # two workloads: a second half in the other order (the module docstring)
    budget_ns = settings["budget_s"] * len(names) * 1e9 / halves
    start = clock()
    reason = "max_samples"
    for round_index in range(max(1, settings["max_samples"] // halves)):  # at least one: ``n`` is always set
        for name in round_order(names, round_index):
            samples[name].append(timer(table[name], number))
        n = round_index + 1
        if n >= settings["min_samples"] and all(
            median_relative_halfwidth(samples[name], settings["confidence"]) <= settings["target_precision"]
            for name in names
        ):
            reason = "precision"
            break
        if clock() - start >= budget_ns and n >= 2:
            reason = "budget"
            break
    if halves == 2:
        first, second = names
        timer(table[first], number)  # not kept: the other order must not open with the workload that just ran
        for _ in range(n):
            for name in (second, first):
                samples[name].append(timer(table[name], number))
    return dict(
        (name, {"samples_s": samples[name], "iterations_per_sample": number,
                "warmup_iterations": warm[name][0], "stop_reason": reason})
        for name in names
    )
