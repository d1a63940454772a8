"""How much of the CPU this process got while it timed: the CPU time it got over the CPU time its threads could use
(wall time x threads), and how often the kernel took a core away (involuntary context switches a second). Well below
1, or many switches, means other processes competed for the cores and the timings are likely inflated.

Written once for the three places that read it: the profiler's runner (each group's ``state_after``), `dsprof explain`
and the bundle runner (`dsprof.edge.runner`, on a device without dsprof). Standard library only, and Python 3.6 or
later: every export bundle carries this very file beside its runner, as it carries the timing loop.
"""

import time

try:
    import resource  # POSIX only
except ImportError:  # pragma: no cover - Windows
    resource = None

__all__ = ["CPU_SHARE_WARNING", "CpuShare", "involuntary_switches"]

#: Below this median share of the CPU time its threads asked for, a run was contended: other processes competed for
#: the cores (`dsprof.profiler.runner.contention_message` warns; a LUT of such a run labels its figures drafts).
CPU_SHARE_WARNING = 0.8


def involuntary_switches():
    """Involuntary context switches of this process so far; None without the ``resource`` module."""
    if resource is None:
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw


class CpuShare(object):
    """Read around what is timed, ``with CpuShare(threads) as share: ...``; then ``share.share`` is the CPU time the
    process got over what its ``threads`` threads could use (``cpu_s / (wall_s * threads)``), ``switches_per_s`` the
    involuntary context switches a second (None without the ``resource`` module), both None where no time passed.
    ``cpu_clock``, ``wall_clock`` and ``switches`` are injectable (tests)."""

    def __init__(self, threads=1, cpu_clock=time.process_time, wall_clock=time.perf_counter,
                 switches=involuntary_switches):
        if threads < 1:
            raise ValueError("threads is at least 1, got %r" % (threads,))
        self.threads = threads
        self._clocks = (cpu_clock, wall_clock, switches)
        self.cpu_s = self.wall_s = self.share = self.switches_per_s = None

    def __enter__(self):
        cpu_clock, wall_clock, switches = self._clocks
        self._start = (cpu_clock(), wall_clock(), switches())
        return self

    def __exit__(self, *exc):
        cpu_clock, wall_clock, switches = self._clocks
        cpu0, wall0, switches0 = self._start
        self.cpu_s, self.wall_s = cpu_clock() - cpu0, wall_clock() - wall0
        if self.wall_s > 0:
            self.share = self.cpu_s / (self.wall_s * self.threads)
            now = switches()
            if switches0 is not None and now is not None:
                self.switches_per_s = (now - switches0) / self.wall_s
        return False

    def reading(self):
        """What a record keeps: ``process_cpu_share`` (4 decimals) and ``involuntary_switches_per_s`` (1 decimal),
        each where it was read."""
        out = {}
        if self.share is not None:
            out["process_cpu_share"] = round(self.share, 4)
        if self.switches_per_s is not None:
            out["involuntary_switches_per_s"] = round(self.switches_per_s, 1)
        return out
