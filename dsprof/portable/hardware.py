"""What the machine is, read from /proc, /sys and the board's tools: the CPU, a Jetson board and its GPU clock; the
environment record made of them (`environment`, `device_state`) and the library versions in it (`version`).

Written once for both places that describe a machine: `dsprof.profiler.fingerprint` (the environment of a
`dsprof measure` run, with NVML's GPUs) and the bundle runner (`dsprof.edge.runner`, on a device without dsprof). The
description
is part of the environment id that keys a LUT, so a bundle timed on a board and `dsprof measure` on the same board
must read it the same way. Standard library only, and Python 3.6 or later: every export bundle carries this very
file beside its runner, as it carries the timing loop. Everything unreadable is left out, never guessed.
"""

import os
import platform
import socket
import subprocess
import sys
import time

__all__ = ["command_output", "cpu", "cpu_state", "device_state", "environment", "jetson", "jetson_state", "read",
           "tegrastats_line", "torch_cuda", "utc_now", "version"]

_DEVFREQ = "/sys/class/devfreq"
_GPU_NODES = ("gpu", "gv11b", "gp10b", "ga10b")  # Jetson GPU devfreq node names (Xavier, TX2, Orin)
_THERMAL = "/sys/class/thermal"


def read(path):
    """A small text file (sysfs, procfs) stripped of NULs, newlines and spaces; None when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace").strip("\x00\n ")
    except (OSError, IOError):
        return None


def command_output(args, timeout=5.0):
    """stdout of a command, or None when it is missing or fails."""
    try:
        out = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.decode("utf-8", "replace").strip() if out.returncode == 0 else None


def cpu():
    """The CPU: architecture, model name, logical, physical and usable cores, governor and top clock, and the
    device-tree board name (Raspberry Pi, Jetson and other boards)."""
    info = {"machine": platform.machine(), "logical_cores": os.cpu_count()}
    text = read("/proc/cpuinfo") or ""
    model, physical, phys_id = None, set(), "0"
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key in ("model name", "Model", "Hardware") and model is None:
            model = value
        elif key == "physical id":
            phys_id = value
        elif key == "core id":
            physical.add((phys_id, value))
    info["model"] = model or platform.processor() or platform.machine()
    if physical:
        info["physical_cores"] = len(physical)
    if hasattr(os, "sched_getaffinity"):
        info["usable_cores"] = len(os.sched_getaffinity(0))
    governor = read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    if governor:
        info["governor"] = governor
    max_khz = read("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    if max_khz and max_khz.isdigit():
        info["max_freq_hz"] = int(max_khz) * 1000
    board = read("/proc/device-tree/model")
    if board:
        info["board"] = board
    return info


def cpu_state():
    """What changes on any machine: the 1-minute load average (other work disturbs CPU timings) and the CPU clock."""
    state = {}
    try:
        state["load_avg_1m"] = os.getloadavg()[0]
    except (OSError, AttributeError):
        pass
    cur = read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq")
    if cur and cur.isdigit():
        state["cpu_freq_hz"] = int(cur) * 1000
    return state


def jetson():
    """A Jetson board: its model, L4T release and power mode (``nvpmodel -q``); {} on any other machine."""
    model, release = read("/proc/device-tree/model"), read("/etc/nv_tegra_release")
    if not model or ("jetson" not in model.lower() and not release):
        return {}
    info = {"model": model}
    if release:
        info["l4t_release"] = release.splitlines()[0]
    mode = command_output(["nvpmodel", "-q"])  # "NV Power Mode: MAXN\n0"
    if mode:
        info["power_mode"] = " ".join(mode.split())
    return info


def jetson_state():
    """What changes on a Jetson: the GPU's clock, top clock, governor and temperature, and one line of
    ``tegrastats``."""
    state = {}
    for name in sorted(os.listdir(_DEVFREQ)) if os.path.isdir(_DEVFREQ) else []:
        if any(t in name for t in _GPU_NODES):
            for key, leaf in (("gpu_freq_hz", "cur_freq"), ("gpu_max_freq_hz", "max_freq")):
                value = read(os.path.join(_DEVFREQ, name, leaf))
                if value and value.isdigit():
                    state[key] = int(value)
            governor = read(os.path.join(_DEVFREQ, name, "governor"))
            if governor:
                state["gpu_governor"] = governor
            break
    zones = sorted(n for n in os.listdir(_THERMAL) if n.startswith("thermal_zone")) if os.path.isdir(_THERMAL) else []
    for zone in zones:
        name, temp = read(os.path.join(_THERMAL, zone, "type")), read(os.path.join(_THERMAL, zone, "temp"))
        if name and temp and temp.lstrip("-").isdigit() and "gpu" in name.lower():
            state["gpu_temp_c"] = int(temp) / 1000
    line = tegrastats_line()
    if line:
        state["tegrastats"] = line
    return state


def tegrastats_line():
    """One line of ``tegrastats`` (RAM, CPU loads and clocks, EMC, GPU, temperatures), when present."""
    try:
        proc = subprocess.Popen(["tegrastats", "--interval", "100"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    except OSError:
        return None
    try:
        return proc.stdout.readline().decode("utf-8", "replace").strip() or None
    finally:
        proc.kill()
        proc.wait()


def torch_cuda():
    """The CUDA that PyTorch was built with ("none" for a CPU build) and the cuDNN it finds; {} without PyTorch."""
    try:
        import torch
    except Exception:  # noqa: BLE001 - no PyTorch, or one that does not load: nothing to say
        return {}
    versions = {"torch_cuda": torch.version.cuda or "none"}
    try:
        if torch.cuda.is_available():
            versions["cudnn"] = str(torch.backends.cudnn.version())
    except Exception:  # noqa: BLE001 - a driver that does not answer
        pass
    return versions


def version(distribution, module=None):
    """The installed version of ``distribution`` (importlib.metadata; on Python < 3.8 pkg_resources), else the
    ``__version__`` of ``module`` where one is named; None where neither says."""
    try:
        from importlib import metadata  # novermin (Python >= 3.8; older ones take pkg_resources below)
    except ImportError:
        metadata = None
    if metadata is not None:
        try:
            return metadata.version(distribution)
        except Exception:  # noqa: BLE001 - not installed under that name
            pass
    else:
        try:
            import pkg_resources
            return pkg_resources.get_distribution(distribution).version
        except Exception:  # noqa: BLE001
            pass
    if module:
        try:
            return getattr(__import__(module), "__version__", None)
        except Exception:  # noqa: BLE001
            return None
    return None


def utc_now():
    """Now, UTC, to the second: ``2026-11-28T05:23:29+00:00``."""
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())


def environment(versions, gpu=()):
    """What does not change during a run, as records keep it: cpu, gpu (``gpu``: the GPUs' static facts where
    something reads them, NVML in the profiler), jetson, ``versions`` (Python's added), host and the time (UTC)."""
    return {
        "cpu": cpu(), "gpu": list(gpu), "jetson": jetson(), "versions": dict({"python": sys.version.split()[0]}, **versions),
        "host": socket.gethostname(), "time_utc": utc_now(),
    }


def device_state(device="cpu", gpu_state=None):
    """What changes during a run: the 1-minute load average and the CPU clock; for a CUDA ``device`` the GPU's,
    from ``gpu_state()`` (NVML in the profiler; None where it cannot read them) or else on a Jetson its GPU clock
    and a tegrastats line."""
    state = cpu_state()
    if not device.startswith("cuda"):
        return state
    gpu = gpu_state() if gpu_state is not None else None
    if gpu is not None:
        state.update(gpu)
    elif read("/etc/nv_tegra_release") is not None or "jetson" in (read("/proc/device-tree/model") or "").lower():
        state.update(jetson_state())
    return state
