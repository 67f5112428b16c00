"""Shim: the load worker moved to ``loadgen.run.worker`` (its health sampling to ``loadgen.run.health``, the
queue drain to ``loadgen.run.fleet``). Kept while callers still import from here; the lead removes it."""

from loadgen.run.fleet import drain
from loadgen.run.health import CLIENT_BOUND_LAG_MS
from loadgen.run.loops import CONNECT_BACKOFF_MAX_S, CONNECT_BACKOFF_MIN_S
from loadgen.run.worker import WorkerSpec, worker_main

__all__ = [
    "CLIENT_BOUND_LAG_MS",
    "CONNECT_BACKOFF_MAX_S",
    "CONNECT_BACKOFF_MIN_S",
    "WorkerSpec",
    "drain",
    "worker_main",
]
