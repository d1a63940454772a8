"""The environment a measurement was taken in: hardware, drivers, libraries, host, time.

`environment()` returns a static description (what does not change during a run) and
`environment_id()` a short stable hash of it: a latency table keys its entries by it so that
numbers from different environments never mix. `device_state()` snapshots what does change
(GPU clocks, temperature, power, throttle reasons), taken before and after every workload group.

GPU facts come from NVML (``pynvml``, package ``nvidia-ml-py``) when it loads; on Jetson boards,
which have no NVML, from sysfs (``/proc/device-tree/model``, ``/etc/nv_tegra_release``, the GPU
devfreq node). Everything unreadable is left out, never guessed.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import socket
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["device_name", "device_state", "environment", "environment_id", "ENV_ID_FIELDS"]

#: Fields of `environment` that the environment id hashes: hardware, drivers and library versions.
#: Host name and time are recorded but not hashed, so identical machines share an id.
ENV_ID_FIELDS = ("cpu", "gpu", "jetson", "versions")

_LIBRARIES = ("dsprof", "torch", "onnxruntime", "onnxruntime-gpu", "openvino", "tensorflow", "onnx2tf", "ai-edge-litert",
              "numpy")


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(errors="replace").strip("\x00\n ")
    except OSError:
        return None


def _cpu() -> dict[str, Any]:
    info: dict[str, Any] = {"machine": platform.machine(), "logical_cores": os.cpu_count()}
    text = _read("/proc/cpuinfo") or ""
    model = None
    physical: set[tuple[str, str]] = set()
    phys_id = "0"
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
    try:
        info["usable_cores"] = len(os.sched_getaffinity(0))
    except AttributeError:
        pass
    governor = _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    if governor:
        info["governor"] = governor
    max_khz = _read("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    if max_khz and max_khz.isdigit():
        info["max_freq_hz"] = int(max_khz) * 1000
    return info


def _nvml() -> Any:
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception:  # noqa: BLE001 - no driver, no library, no GPU: all mean "no NVML"
        return None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _gpu_static() -> list[dict[str, Any]]:
    nvml = _nvml()
    if nvml is None:
        return []
    gpus = []
    try:
        driver = _text(nvml.nvmlSystemGetDriverVersion())
        for i in range(nvml.nvmlDeviceGetCount()):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            gpu: dict[str, Any] = {"index": i, "name": _text(nvml.nvmlDeviceGetName(h)), "driver": driver}
            for key, call in (
                ("memory_bytes", lambda: nvml.nvmlDeviceGetMemoryInfo(h).total),
                ("max_sm_clock_mhz", lambda: nvml.nvmlDeviceGetMaxClockInfo(h, nvml.NVML_CLOCK_SM)),
                ("max_mem_clock_mhz", lambda: nvml.nvmlDeviceGetMaxClockInfo(h, nvml.NVML_CLOCK_MEM)),
                ("power_limit_w", lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000),
            ):
                try:
                    gpu[key] = call()
                except Exception:  # noqa: BLE001 - a field the GPU does not report
                    pass
            gpus.append(gpu)
    except Exception:  # noqa: BLE001
        return gpus
    return gpus


def _jetson() -> dict[str, Any]:
    model = _read("/proc/device-tree/model")
    release = _read("/etc/nv_tegra_release")
    if not model or ("jetson" not in model.lower() and not release):
        return {}
    info: dict[str, Any] = {"model": model}
    if release:
        info["l4t_release"] = release.splitlines()[0]
    return info


def _jetson_state() -> dict[str, Any]:
    state: dict[str, Any] = {}
    for node in sorted(Path("/sys/class/devfreq").glob("*")):
        if "gpu" in node.name or "gv11b" in node.name or "gp10b" in node.name or "ga10b" in node.name:
            cur = _read(str(node / "cur_freq"))
            if cur and cur.isdigit():
                state["gpu_freq_hz"] = int(cur)
            gov = _read(str(node / "governor"))
            if gov:
                state["gpu_governor"] = gov
            break
    for zone in sorted(Path("/sys/class/thermal").glob("thermal_zone*")):
        name, temp = _read(str(zone / "type")), _read(str(zone / "temp"))
        if name and temp and temp.lstrip("-").isdigit() and "gpu" in name.lower():
            state["gpu_temp_c"] = int(temp) / 1000
    return state


def _versions() -> dict[str, str]:
    import sys

    versions = {"python": sys.version.split()[0]}
    for lib in _LIBRARIES:
        try:
            versions[lib] = metadata.version(lib)
        except metadata.PackageNotFoundError:
            continue
    try:
        import torch

        versions["torch_cuda"] = torch.version.cuda or "none"
        if torch.cuda.is_available():
            versions["cudnn"] = str(torch.backends.cudnn.version())
    except Exception:  # noqa: BLE001
        pass
    return versions


def environment() -> dict[str, Any]:
    """Static description of this machine: cpu, gpu (list), jetson, versions, host and the time (UTC, ISO 8601)."""
    return {
        "cpu": _cpu(),
        "gpu": _gpu_static(),
        "jetson": _jetson(),
        "versions": _versions(),
        "host": socket.gethostname(),
        "time_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def environment_id(env: dict[str, Any]) -> str:
    """12 hex digits hashing the `ENV_ID_FIELDS` of ``env`` (hardware, drivers, library versions)."""
    payload = json.dumps({k: env.get(k) for k in ENV_ID_FIELDS}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:12]


def device_name(env: dict[str, Any], device: str) -> str:
    """A short name of the device that runs the workloads: the GPU's name for cuda:N, else the CPU model."""
    if device.startswith("cuda"):
        index = int(device.split(":")[1]) if ":" in device else 0
        for gpu in env.get("gpu", []):
            if gpu.get("index") == index:
                return gpu["name"]
        if env.get("jetson"):
            return env["jetson"]["model"]
        try:
            import torch

            return torch.cuda.get_device_name(index)
        except Exception:  # noqa: BLE001
            return device
    return str(env.get("cpu", {}).get("model", "cpu"))


def device_state(device: str = "cpu") -> dict[str, Any]:
    """What changes during a run: 1-minute load average, CPU frequency; for a GPU its clocks, temperature,
    power and throttle reasons."""
    state: dict[str, Any] = {}
    try:
        state["load_avg_1m"] = os.getloadavg()[0]  # other work on the machine disturbs CPU timings
    except OSError:
        pass
    cur = _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq")
    if cur and cur.isdigit():
        state["cpu_freq_hz"] = int(cur) * 1000
    if not device.startswith("cuda"):
        return state
    nvml = _nvml()
    if nvml is None:
        state.update(_jetson_state())
        return state
    index = int(device.split(":")[1]) if ":" in device else 0
    try:
        h = nvml.nvmlDeviceGetHandleByIndex(index)
    except Exception:  # noqa: BLE001
        return state
    for key, call in (
        ("sm_clock_mhz", lambda: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM)),
        ("mem_clock_mhz", lambda: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_MEM)),
        ("temperature_c", lambda: nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU)),
        ("power_w", lambda: nvml.nvmlDeviceGetPowerUsage(h) / 1000),
        ("throttle_reasons", lambda: int(nvml.nvmlDeviceGetCurrentClocksEventReasons(h))),
    ):
        try:
            state[key] = call()
        except Exception:  # noqa: BLE001
            if key == "throttle_reasons":
                try:
                    state[key] = int(nvml.nvmlDeviceGetCurrentClocksThrottleReasons(h))
                except Exception:  # noqa: BLE001
                    pass
    return state
