"""``--otel``: every request carries a W3C ``traceparent`` and leaves one span, exported over OTLP/HTTP.

A short run against the simulator exports to a tiny OTLP/HTTP receiver on 127.0.0.1 (a free port, in a
thread here: the spans come from the worker processes, over the real exporter). The ground truth joins
them: the traceparent the simulator received with each request is the span's own ids, one span per
request it saw; the per-request export (``--save-requests-detail``) joins each measured request to its
span by request id, with the step, status, tokens and the request's send and end instants. Skipped without
the otel extra (``pip install 'llm-ramp[otel]'``; .ci/run installs it in step e)."""

from __future__ import annotations

import csv
import importlib.util
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from loadgen.config import RampPlan
from loadgen.profile import parse_profile
from loadgen.record import read_record
from loadgen.run.config import RunConfig
from loadgen.run.detail import detail_path
from loadgen.run.engine import Engine
from loadgen.types import Target


def _have_otel() -> bool:
    try:
        return importlib.util.find_spec("opentelemetry.exporter.otlp.proto.http") is not None
    except ImportError:
        return False


pytestmark = [
    pytest.mark.skipif(
        not _have_otel(), reason="the otel extra is not installed (pip install 'llm-ramp[otel]')"
    ),
    pytest.mark.sim("fast", seed=5),
]

PROFILE = parse_profile(
    "name = 'otel-small'\n[[bucket]]\ninput = 16\noutput = 8\n[sampling]\nignore_eos = true\n",
    source="<otel-small>",
)
MAX_BODY = 8 << 20


class Receiver(ThreadingHTTPServer):
    """An OTLP/HTTP trace receiver: every span of every ``POST /v1/traces``, decoded."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), ReceiverHandler)
        self.spans: list[Any] = []  # opentelemetry.proto.trace.v1.trace_pb2.Span
        self.resources: list[dict[str, Any]] = []
        self.lock = threading.Lock()


class ReceiverHandler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
            ExportTraceServiceResponse,
        )

        length = int(self.headers.get("Content-Length", "0"))
        assert self.path == "/v1/traces" and 0 < length <= MAX_BODY, (self.path, length)
        request = ExportTraceServiceRequest.FromString(self.rfile.read(length))
        with self.server.lock:
            for rs in request.resource_spans:
                self.server.resources.append({a.key: _value(a.value) for a in rs.resource.attributes})
                for ss in rs.scope_spans:
                    self.server.spans.extend(ss.spans)
        body = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's name
        pass


def _value(v: Any) -> Any:
    return getattr(v, v.WhichOneof("value")) if v.WhichOneof("value") else None


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    # the worker processes inherit the environment: the SDK's own variables point the exporter here
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "ramp-under-test")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "200")
    yield server
    server.shutdown()
    server.server_close()


def attributes(span: Any) -> dict[str, Any]:
    return {a.key: _value(a.value) for a in span.attributes}


def test_each_request_carries_its_spans_trace_context(receiver: Receiver, sim: Any, tmp_path: Path) -> None:
    before = {g["request_id"] for g in sim.ground_truth()}
    out = tmp_path / "otel.jsonl"
    config = RunConfig(
        target=Target(url=sim.url, api="chat"),
        profile=PROFILE,
        plan=RampPlan(levels=(2.0,), step_s=1.5, warmup_s=0.3),
        workers=2,
        out=str(out),
        seed=7,
        telemetry=False,
        save_requests_detail=True,
        otel=True,
    )
    engine = Engine(config)
    engine.start()
    outcome = engine.wait(40.0)
    assert outcome is not None and outcome.state == "finished", outcome
    # the workers have ended: each shut its exporter down, flushing its queue, before it exited
    truth = [g for g in sim.ground_truth() if g["request_id"] not in before]
    spans = list(receiver.spans)
    assert truth and len(spans) == len(truth), (len(spans), len(truth))

    # the server saw each span's own ids in the header of the request the span stands for
    by_request = {attributes(s)["ramp.request_id"]: s for s in spans}
    assert len(by_request) == len(spans), "one span per request"
    for seen in truth:
        span = by_request[seen["request_id"]]
        assert seen["traceparent"] == f"00-{span.trace_id.hex()}-{span.span_id.hex()}-01"
        assert not span.parent_span_id  # a root: the trace begins with the request
    assert len({s.trace_id for s in spans}) == len(spans), "one trace per request"
    assert {r["service.name"] for r in receiver.resources} == {"ramp-under-test"}
    assert {r["ramp.worker"] for r in receiver.resources} == {0, 1}

    # every request the step measured has its span: step, status, tokens, and the request's own duration
    record = read_record(str(out))
    assert record.header["otel"] is True  # a condition of the run: each span costs client CPU
    (step,) = record.steps
    with open(detail_path(str(out)), newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == step["ok"] > 0  # no fault injected: every request the step counted is ok
    measured = {k for k, s in by_request.items() if attributes(s).get("ramp.phase") == "measure"}
    assert measured == {row["request_id"] for row in rows}
    for row in rows:
        span = by_request[row["request_id"]]
        attrs = attributes(span)
        assert attrs["ramp.step"] == int(row["step"]) == 1 and attrs["ramp.level"] == 2.0
        assert attrs["ramp.status"] == row["outcome"] == "ok"
        assert attrs["gen_ai.usage.output_tokens"] == int(row["output_tokens"]) == 8
        assert attrs["gen_ai.usage.input_tokens"] == int(row["input_tokens"])
        assert attrs["http.response.status_code"] == 200
        assert abs(attrs["ramp.ttft_ms"] - float(row["ttft_ms"])) < 0.01
        assert span.end_time_unix_nano - span.start_time_unix_nano == int(row["end_ns"]) - int(row["sent_ns"])
        # Unix time from the worker's clock pair and from the record header's: the same host clocks
        assert abs(span.start_time_unix_nano - int(row["sent_unix_ns"])) < 5_000_000
    warmup = [s for s in spans if attributes(s).get("ramp.phase") == "warmup"]
    assert warmup and all(attributes(s)["ramp.step"] == 1 for s in warmup)


@pytest.fixture
def nobody(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An OTLP endpoint where nothing listens: a port held bound but not listening (connections refused,
    and no other process can take it while the test runs)."""
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    endpoint = f"http://127.0.0.1:{held.getsockname()[1]}"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    yield endpoint
    held.close()


