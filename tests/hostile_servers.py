"""Fault servers that attack the client rather than fail it (issue 20): a server that echoes every request
header back in its error body, a ``/metrics`` that never ends or is tens of megabytes, an SSE line that never
ends. Built on ``fault_servers.FaultServer`` (an aiohttp app in a thread of its own, on 127.0.0.1, port 0);
kept apart from that module's TLS helpers. And the big input files of the memory cases (``big_text``)."""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web
from fault_servers import MODELS, REPLY, FaultServer, Handler, models_ok, stream_ok

CHUNK = b"x" * 65536
WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet".split()


def big_text(path: Path, megabytes: int) -> Path:
    """A text dataset of about ``megabytes`` MB: lines of 16 words, the same file every time."""
    rng = random.Random(1)
    with path.open("w") as f:
        while f.tell() < megabytes * 1_000_000:
            f.write("\n".join(" ".join(rng.choices(WORDS, k=16)) for _ in range(1000)) + "\n")
    return path


async def echo_headers(req: web.Request) -> web.StreamResponse:
    """An OpenAI-style 400 whose message quotes every request header, as some gateways' debug pages do."""
    said = "; ".join(f"{k}: {v}" for k, v in req.headers.items())
    error = {"error": {"message": f"bad request (headers {said}) url {req.url}", "type": "invalid_request"}}
    return web.json_response(error, status=400)


def echoing_headers() -> FaultServer:
    """/v1/models answers; every completion is refused with the request's headers in the message."""
    return FaultServer(
        {
            ("GET", "/v1/models"): models_ok,
            ("POST", "/v1/chat/completions"): echo_headers,
            ("POST", "/v1/completions"): echo_headers,
        }
    ).start()


