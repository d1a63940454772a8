"""The timing core: warm-up, interleaved timed rounds, adaptive stopping.

Every variant of a workload group (e.g. a block's ``original``, ``merged`` and ``flops_matched``
forms) is warmed up (at least ``warmup_s`` and ``warmup_min_iters`` calls, and on until the call
time has settled: the median of the last 3 calls within 20 % of the 3 before, at most
``warmup_max_s``; the runner gives the first group of a run ``first_warmup_s``, since the first
calls in a process also pay for thread pools and allocator growth), then timed in *rounds*: each round takes one sample of every variant, in an
order that rotates from round to round (two variants keep one order: rotating them would time each
right after itself every other round), so that drift (clock boosts, thermal throttling, other
load) hits all variants alike and samples of the same round can be paired.

A sample is the time of ``iterations_per_sample`` back-to-back calls divided by that number: the
count is calibrated during warm-up so that one sample lasts at least ``min_sample_s`` (clock
overhead stays negligible for microsecond-sized blocks, as in ``torch.utils.benchmark``).

Stopping: after ``min_samples`` rounds, as soon as the median of every variant is known to the
target precision (`median_relative_halfwidth` <= ``target_precision``), or when the time budget
(``budget_s`` per variant) or ``max_samples`` is spent. The reason is recorded.

Clocks: on the CPU, `CpuTimer` reads an injectable nanosecond clock (default
``time.perf_counter_ns``) around the calls, after an optional ``sync`` (e.g. a device
synchronisation). On CUDA, `CudaEventTimer` records CUDA events around the calls and synchronises
on the end event. The budget is kept with the same injectable clock, so the whole loop, and the
statistics, can be tested with a fake clock and no hardware.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Callable, Mapping, Protocol

from ..errors import UsageError
from .stats import median_relative_halfwidth

__all__ = [
    "Clock",
    "CpuTimer",
    "CudaEventTimer",
    "STOP_REASONS",
    "Timer",
    "TimingConfig",
    "TimingResult",
    "time_interleaved",
]

#: A clock returns an integer number of nanoseconds from an arbitrary origin (``time.perf_counter_ns``).
Clock = Callable[[], int]

#: Why a timed loop stopped.
STOP_REASONS = ("precision", "budget", "max_samples")


class Timer(Protocol):
    """Times ``number`` back-to-back calls of ``fn`` and returns seconds per call."""

    def __call__(self, fn: Callable[[], object], number: int) -> float: ...


class CpuTimer:
    """Host-clock timer: ``clock()`` before and after the calls (after ``sync()`` when given)."""

    def __init__(self, clock: Clock = time.perf_counter_ns, sync: Callable[[], None] | None = None) -> None:
        self.clock = clock
        self.sync = sync

    def __call__(self, fn: Callable[[], object], number: int) -> float:
        sync, clock = self.sync, self.clock
        if sync is not None:
            sync()
        start = clock()
        for _ in range(number):
            fn()
        if sync is not None:
            sync()
        return (clock() - start) * 1e-9 / number


class CudaEventTimer:
    """CUDA timer: events recorded on the current stream around the calls, then synchronised.

    Measures device time of the queued work, without the host-side launch gaps before the first
    call (the stream is synchronised before the start event is recorded)."""

    def __init__(self, device: object = None) -> None:
        import torch

        self._torch = torch
        self.device = device
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)

    def __call__(self, fn: Callable[[], object], number: int) -> float:
        cuda = self._torch.cuda
        cuda.synchronize(self.device)
        self._start.record()
        for _ in range(number):
            fn()
        self._end.record()
        self._end.synchronize()
        return self._start.elapsed_time(self._end) * 1e-3 / number  # elapsed_time is in ms


@dataclass(frozen=True)
class TimingConfig:
    """Settings of the timed loop. Times in seconds; ``target_precision`` is relative (0.02 = 2 %)."""

    warmup_s: float = 0.05
    warmup_min_iters: int = 3
    warmup_max_s: float = 2.0
    first_warmup_s: float = 0.5
    min_samples: int = 10
    max_samples: int = 2000
    target_precision: float = 0.02
    confidence: float = 0.95
    budget_s: float = 1.0
    min_sample_s: float = 5e-3
    max_iterations_per_sample: int = 1000

    def __post_init__(self) -> None:
        if self.first_warmup_s < 0 or self.warmup_s < 0 or self.warmup_min_iters < 0 or self.warmup_max_s < self.warmup_s:
            raise UsageError("need warm-up time and iterations >= 0 and warmup_max_s >= warmup_s")
        if self.min_samples < 2 or self.max_samples < self.min_samples:
            raise UsageError(f"need 2 <= min_samples <= max_samples, got {self.min_samples}, {self.max_samples}")
        if not 0 < self.target_precision < 1:
            raise UsageError(f"target_precision is a fraction within (0, 1), got {self.target_precision}")
        if self.budget_s <= 0:
            raise UsageError(f"budget_s must be > 0 seconds, got {self.budget_s}")
        if self.min_sample_s < 0 or self.max_iterations_per_sample < 1:
            raise UsageError("min_sample_s must be >= 0 and max_iterations_per_sample >= 1")


@dataclass(frozen=True)
class TimingResult:
    """Raw samples of one variant (seconds per call), how they were taken and why the loop stopped."""

    samples_s: tuple[float, ...]
    iterations_per_sample: int
    warmup_iterations: int
    stop_reason: str


def _settled(times: list[float], tolerance: float = 0.2) -> bool:
    """True when the median of the last 3 warm-up calls is within ``tolerance`` of the 3 before."""
    if len(times) < 6:
        return False
    last, before = statistics.median(times[-3:]), statistics.median(times[-6:-3])
    return abs(last - before) <= tolerance * before


def _warm_up(fn: Callable[[], object], timer: Timer, clock: Clock, config: TimingConfig) -> tuple[int, int]:
    """Run ``fn`` for at least ``warmup_s`` and ``warmup_min_iters`` calls, and on until the call time
    has settled (or ``warmup_max_s`` is spent); return (calls made, iterations per sample)."""
    times: list[float] = []
    start = clock()
    while True:
        times.append(timer(fn, 1))
        elapsed = (clock() - start) * 1e-9
        if len(times) >= 10_000 or elapsed >= config.warmup_max_s:
            break
        if len(times) >= config.warmup_min_iters and elapsed >= config.warmup_s and _settled(times):
            break
    # The last calls estimate one call's time (the first ones pay for caches, allocation, autotuning).
    per_call = statistics.median(times[-3:])
    if per_call <= 0:
        number = config.max_iterations_per_sample
    else:
        number = math.ceil(config.min_sample_s / per_call)
    return len(times), max(1, min(config.max_iterations_per_sample, number))


def time_interleaved(
    fns: Mapping[str, Callable[[], object]],
    config: TimingConfig = TimingConfig(),
    timer: Timer | None = None,
    clock: Clock = time.perf_counter_ns,
) -> dict[str, TimingResult]:
    """Warm up and time every callable of ``fns`` in interleaved rounds; see the module docstring.

    ``timer`` defaults to a `CpuTimer` on ``clock``; the budget is always kept with ``clock``.
    Returns one `TimingResult` per name, all with the same number of samples (sample ``i`` of
    every variant comes from round ``i``).
    """
    if not fns:
        raise UsageError("nothing to time")
    timer = timer or CpuTimer(clock)
    names = list(fns)
    warm: dict[str, tuple[int, int]] = {name: _warm_up(fns[name], timer, clock, config) for name in names}
    samples: dict[str, list[float]] = {name: [] for name in names}
    budget_ns = config.budget_s * len(names) * 1e9
    start = clock()
    reason = "max_samples"
    for round_index in range(config.max_samples):
        # Rotating the order moves each variant's place in the round without ever timing one twice in a row
        # (round i ends with the variant before round i + 1's first) -- except with two: "ab ba" would time each
        # right after itself every other round, warm, and split the per-round ratios into two modes (a check of a
        # merged model against the original on ONNX Runtime: 1.33 and 1.72 alternating). Two keep one order.
        shift = round_index % len(names) if len(names) > 2 else 0
        for name in names[shift:] + names[:shift]:
            samples[name].append(timer(fns[name], warm[name][1]))
        n = round_index + 1
        if n >= config.min_samples and all(
            median_relative_halfwidth(samples[name], config.confidence) <= config.target_precision for name in names
        ):
            reason = "precision"
            break
        if clock() - start >= budget_ns and n >= 2:
            reason = "budget"
            break
    return {
        name: TimingResult(tuple(samples[name]), warm[name][1], warm[name][0], reason) for name in names
    }
