"""Trace context for every request (``--otel``, the ``otel`` extra): a W3C ``traceparent`` header on the
request and one OpenTelemetry span for it, exported over OTLP/HTTP by the SDK's batch processor.

Imported only by a worker started with ``--otel`` (``WorkerSpec.otel``): without it no OpenTelemetry module
is loaded and the hot path is the plain one (``Worker.send``; ``benchmarks/bench_client.py`` measures
both). The span is made once the request has ended, with the request's own send and end instants (Unix
time from the worker's monotonic clock, ``loadgen.run.clock``) and the ids its header carried: the ids are
drawn before the send, and ``ChosenIds`` hands them to the SDK as the ids of the span made after it. A
server that traces (vLLM's ``--otlp-traces-endpoint``) makes its own span a child of the client's.

Exporting runs on the batch processor's thread, never on the event loop: a full queue drops spans (the
SDK's rule; ``OTEL_BSP_*`` size it), never delays a request. The standard environment is the SDK's:
``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (default localhost:4318),
``OTEL_EXPORTER_OTLP_HEADERS``, ``OTEL_SERVICE_NAME`` (default ``llm-ramp``), ``OTEL_RESOURCE_ATTRIBUTES``.
Every request is sampled: the header says so, and a span it names must exist.
"""

from __future__ import annotations

import os
import random
import threading
from typing import NamedTuple
from urllib.parse import urlsplit

from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import SpanKind, Status, StatusCode

from loadgen.config import Phase
from loadgen.run.clock import read_clocks
from loadgen.run.collector import NO_HOST, REFUSED, traces_endpoint, unreachable
from loadgen.run.protocol import Flush
from loadgen.types import Outcome, RequestResult, RequestSpec, Target

__all__ = ["CLOSE_TIMEOUT_S", "ChosenIds", "RequestSpans", "traceparent"]

CLOSE_TIMEOUT_S = 5.0  # at the worker's end, how long the last spans may take to go out
NOBODY_TIMEOUT_S = 0.05  # the same with no collector listening: nothing can land, only the shutdown is left
SERVICE_NAME = "llm-ramp"
OPERATION = {"chat": "chat", "completions": "text_completion", "responses": "chat"}  # gen_ai.operation.name


def traceparent(trace_id: int, span_id: int) -> str:
    """The W3C trace context header of a sampled span: version 00, the ids in hex, flags 01."""
    return f"00-{trace_id:032x}-{span_id:016x}-01"


class ChosenIds(IdGenerator):
    """The SDK's id source, handing out the ids set last: the ones the request's header already carried."""

    def __init__(self) -> None:
        self.trace_id = 0
        self.span_id = 0

    def generate_trace_id(self) -> int:
        return self.trace_id

    def generate_span_id(self) -> int:
        return self.span_id


class WindowInfo(NamedTuple):
    """What a span says of the window its request was counted in (``Flush``)."""

    step: int
    phase: Phase | None
    level: float


class RequestSpans:
    """One worker's spans: ids for each request, then its span once it has ended."""

    def __init__(self, worker_id: int, target: Target, exporter: SpanExporter | None = None) -> None:
        resource = Resource.create({"ramp.worker": worker_id})
        if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
            resource = resource.merge(Resource({"service.name": SERVICE_NAME}))
        self.ids = ChosenIds()
        self.provider = TracerProvider(resource=resource, id_generator=self.ids, sampler=ALWAYS_ON)
        self.provider.add_span_processor(BatchSpanProcessor(exporter or OTLPSpanExporter()))
        self.endpoint = traces_endpoint() if exporter is None else None  # the exporter's, when it is ours
        from loadgen import __version__

        self.tracer = self.provider.get_tracer("llm-ramp", __version__)
        # Ids unique across runs and workers: not drawn from the run's seed, which repeats on purpose.
        self.rng = random.Random(os.urandom(16))
        self.offset_ns = read_clocks().offset_ns  # monotonic -> Unix, this worker's host
        self.windows: dict[int, WindowInfo] = {}
        parts = urlsplit(target.base_url)
        self.server: dict[str, str | int] = {"server.address": parts.hostname or ""}
        if parts.port is not None:
            self.server["server.port"] = parts.port

    def flushed(self, flush: Flush) -> None:
        """A new window opened: the requests sent from now on belong to it."""
        self.windows[flush.window] = WindowInfo(flush.step, flush.phase, flush.level)

    def new_ids(self) -> tuple[int, int, str]:
        """(trace id, span id, its traceparent header) for a request about to be sent; the ids are never
        zero (W3C: all-zero is invalid)."""
        getrandbits = self.rng.getrandbits
        trace_id, span_id = getrandbits(128) or 1, getrandbits(64) or 1
        return trace_id, span_id, traceparent(trace_id, span_id)

    def record(
        self, trace_id: int, span_id: int, window: int, spec: RequestSpec, result: RequestResult
    ) -> None:
        """The span of a request that has ended, with the ids its header carried."""
        attributes: dict[str, str | int | float] = {
            "gen_ai.operation.name": OPERATION.get(spec.api, spec.api),
            "gen_ai.request.model": spec.model,
            "gen_ai.request.max_tokens": spec.max_tokens,
            "gen_ai.usage.output_tokens": result.output_tokens,
            "http.request.method": "POST",
            **self.server,
            "ramp.status": result.outcome.value,
            "ramp.request_id": result.request_id,
            "ramp.tokens_exact": result.tokens_exact,
        }
        info = self.windows.get(window)
        if info is not None:
            if info.step:
                attributes["ramp.step"] = info.step
            if info.phase is not None:
                attributes["ramp.phase"] = info.phase
            attributes["ramp.level"] = info.level
        if result.input_tokens is not None:
            attributes["gen_ai.usage.input_tokens"] = result.input_tokens
        if result.http_status is not None:
            attributes["http.response.status_code"] = result.http_status
        ttft_ns = result.ttft_ns
        if ttft_ns is not None:
            attributes["ramp.ttft_ms"] = ttft_ns / 1e6  # from the intended start, as the record's TTFT
        if result.error_kind is not None:
            attributes["ramp.error_kind"] = result.error_kind.value
        ids = self.ids
        ids.trace_id, ids.span_id = trace_id, span_id
        span = self.tracer.start_span(
            f"{attributes['gen_ai.operation.name']} {spec.model}",
            context=Context(),  # a root span: its trace is the one the header started
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=result.sent_ns + self.offset_ns,
        )
        if result.outcome is Outcome.ERROR:
            span.set_status(Status(StatusCode.ERROR, result.error_message[:200]))
        span.end(end_time=result.end_ns + self.offset_ns)

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """Export what is queued and stop, waiting at most ``timeout_s``: a collector that is down must not
        hold the worker's exit (its spans are then lost, as the SDK would lose them). Where nothing listens
        at the endpoint (the run said so at its start) the exporter's retries are not waited for at all:
        without this a run with no collector ended ~4 s late."""
        if self.endpoint is not None and unreachable(self.endpoint) in (REFUSED, NO_HOST):
            timeout_s = min(timeout_s, NOBODY_TIMEOUT_S)  # a slow or far collector still gets the wait
        done = threading.Thread(target=self.provider.shutdown, name="ramp-otel-close", daemon=True)
        done.start()
        done.join(timeout_s)