def endless_metrics() -> Handler:
    """A ``/metrics`` that sends a valid-looking exposition forever (until the client hangs up)."""

    async def metrics(req: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await resp.prepare(req)
        line = b"vllm:num_requests_running 1\n" * 2048
        try:
            while True:
                await resp.write(line)
        except (ConnectionError, RuntimeError):
            pass
        return resp

    return metrics


def huge_metrics(megabytes: int) -> Handler:
    """A ``/metrics`` of ``megabytes`` MB (with a Content-Length), sent as fast as the client reads."""
    body = (b'# HELP x y\nvllm:num_requests_running{a="' + b"b" * 100 + b'"} 1\n') * (
        megabytes * 1_000_000 // 128
    )

    async def metrics(req: web.Request) -> web.StreamResponse:
        return web.Response(body=body, content_type="text/plain")

    return metrics


def endless_body(start: bytes, content_type: str) -> Handler:
    """A 200 whose body is ``start`` and then ``x`` forever (until the client hangs up)."""

    async def endless(req: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": content_type})
        await resp.prepare(req)
        try:
            await resp.write(start)
            while True:
                await resp.write(CHUNK)
        except (ConnectionError, RuntimeError):
            pass
        return resp

    return endless


# A 200 SSE stream whose first event never ends: ``data: xxxx...`` without a newline, forever.
endless_line = endless_body(b"data: ", "text/event-stream")


def serving(
    metrics: Handler | None = None, completions: Handler = stream_ok, max_model_len: int | None = None
) -> FaultServer:
    """A server that streams a short reply, with ``metrics`` at /metrics and ``completions`` answering the
    completion APIs; ``max_model_len`` is stated in /v1/models when given."""
    models: Handler = models_ok
    if max_model_len is not None:
        doc = {**MODELS, "data": [{**MODELS["data"][0], "max_model_len": max_model_len}]}  # type: ignore[index, dict-item]

        async def stated(req: web.Request) -> web.StreamResponse:
            return web.Response(text=json.dumps(doc), content_type="application/json")

        models = stated
    routes: dict[tuple[str, str], Handler] = {
        ("GET", "/v1/models"): models,
        ("POST", "/v1/chat/completions"): completions,
        ("POST", "/v1/completions"): completions,
    }
    if metrics is not None:
        routes[("GET", "/metrics")] = metrics
    return FaultServer(routes).start()


def finishing_with(reason: str) -> Handler:
    """A two-token streamed reply whose ``finish_reason`` is ``reason`` (a server controls that text)."""

    async def reply(req: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(req)
        await resp.write(b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n')
        doc = {"choices": [{"index": 0, "delta": {"content": " x"}, "finish_reason": reason}]}
        chunk = json.dumps(doc)
        await resp.write(b"data: " + chunk.encode() + b"\n\n")
        await resp.write(b'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}\n\n')
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    return reply


@dataclass(frozen=True)
class Measured:
    """A finished ``ramp`` process: its exit status, output, and peak RSS: its own (``main``) and the
    largest of it and its workers (``peak_rss_mb``)."""

    returncode: int
    stdout: str
    stderr: str
    main_rss_mb: float
    peak_rss_mb: float


def hwm_mb(pid: int) -> float | None:
    """A process's peak RSS so far (``VmHWM``, the kernel's high-water mark of its memory), in MB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def descendants(pid: int) -> list[int]:
    try:
        found = [
            int(c)
            for task in Path(f"/proc/{pid}/task").iterdir()
            for c in (task / "children").read_text().split()
        ]
    except OSError:
        return []
    return found + [d for c in found for d in descendants(c)]


def ramp_measured(
    args: list[str], folder: Path, timeout_s: float = 90, env: dict[str, str] | None = None
) -> Measured:
    """Run ``python -m loadgen.cli ARGS`` and read the peak RSS of it and its workers from ``VmHWM``, every
    20 ms while they run: it only grows, so a spike between readings still counts. (Not ``wait4``'s
    ``ru_maxrss``: that includes the forking parent's memory before ``exec``, pytest's here.)"""
    out, err = folder / "ramp.stdout", folder / "ramp.stderr"
    peaks: dict[int, float] = {}
    with out.open("wb") as o, err.open("wb") as e:
        proc = subprocess.Popen(
            [sys.executable, "-m", "loadgen.cli", *args],
            stdout=o,
            stderr=e,
            env=dict(os.environ, OPENAI_API_KEY="", **(env or {})),
        )
        deadline = time.monotonic() + timeout_s
        while proc.poll() is None:
            for pid in (proc.pid, *descendants(proc.pid)):
                seen = hwm_mb(pid)
                if seen is not None:
                    peaks[pid] = max(peaks.get(pid, 0.0), seen)
            if time.monotonic() > deadline:
                proc.kill()
            time.sleep(0.02)  # sampling a monotonic high-water mark, not synchronising on anything
    main = peaks.get(proc.pid, 0.0)
    return Measured(proc.returncode, out.read_text(), err.read_text(), main, max(peaks.values(), default=0.0))


def line_then_reply(line_bytes: int) -> Handler:
    """A 200 SSE stream that opens with one event of ``line_bytes`` bytes (a data line of x's), then a
    normal reply: an event under the bound must still read."""

    async def reply(req: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(req)
        await resp.write(b": " + b"x" * line_bytes + b"\n\n")
        await resp.write(REPLY)
        await resp.write_eof()
        return resp

    return reply


SLOW_METRICS_S = 60.0  # far past a scrape's time limit (loadgen.telemetry.sources.DEFAULT_TIMEOUT_S)


def souring_metrics(good: str, answers: int, then: str) -> Handler:
    """A ``/metrics`` that serves ``good`` for its first ``answers`` scrapes, then goes bad for good:
    ``then`` is "junk" (a page that is not Prometheus text), "trickle" (a valid line every 0.1 s, forever)
    or "slow" (``good`` itself, whole, but only after SLOW_METRICS_S: a server too busy to render it)."""
    served = 0

    async def metrics(req: web.Request) -> web.StreamResponse:
        nonlocal served
        served += 1
        if served <= answers:
            return web.Response(text=good, content_type="text/plain")
        if then == "junk":
            return web.Response(text="<html><body>502 Bad Gateway</body></html>\n", content_type="text/plain")
        if then == "slow":  # the delay itself, cut short when the client hangs up (no handler left behind)
            for _ in range(int(SLOW_METRICS_S / 0.1)):
                if req.transport is None or req.transport.is_closing():
                    break
                await asyncio.sleep(0.1)
            return web.Response(text=good, content_type="text/plain")
        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await resp.prepare(req)
        try:
            while True:
                await resp.write(b"vllm:num_requests_running 1\n")
                await asyncio.sleep(0.1)  # the trickle itself, not a synchronisation
        except (ConnectionError, RuntimeError):
            pass
        return resp

    return metrics