def test_no_collector_is_said_once_on_stderr_and_in_the_record(nobody: str, sim: Any, tmp_path: Path) -> None:
    """Issue 30: ``--otel`` with no collector listening ended with exit 0 and not a word, every span lost."""
    profile = tmp_path / "tiny.toml"
    profile.write_text("[[bucket]]\ninput = 8\noutput = 2\n")
    out = tmp_path / "r.jsonl"
    args = ["--profile", str(profile), "--steps", "1", "--step-seconds", "1.5", "--warmup", "0"]
    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "loadgen.cli",
            "run",
            sim.url,
            "--headless",
            "--otel",
            *args,
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=90,
        env=dict(os.environ, OPENAI_API_KEY=""),
    )
    assert ran.returncode == 0, ran.stderr
    said = f"--otel: no OTLP collector at {nobody}/v1/traces (connection refused)"
    assert [line for line in ran.stderr.splitlines() if "OTLP" in line] == [
        f"ramp: warning: {said}: the requests' spans will be lost (set OTEL_EXPORTER_OTLP_ENDPOINT)"
    ], ran.stderr
    record = read_record(str(out))
    notes = [e.get("note", "") for e in record.events if e.get("kind") == "warning"]
    assert [n for n in notes if "OTLP" in n] == [
        said + ": the requests' spans will be lost (set OTEL_EXPORTER_OTLP_ENDPOINT)"
    ]
    assert record.steps and record.steps[0]["ok"] > 0  # the load ran all the same


def test_a_worker_with_no_collector_exits_without_waiting_for_its_spans(nobody: str) -> None:
    """The worker's exporter retried a refused collector for seconds at the end (the run ended ~4.7 s late);
    with nothing listening its close no longer waits for spans that cannot land."""
    from loadgen.run.otel import CLOSE_TIMEOUT_S, RequestSpans

    spans = RequestSpans(0, Target(url="http://127.0.0.1:9"))
    for _ in range(64):
        spans.tracer.start_span("queued").end()
    started = time.monotonic()
    spans.close()
    assert time.monotonic() - started < 1.0 < CLOSE_TIMEOUT_S


def test_a_listening_collector_is_not_warned_of(receiver: Receiver) -> None:
    from loadgen.run.collector import collector_warning, traces_endpoint

    assert traces_endpoint() == f"http://127.0.0.1:{receiver.server_address[1]}/v1/traces"
    assert collector_warning() is None
