"""GPU samples from the local NVML library through nvidia-ml-py (the optional ``gpu`` extra).

The module is imported on the first poll, not at import time, so a machine without it (or without a
GPU) still runs: the source then says why it is n/a. One memory+utilisation+power sample costs ~14 µs
on an H200 (tests/fixtures/h200/query_cost.json), so polling twice a second is free; the calls still
run in a worker thread because ``nvmlInit`` itself can take a while.
"""

from __future__ import annotations

import asyncio
import importlib
import threading
import time
from types import ModuleType
from typing import Any

from loadgen.snapshot import GPUSample
from loadgen.telemetry.reading import Reading, SourceError, SourceKind

MIB = 1024 * 1024


class NVMLSource:
    kind: SourceKind = "gpu"

    def __init__(self, *, interval_s: float = 0.5, name: str = "nvml", timeout_s: float = 2.0) -> None:
        self.name = name
        self.interval_s = interval_s
        self.timeout_s = (
            timeout_s  # NVML has no timeout of its own: the hub's hang guard is this plus a margin
        )
        self.last_fetch_s: float | None = None  # a local library call: nothing to be polite about
        self._nvml: ModuleType | None = None
        self._lock = threading.Lock()  # init/shutdown and sampling never overlap across threads

    async def poll(self) -> Reading:
        return await asyncio.to_thread(self._sample)

    def _module(self) -> ModuleType:
        if self._nvml is not None:
            return self._nvml
        try:
            nvml = importlib.import_module("pynvml")
        except ImportError:
            raise SourceError("nvidia-ml-py not installed (pip install 'llm-ramp[gpu]')") from None
        try:
            nvml.nvmlInit()
        except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded...: no GPU here
            raise SourceError(f"NVML unavailable: {_error_text(exc)}") from None
        self._nvml = nvml
        return nvml

    def _sample(self) -> Reading:
        with self._lock:
            nvml = self._module()
            try:
                count = int(nvml.nvmlDeviceGetCount())
            except Exception as exc:
                raise SourceError(f"NVML device count failed: {_error_text(exc)}") from None
            if count == 0:
                raise SourceError("NVML sees no GPU")
            gpus = []
            for index in range(count):
                try:
                    handle = nvml.nvmlDeviceGetHandleByIndex(index)
                except Exception as exc:
                    raise SourceError(f"NVML GPU {index}: {_error_text(exc)}") from None
                memory = _try(nvml.nvmlDeviceGetMemoryInfo, handle)
                util = _try(nvml.nvmlDeviceGetUtilizationRates, handle)
                power_mw = _try(nvml.nvmlDeviceGetPowerUsage, handle)
                gpus.append(
                    GPUSample(
                        index=index,
                        name=_text(_try(nvml.nvmlDeviceGetName, handle)) or "",
                        mem_used_mib=memory.used / MIB if memory is not None else None,
                        mem_total_mib=memory.total / MIB if memory is not None else None,
                        util_pct=float(util.gpu) if util is not None else None,
                        power_w=power_mw / 1000.0 if power_mw is not None else None,
                    )
                )
            driver = _text(_try(nvml.nvmlSystemGetDriverVersion))
            info = {"driver_version": driver} if driver else {}
            return Reading(t_ns=time.monotonic_ns(), gpus=tuple(gpus), info=info)

    async def aclose(self) -> None:
        await asyncio.to_thread(self._shutdown)

    def _shutdown(self) -> None:
        with self._lock:
            if self._nvml is not None:
                try:
                    self._nvml.nvmlShutdown()
                except Exception:  # shutting down a broken driver is not worth an error
                    pass
                self._nvml = None


def _try(fn: Any, *args: Any) -> Any:
    """One NVML query; "not supported" (MIG, some boards) is a missing value, not a failure."""
    try:
        return fn(*args)
    except Exception:
        return None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):  # older nvidia-ml-py returns bytes
        return value.decode(errors="replace")
    return str(value)


def _error_text(exc: Exception) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:160]
