"""The environment a measurement was taken in: hardware, drivers, libraries, host, time.

`environment()` returns a static description (what does not change during a run) and
`environment_id()` a short stable hash of it: a latency table keys its entries by it so that
numbers from different environments never mix. `device_state()` snapshots what does change
(GPU clocks, temperature, power, throttle reasons), taken before and after every workload group.

GPU facts come from NVML (``pynvml``, package ``nvidia-ml-py``) when it loads. The CPU and, on Jetson boards (which
have no NVML), the board and its GPU clock are read by `dsprof.portable.hardware`, the file the bundle runner reads
them with too. Everything unreadable is left out, never guessed.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ..portable import hardware

__all__ = ["device_name", "device_state", "environment", "environment_id", "ENV_ID_FIELDS"]

#: Fields of `environment` that the environment id hashes: hardware, drivers and library versions.
#: Host name and time are recorded but not hashed, so identical machines share an id.
ENV_ID_FIELDS = ("cpu", "gpu", "jetson", "versions")

_LIBRARIES = ("dsprof", "torch", "onnxruntime", "onnxruntime-gpu", "openvino", "tensorflow", "onnx2tf", "ai-edge-litert",
              "numpy")


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


def _versions() -> dict[str, str]:
    versions = {lib: v for lib in _LIBRARIES if (v := hardware.version(lib)) is not None}
    versions.update(hardware.torch_cuda())
    return versions


def environment() -> dict[str, Any]:
    """Static description of this machine: cpu, gpu (list, from NVML), jetson, versions, host and the time (UTC,
    ISO 8601), as `hardware.environment` writes it for the profiler and the bundle runner alike."""
    return hardware.environment(_versions(), _gpu_static())


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
    power and throttle reasons (NVML; on a Jetson, which has none, its GPU clock: `hardware.device_state`)."""
    return hardware.device_state(device, lambda: _gpu_state(device))


def _gpu_state(device: str) -> dict[str, Any] | None:
    """NVML's reading of GPU ``device`` now; None without NVML."""
    nvml = _nvml()
    if nvml is None:
        return None
    state: dict[str, Any] = {}
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
