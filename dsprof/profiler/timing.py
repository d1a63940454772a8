"""The profiler's timing: `TimingConfig`, `TimingResult`, the timers, and `time_interleaved` over the one loop.

The loop itself -- warm-up, the order of the interleaved rounds, the stopping rule and the statistics it stops
on -- lives in `dsprof.portable.timing_loop`, a standard-library file that export bundles carry verbatim, so
that a device without dsprof times as ``dsprof measure`` does. See that module for the protocol.

Clocks: on the CPU, `CpuTimer` reads an injectable nanosecond clock (default ``time.perf_counter_ns``) around
the calls, after an optional ``sync`` (e.g. a device synchronisation). On CUDA, `CudaEventTimer` records CUDA
events around the calls and synchronises on the end event. The budget is kept with the same injectable clock,
so the whole loop, and the statistics, can be tested with a fake clock and no hardware.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, fields, replace
from typing import Callable, Mapping, Protocol

from ..errors import UsageError
from ..portable import timing_loop
from ..portable.timing_loop import DEFAULTS, STOP_REASONS, CpuTimer

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


class Timer(Protocol):
    """Times ``number`` back-to-back calls of ``fn`` and returns seconds per call."""

    def __call__(self, fn: Callable[[], object], number: int) -> float: ...


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
    """Settings of the timed loop (`timing_loop.DEFAULTS`). Times in seconds; ``target_precision`` is relative
    (0.02 = 2 %)."""

    warmup_s: float = DEFAULTS["warmup_s"]
    warmup_min_iters: int = DEFAULTS["warmup_min_iters"]
    warmup_max_s: float = DEFAULTS["warmup_max_s"]
    first_warmup_s: float = DEFAULTS["first_warmup_s"]
    min_samples: int = DEFAULTS["min_samples"]
    max_samples: int = DEFAULTS["max_samples"]
    target_precision: float = DEFAULTS["target_precision"]
    confidence: float = DEFAULTS["confidence"]
    budget_s: float = DEFAULTS["budget_s"]
    min_sample_s: float = DEFAULTS["min_sample_s"]
    max_iterations_per_sample: int = DEFAULTS["max_iterations_per_sample"]

    def __post_init__(self) -> None:
        for name in (f.name for f in fields(self)):  # NaN passes every bound below; neither it nor inf is JSON
            if isinstance(getattr(self, name), float) and not math.isfinite(getattr(self, name)):
                raise UsageError(f"`{name}={getattr(self, name)}`: give a finite number")
        for name in ("warmup_s", "warmup_max_s", "first_warmup_s", "warmup_min_iters"):
            if getattr(self, name) < 0:
                raise UsageError(f"`{name}={getattr(self, name):g}`: give 0 or more")
        if self.warmup_max_s < self.warmup_s:
            raise UsageError(f"`warmup_max_s={self.warmup_max_s:g}` is less than `warmup_s={self.warmup_s:g}`: "
                             "give a longest warm-up no shorter than the shortest")
        if self.min_samples < 2 or self.max_samples < self.min_samples:
            raise UsageError(f"need 2 <= min_samples <= max_samples, got {self.min_samples}, {self.max_samples}")
        if not 0 < self.target_precision < 1:
            raise UsageError(f"`target_precision={self.target_precision}`: give a fraction within (0, 1)")
        if self.budget_s <= 0:
            raise UsageError(f"`budget_s={self.budget_s}`: give more than 0 seconds")
        if self.min_sample_s < 0 or self.max_iterations_per_sample < 1:
            raise UsageError("min_sample_s must be >= 0 and max_iterations_per_sample >= 1")

    def first_group(self) -> "TimingConfig":
        """These settings for the first group of a run (a longer warm-up: `timing_loop.first_group`)."""
        return replace(self, **timing_loop.first_group(asdict(self)))


@dataclass(frozen=True)
class TimingResult:
    """Raw samples of one variant (seconds per call), how they were taken and why the loop stopped."""

    samples_s: tuple[float, ...]
    iterations_per_sample: int
    warmup_iterations: int
    stop_reason: str


def time_interleaved(
    fns: Mapping[str, Callable[[], object]],
    config: TimingConfig = TimingConfig(),
    timer: Timer | None = None,
    clock: Clock = time.perf_counter_ns,
) -> dict[str, TimingResult]:
    """Warm up and time every callable of ``fns`` in interleaved rounds (`timing_loop.time_interleaved`).

    ``timer`` defaults to a `CpuTimer` on ``clock``; the budget is always kept with ``clock``.
    Returns one `TimingResult` per name, all with the same number of samples (sample ``i`` of
    every variant comes from round ``i``).
    """
    if not fns:
        raise UsageError("nothing to time")
    timed = timing_loop.time_interleaved(fns, asdict(config), timer or CpuTimer(clock), clock)
    return {
        name: TimingResult(tuple(r["samples_s"]), r["iterations_per_sample"], r["warmup_iterations"], r["stop_reason"])
        for name, r in timed.items()
    }
