"""Request sources a run may replay instead of synthetic prompts: datasets (``dataset``), timestamped
traces (``trace``) and a run's saved requests (``requests``), parsed once at the edge into the frozen
``Source`` (``model``) that travels inside the ``Profile``; ``loadgen.workload.replay`` turns it into
requests.
"""

from __future__ import annotations

from loadgen.sources.dataset import load_dataset
from loadgen.sources.model import (
    DATASET_FORMATS,
    DEFAULT_BLOCK_TOKENS,
    HISTORY_SOURCES,
    SAMPLING_ORDERS,
    TIME_UNITS,
    Conversation,
    DatasetFormat,
    DatasetOptions,
    DialogTurn,
    HistorySource,
    RecordedRequest,
    SamplingOrder,
    Source,
    SourceError,
    SourceKind,
    TimeUnit,
    TraceEntry,
    TraceOptions,
)
from loadgen.sources.requests import RequestLog, load_requests
from loadgen.sources.trace import load_trace

__all__ = [
    "DATASET_FORMATS",
    "DEFAULT_BLOCK_TOKENS",
    "HISTORY_SOURCES",
    "SAMPLING_ORDERS",
    "TIME_UNITS",
    "Conversation",
    "DatasetFormat",
    "DatasetOptions",
    "DialogTurn",
    "HistorySource",
    "RecordedRequest",
    "RequestLog",
    "SamplingOrder",
    "Source",
    "SourceError",
    "SourceKind",
    "TimeUnit",
    "TraceEntry",
    "TraceOptions",
    "load_dataset",
    "load_requests",
    "load_trace",
]
