"""What one read of the live diagnosis costs (``loadgen.run.live_diagnosis``: the engine reads it at most once
a second while a step measures): the server's window figures, its TTFT histograms and the window's doubts
from a hub holding ``--readings`` samples (one a second: 3,600 is the hub's hour of history), then the
diagnosis itself against ten finished steps.

Run: ``python benchmarks/bench_live_diagnosis.py [--readings 3600] [--window-s 30] [--reps 50]``. Prints
milliseconds per read; asserts nothing.
"""

from __future__ import annotations

import argparse
import time

from loadgen.analysis.diagnosis import StepFigures, diagnose
from loadgen.analysis.ttft_split import ttft_split
from loadgen.snapshot import Percentiles
from loadgen.telemetry import CumulativeHistogram, Reading, TelemetryHub
from loadgen.telemetry.reading import SourceError

S = 1_000_000_000
BOUNDS = (0.01, 0.05, 0.1, 0.5, float("inf"))


class _Hand:
    """A source fed by hand (``hub.record``): never polled."""

    name, kind, interval_s = "metrics", "mixed", 1.0

    async def poll(self) -> Reading:
        raise SourceError("not polled")

    async def aclose(self) -> None:
        pass


def reading(t: int) -> Reading:
    """The t-th second of a steady vLLM: gauges, counters and TTFT / queue / prefill histograms."""
    hist = CumulativeHistogram(BOUNDS, (t, 5 * t, 8 * t, 10 * t, 10 * t), 0.4 * t)
    return Reading(
        t_ns=t * S,
        runtime="vllm",
        gauges={"running": 8.0, "waiting": 2.0, "kv_usage": 0.4},
        counters={"gen_tokens": 400.0 * t, "prompt_tokens": 100.0 * t, "requests_finished": 10.0 * t},
        histograms={"ttft_s": hist, "queue_s": hist, "prefill_s": hist, "itl_s": hist},
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--readings", type=int, default=3600)
    ap.add_argument("--window-s", type=int, default=30)
    ap.add_argument("--reps", type=int, default=50)
    args = ap.parse_args()
    hub = TelemetryHub([_Hand()])  # type: ignore[list-item]  # a Source in all but its poller
    for t in range(1, args.readings + 1):
        hub.record("metrics", reading(t))
    t1 = args.readings * S
    t0 = t1 - args.window_s * S
    base = StepFigures(1, 40, 0, 0, 100.0, 20.0, 25.0, 100.0, False, "", {"running_max": 1.0}, {})
    before = [base] * 10
    client = Percentiles(count=200, mean=45.0, p50=40.0, p95=90.0)
    kind = ""
    start = time.perf_counter()
    for _ in range(args.reps):
        server = hub.window_summary(t0, t1)
        split = ttft_split(client, hub.ttft_histograms(t0, t1))
        doubt = hub.window_doubt(t0, t1) or ""
        figures = StepFigures(8, 200, 0, 0, 800.0, 40.0, 90.0, 90.0, False, "", server, split, doubt)
        kind = str(diagnose(figures, before)["kind"])
    per_ms = (time.perf_counter() - start) / args.reps * 1000
    start = time.perf_counter()
    for _ in range(args.reps):
        hub.window_doubt(t0, t1)
    doubt_ms = (time.perf_counter() - start) / args.reps * 1000
    print(
        f"{args.readings} readings, a {args.window_s}-s window: {per_ms:.2f} ms a read ({kind}); doubts {doubt_ms:.2f} ms"
    )


if __name__ == "__main__":
    main()
