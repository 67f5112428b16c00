"""Benchmarks of the simulator, printed as numbers (never asserted in tests).

``python benchmarks/bench_sim.py model [--preset h200-llama8b]``: the engine model on a fake clock, closed loop
at several concurrencies: aggregate output tok/s, per-request decode tok/s, TTFT.

``python benchmarks/bench_sim.py speed --streams 512 --seconds 10``: how many SSE chunks per second the "fast"
preset serves, and how much of one core that costs the simulator process (it runs in its own process; the
client here only counts bytes).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from loadgen.sim import build_config, run_closed_loop, spawn_sim_process


def bench_model(preset: str, prompt: int, output: int, levels: Sequence[int], seconds: float) -> None:
    params = build_config(preset).engine
    print(
        f"preset {preset}: prompt {prompt} tokens, output {output} tokens, closed loop, {seconds:.0f} s simulated"
    )
    print(
        f"{'conc':>6} {'agg tok/s':>10} {'decode p50 tok/s':>17} {'ttft p50 ms':>12} {'ttft p95 ms':>12} {'preempt':>8} {'kv max':>7}"
    )
    for n in levels:
        r = run_closed_loop(params, n, prompt, output, duration_s=seconds, warmup_s=min(20.0, seconds / 2))

        def f(x: float | None, fmt: str = ".0f") -> str:
            return "n/a" if x is None else format(x, fmt)

        print(
            f"{n:>6} {r.out_tok_s:>10.0f} {f(r.decode_tok_s_p50, '.1f'):>17} {f(r.ttft_ms_p50):>12} "
            f"{f(r.ttft_ms_p95):>12} {r.preemptions:>8} {r.kv_usage_max:>7.2f}"
        )


def _scrape(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name in ("vllm:generation_tokens_total", "process_cpu_seconds_total"):
                out[s.name] = s.value
    return out


async def _speed(url: str, streams: int, seconds: float, max_tokens: int) -> None:
    body = {
        "model": "sim-llama-8b",
        "messages": [{"role": "user", "content": "benchmark"}],
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    stop_at = 0.0
    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=None)) as session:

        async def user() -> None:
            while time.monotonic() < stop_at:
                async with session.post(url + "/v1/chat/completions", json=body) as resp:
                    async for _ in resp.content.iter_any():
                        pass

        async def metrics() -> dict[str, float]:
            async with session.get(url + "/metrics") as resp:
                return _scrape(await resp.text())

        stop_at = time.monotonic() + seconds + 3.0
        tasks = [asyncio.create_task(user()) for _ in range(streams)]
        await asyncio.sleep(2.0)  # ramp: every stream past its first token
        m0, t0 = await metrics(), time.monotonic()
        await asyncio.sleep(seconds)
        m1, t1 = await metrics(), time.monotonic()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    chunks = m1["vllm:generation_tokens_total"] - m0["vllm:generation_tokens_total"]
    cpu = m1["process_cpu_seconds_total"] - m0["process_cpu_seconds_total"]
    wall = t1 - t0
    ideal = streams * 100.0  # fast preset: one token per 10 ms per stream
    print(
        f"streams {streams}: {chunks / wall:,.0f} chunks/s served (ideal {ideal:,.0f}), simulator CPU "
        f"{100 * cpu / wall:.0f} % of one core, {chunks / cpu if cpu else float('nan'):,.0f} chunks per CPU-second"
    )


def bench_speed(streams: Sequence[int], seconds: float, max_tokens: int) -> None:
    handle = spawn_sim_process(build_config("fast"))
    try:
        info = handle.info()
        for n in streams:
            asyncio.run(_speed(handle.url, n, seconds, max_tokens))
        info = handle.info()
        print(
            f"engine loop: {info['steps_late']} ticks > 2 ms late, worst {info['max_late_ms']:.1f} ms, resyncs {info['resyncs']}"
        )
    finally:
        handle.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/bench_sim.py")
    sub = parser.add_subparsers(dest="what", required=True)
    m = sub.add_parser("model", help="engine model on a fake clock")
    m.add_argument("--preset", default="h200-llama8b")
    m.add_argument("--prompt", type=int, default=1024)
    m.add_argument("--output", type=int, default=512)
    m.add_argument("--levels", default="1,16,64,256,512")
    m.add_argument("--seconds", type=float, default=120.0)
    s = sub.add_parser("speed", help="chunks/s of the fast preset over real sockets")
    s.add_argument("--streams", default="256,512,1024")
    s.add_argument("--seconds", type=float, default=8.0)
    s.add_argument("--max-tokens", type=int, default=400)
    args = parser.parse_args(argv)
    if args.what == "model":
        bench_model(
            args.preset, args.prompt, args.output, [int(x) for x in args.levels.split(",")], args.seconds
        )
    else:
        bench_speed([int(x) for x in args.streams.split(",")], args.seconds, args.max_tokens)
    return 0


if __name__ == "__main__":
    sys.exit(main())
