"""``--otel`` at the edges: refused in one line without the otel extra or with an OTLP protocol the exporter
does not speak; off, a worker's loops send through the plain ``Worker.send`` and no OpenTelemetry module is
loaded for it (the hot path is the one ``benchmarks/bench_client.py`` measures). tests/integration/test_otel.py runs
the spans themselves, with the extra."""

from __future__ import annotations

import importlib.util
import queue
import sys
from typing import Any

import pytest

from loadgen.cli.commands import main
from loadgen.cli.flags import RunFlags
from loadgen.cli.resolve import resolve
from loadgen.exits import UsageError
from loadgen.profile import parse_profile
from loadgen.run.worker import Worker, WorkerSpec
from loadgen.types import Target
from loadgen.workload import PromptSizer

URL = "http://127.0.0.1:9"


def hide_opentelemetry(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if the otel extra were not installed: every import of it fails (None in sys.modules)."""
    for name in [n for n in sys.modules if n == "opentelemetry" or n.startswith("opentelemetry.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # type: ignore[arg-type]


def test_otel_without_the_extra_is_one_line_naming_the_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    hide_opentelemetry(monkeypatch)
    with pytest.raises(UsageError, match=r"^--otel needs OpenTelemetry: pip install 'llm-ramp\[otel\]'$"):
        resolve(RunFlags(otel=True, out="x.jsonl"), URL)
    assert main(["run", URL, "--otel", "--headless", "--out", "x.jsonl"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install 'llm-ramp[otel]'" in err[0], err


def test_an_otlp_protocol_other_than_http_protobuf_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    with pytest.raises(UsageError, match=r"OTEL_EXPORTER_OTLP_PROTOCOL='grpc' is not http/protobuf"):
        resolve(RunFlags(otel=True, out="x.jsonl"), URL)
    assert resolve(RunFlags(out="x.jsonl"), URL).otel is False  # not asked for: the variable is not read


def worker(otel: bool) -> Worker:
    profile = parse_profile("name = 'p'\n[[bucket]]\ninput = 8\noutput = 8\n", source="<p>")
    spec = WorkerSpec(0, Target(url=URL), profile, PromptSizer(1.0), "m", seed=1, otel=otel)
    inbox: queue.Queue[Any] = queue.Queue()
    return Worker(spec, inbox, inbox)  # nothing is sent or read: the worker does not run


def test_off_the_loops_send_through_the_plain_path_and_nothing_of_otel_is_loaded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hide_opentelemetry(monkeypatch)  # an import of it would fail the construction below
    plain = worker(otel=False)
    assert plain.spans is None
    assert plain.closed.send == plain.send and plain.open.send == plain.send
    assert sys.modules["opentelemetry"] is None


def _have_otel() -> bool:
    try:
        return importlib.util.find_spec("opentelemetry.sdk") is not None
    except ImportError:
        return False


@pytest.mark.skipif(not _have_otel(), reason="the otel extra is not installed")
def test_on_the_loops_send_through_the_traced_path() -> None:
    traced = worker(otel=True)
    try:
        assert traced.spans is not None
        assert traced.closed.send == traced.send_traced and traced.open.send == traced.send_traced
        trace_id, span_id, header = traced.spans.new_ids()
        assert header == f"00-{trace_id:032x}-{span_id:016x}-01" and len(header) == 55
    finally:
        if traced.spans is not None:
            traced.spans.close()
