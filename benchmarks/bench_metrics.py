"""Micro-benchmark of the metrics path: Recorder.record/take, delta pickling, Accumulator add/stats, HDR codec.

Run: ``python benchmarks/bench_metrics.py``. The figures it prints are the ones ``loadgen.metrics`` is
sized by (STYLE.md, "Facts measured here"): a worker's per-result cost, a 250 ms interval's take, pickle
and controller add, the snapshot's stats() for three windows, and hdrh's own record_value and percentile
read for reference.
"""

from __future__ import annotations

import pickle
import time

import numpy as np

from loadgen.metrics import (
    PCT_POINTS,
    US_PER_HOUR,
    Accumulator,
    DenseHistogram,
    IntervalDelta,
    Recorder,
    decode_histogram,
    hdr_layout,
)
from loadgen.types import Outcome, RequestResult


def synthetic_results(n: int, tokens: int, seed: int = 0) -> list[RequestResult]:
    """``n`` successful streams of ``tokens`` chunks each, lognormal TTFT (~80 ms) and gaps (~12 ms)."""
    rng = np.random.default_rng(seed)
    out: list[RequestResult] = []
    now = 1_000_000_000_000
    for i in range(n):
        intended = now + i * 5_000_000
        sent = intended + int(rng.integers(10_000, 200_000))
        first = sent + int(rng.lognormal(np.log(80e6), 0.4))
        gaps = rng.lognormal(np.log(12e6), 0.3, size=tokens - 1).astype(np.int64)
        chunks = (first, *(first + np.cumsum(gaps)).tolist())
        out.append(
            RequestResult(
                outcome=Outcome.OK,
                intended_ns=intended,
                sent_ns=sent,
                end_ns=chunks[-1] + 1_000_000,
                first_token_ns=first,
                last_token_ns=chunks[-1],
                chunk_times_ns=chunks,
                output_tokens=tokens,
                input_tokens=1000,
                tokens_exact=True,
                cache_class="hit" if i % 2 else "miss",
            )
        )
    return out


def bench_record() -> None:
    for tokens in (16, 256):
        results = synthetic_results(2000, tokens)
        rec = Recorder()
        t = time.perf_counter()
        for r in results:
            rec.record(r)
        t_record = time.perf_counter() - t
        t = time.perf_counter()
        rec.take(0, 1)
        t_take = time.perf_counter() - t
        print(
            f"record: {tokens}-chunk results: {t_record / len(results) * 1e6:.2f} µs/result "
            f"+ take {t_take / len(results) * 1e6:.2f} µs/result (take of {len(results)} results {t_take * 1e3:.1f} ms)"
        )


def busy_interval() -> tuple[IntervalDelta, float]:
    """A typical interval: 250 ms of a busy worker (50 finished requests of 256 tokens); and its take time."""
    rec = Recorder()
    for r in synthetic_results(50, 256, seed=1):
        rec.record(r)
    t = time.perf_counter()
    delta = rec.take(0, 250_000_000)
    return delta, time.perf_counter() - t


def bench_interval() -> None:
    delta, t_take = busy_interval()
    size_sparse = len(pickle.dumps(delta, protocol=pickle.HIGHEST_PROTOCOL))
    t = time.perf_counter()
    for _ in range(20):
        pickle.loads(pickle.dumps(delta, protocol=pickle.HIGHEST_PROTOCOL))
    t_pickle = (time.perf_counter() - t) / 20
    acc = Accumulator()
    acc.add(delta)
    t = time.perf_counter()
    encoded = acc.encoded()
    t_encode = time.perf_counter() - t
    size_hdr = sum(len(v) for v in encoded.values())
    steady = Accumulator()
    steady.add(delta)
    t = time.perf_counter()
    for _ in range(50):
        steady.add(delta)
    t_add_sparse = (time.perf_counter() - t) / 50
    t = time.perf_counter()
    for _ in range(5):
        for key, b64 in encoded.items():
            DenseHistogram(key).add_hdr(decode_histogram(b64))
    t_add_hdr = (time.perf_counter() - t) / 5
    print(
        f"interval (50 results x 256 chunks, {len(delta.hists)} hists): take {t_take * 1e3:.2f} ms; "
        f"sparse pairs: {size_sparse} B pickled, pickle+unpickle {t_pickle * 1e3:.3f} ms, "
        f"controller add {t_add_sparse * 1e3:.3f} ms; "
        f"hdr encode(): {size_hdr} B base64, encode {t_encode * 1e3:.2f} ms, decode+add {t_add_hdr * 1e3:.2f} ms"
    )


def bench_ship_block(rounds: int = 15) -> None:
    """What the metrics path keeps the worker's loop from its sockets for, at 1,024 streams of 64 tokens
    against a server that keeps up (~700 requests finish in a 250 ms interval): the longest single
    ``record`` (inside a request's task step) and the interval's ``take`` (inside the shipment), CPU time,
    the best of ``rounds`` (the least disturbed by other processes on a shared machine)."""
    results = synthetic_results(700, 64, seed=2)
    rec = Recorder()
    worst, take, total = [], [], []
    clock = time.thread_time_ns
    for _ in range(rounds):
        longest = spent = 0
        for r in results:
            t = clock()
            rec.record(r)
            took = clock() - t
            longest, spent = max(longest, took), spent + took
        t = clock()
        rec.take(0, 250_000_000)
        took = clock() - t
        worst.append(longest)
        take.append(took)
        total.append(spent + took)
    print(
        f"ship block (700 results x 64 chunks per 250 ms interval, best of {rounds}): longest record "
        f"{min(worst) / 1e3:.0f} µs, take {min(take) / 1e6:.2f} ms; CPU per result, record + take "
        f"{min(total) / len(results) / 1e3:.2f} µs"
    )


def bench_snapshot() -> None:
    """3 windows with a few thousand results each, read as a snapshot reads them."""
    windows = []
    for seed in range(3):
        acc = Accumulator()
        rec = Recorder()
        for r in synthetic_results(3000, 64, seed=seed):
            rec.record(r)
        acc.add(rec.take(0, 1))
        windows.append(acc)
    t = time.perf_counter()
    n = 20
    for _ in range(n):
        for i, acc in enumerate(windows):
            acc.stats(("step", "rolling", "run")[i], 10.0)
    t_stats = (time.perf_counter() - t) / n
    print(f"snapshot: stats() for 3 windows (5 metrics + 2 class splits each): {t_stats * 1e3:.2f} ms")


def bench_reference_hdrh() -> None:
    t = time.perf_counter()
    h = hdr_layout(1, US_PER_HOUR, 3).new_hdr()
    for v in range(1000):
        h.record_value(1000 + v * 997)
    t_rv = (time.perf_counter() - t) / 1000
    t = time.perf_counter()
    h.get_percentile_to_value_dict(list(PCT_POINTS))
    t_pd = time.perf_counter() - t
    print(
        f"reference hdrh: record_value {t_rv * 1e6:.2f} µs, get_percentile_to_value_dict {t_pd * 1e3:.2f} ms"
    )


def main() -> None:
    bench_record()
    bench_interval()
    bench_ship_block()
    bench_snapshot()
    bench_reference_hdrh()


if __name__ == "__main__":
    main()
