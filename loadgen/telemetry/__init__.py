"""Server and GPU telemetry beside the client's numbers: vLLM / SGLang ``/metrics``, DCGM exporter,
local NVML, and an ``nvidia-smi`` command (possibly over SSH), each an adapter behind ``Source``,
polled by ``TelemetryHub`` on its own timer.

    sources = build_sources("http://127.0.0.1:8000", gpu_cmd="ssh gpu1 nvidia-smi --query-gpu=...")
    hub = TelemetryHub(sources, conditions=await discover("http://127.0.0.1:8000"))
    await hub.start()
    hub.latest()                      # ServerTelemetry for the snapshot
    hub.window_summary(t0_ns, t1_ns)  # dict for a step record line
    hub.conditions()                  # dict for the record header
    await hub.stop()
"""

from loadgen.telemetry.discover import discover
from loadgen.telemetry.exposition import parse_exposition
from loadgen.telemetry.hub import TelemetryHub
from loadgen.telemetry.nvidia_smi import DEFAULT_GPU_CMD, CommandGPUSource, parse_query_csv
from loadgen.telemetry.nvml import NVMLSource
from loadgen.telemetry.reading import (
    CumulativeHistogram,
    Reading,
    SourceError,
    SourceKind,
    histogram_quantile,
)
from loadgen.telemetry.sources import (
    DCGMSource,
    PrometheusAutoSource,
    PrometheusSource,
    RuntimeMetricsSource,
    Source,
    build_sources,
)
from loadgen.telemetry.window import CONDITION_KEYS, WINDOW_KEYS, gpu_summary

__all__ = [
    "CONDITION_KEYS",
    "DEFAULT_GPU_CMD",
    "WINDOW_KEYS",
    "CommandGPUSource",
    "CumulativeHistogram",
    "DCGMSource",
    "NVMLSource",
    "PrometheusAutoSource",
    "PrometheusSource",
    "Reading",
    "RuntimeMetricsSource",
    "Source",
    "SourceError",
    "SourceKind",
    "TelemetryHub",
    "build_sources",
    "discover",
    "gpu_summary",
    "histogram_quantile",
    "parse_exposition",
    "parse_query_csv",
]
