"""How often the step line's 95 % intervals cover the truth: the margins of error proved by coverage.

Run: ``python benchmarks/bench_coverage.py [--steps 12] [--seconds 5] [--warmup 1] [--streams 16,64]
[--servers random,sim] [--pin]``. Prints a table; asserts nothing. ``--pin``: the simulator on one CPU, ramp
on the others (``benchmarks/pinning.py``: a simulator sharing the client's cores is late in bursts).

Each configuration is one run of ``--steps`` consecutive steps at one level (each step its own warm-up, so
the steps are independent but for the server's state carried across a warm-up). Two servers:

* ``random``: the simulator's "fast" engine with its latencies drawn per request (``fixed_ttft_sigma``,
  ``fixed_tpot_sigma``): TTFT lognormal (median 80 ms, sigma 0.4), a time per token lognormal (median 20
  ms, sigma 0.3), 32 output tokens, whatever the load. The truth is analytic: TTFT p_q = 80 exp(0.4 z_q)
  ms; decode p50 = 50 tok/s (1000 / the median time per token); ITL p99 = 20 exp(0.3 z_0.99) ms (every
  request has as many tokens, so the token-weighted quantile is the per-request one); out tok/s = streams
  x 32 / (E[TTFT] + 31 E[tpot]), the renewal-reward rate of a closed loop without think time. What the
  truth leaves out: the client's own delay (about a millisecond: ~1 % of TTFT p50) and the simulator's
  1-ms wake-up tick, which moves each token's write by up to a millisecond (ITL).
* ``sim``: the simulator's ``tiny-cpu`` engine (queueing, batching: latencies depend on the load). Its
  truth is unknown in closed form: it is the pooled figure of all the run's steps (their histograms added),
  so a coverage here says whether the intervals are as wide as the steps' spread, not whether they are
  unbiased.

A figure counts as covered when the truth lies within the step's ``margins`` [lo, hi]; a step whose
interval is flagged untrusted counts (as a miss if it misses) and the untrusted share is printed beside.
Beside each row, ``f-call``: the share of pairs of its steps (the same server, measured twice) whose
difference's interval excludes 0, what ``ramp compare`` would call a difference that is not there.
Each row is read twice where the truth is known: against the exact truth (the client's and the
simulator's own delays included as errors) and against the pooled figures of the row's other steps
(leave-one-out: what the step estimates, less any bias every step shares), which isolates the interval's
width from the measurement's bias; and, where some steps were flagged client-bound, against the exact truth
over the steps that were not (``clean``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pinning import pin_apart  # noqa: E402 - beside this script

from loadgen.config import RampPlan  # noqa: E402 - after the path, for a checkout without install
from loadgen.metrics import decode_histogram  # noqa: E402
from loadgen.metrics.hdr import DenseHistogram, hdr_counts, spec_for, summarize  # noqa: E402
from loadgen.profile import parse_profile  # noqa: E402
from loadgen.run.config import RunConfig  # noqa: E402
from loadgen.run.engine import Engine  # noqa: E402
from loadgen.sim import build_config, spawn_sim_process  # noqa: E402
from loadgen.stats import Interval, difference_bounds  # noqa: E402
from loadgen.types import Target  # noqa: E402

OUTPUT = 32
TTFT_MEDIAN_MS, TTFT_SIGMA = 80.0, 0.4
TPOT_MEDIAN_MS, TPOT_SIGMA = 20.0, 0.3
# figure in the step line's margins -> (metric, point) of its histogram
FIGURES: dict[str, tuple[str, str]] = {
    "ttft_p50_ms": ("ttft_ms", "p50"),
    "ttft_p95_ms": ("ttft_ms", "p95"),
    "ttft_p99_ms": ("ttft_ms", "p99"),
    "itl_p99_ms": ("itl_ms", "p99"),
    "decode_p50_tok_s": ("decode_tok_s", "p50"),
    "out_tok_s": ("", ""),
}


def random_truth(streams: int) -> dict[str, float]:
    z = NormalDist().inv_cdf
    ttft = {p: TTFT_MEDIAN_MS * math.exp(TTFT_SIGMA * z(p)) for p in (0.5, 0.95, 0.99)}
    mean_ttft = TTFT_MEDIAN_MS * math.exp(TTFT_SIGMA**2 / 2)
    mean_tpot = TPOT_MEDIAN_MS * math.exp(TPOT_SIGMA**2 / 2)
    return {
        "ttft_p50_ms": ttft[0.5],
        "ttft_p95_ms": ttft[0.95],
        "ttft_p99_ms": ttft[0.99],
        "itl_p99_ms": TPOT_MEDIAN_MS * math.exp(TPOT_SIGMA * z(0.99)),
        "decode_p50_tok_s": 1000.0 / TPOT_MEDIAN_MS,
        "out_tok_s": streams * OUTPUT / ((mean_ttft + (OUTPUT - 1) * mean_tpot) / 1000.0),
    }


def run(server: str, streams: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    """One run of ``args.steps`` steps at ``streams``: its step lines."""
    if server == "random":
        config = build_config(
            "fast",
            seed=args.seed,
            fixed_ttft_ms=TTFT_MEDIAN_MS,
            fixed_ttft_sigma=TTFT_SIGMA,
            fixed_tpot_ms=TPOT_MEDIAN_MS,
            fixed_tpot_sigma=TPOT_SIGMA,
        )
    else:
        config = build_config("tiny-cpu", seed=args.seed)
    sim = spawn_sim_process(config)
    if args.pin:
        pin_apart(sim.pid)
    out = os.path.join(tempfile.mkdtemp(prefix="ramp-bench-coverage-"), "run.jsonl")
    profile = parse_profile(
        f'name = "coverage"\n[[bucket]]\ninput = 64\noutput = {OUTPUT}\n[sampling]\nignore_eos = true\n',
        source="<bench_coverage>",
    )
    try:
        run_config = RunConfig(
            target=Target(url=sim.url),
            profile=profile,
            plan=RampPlan(
                (streams,), step_s=args.warmup + args.seconds, warmup_s=args.warmup, repeat=args.steps
            ),
            out=out,
            telemetry=False,
            seed=args.seed,
        )
        engine = Engine(run_config)
        engine.start()
        outcome = engine.wait(args.steps * (args.warmup + args.seconds) * 4 + 120)
        if outcome is None:
            engine.stop()
            raise SystemExit(f"{server} at {streams} streams: the run did not end")
    finally:
        sim.stop()
    lines = [json.loads(s) for s in Path(out).read_text().splitlines()]
    return [line for line in lines if line.get("type") == "step"]


def pooled_truth(steps: list[dict[str, Any]]) -> dict[str, float]:
    """The pooled figures of ``steps`` (histograms added; rates: all tokens over all windows)."""
    truth: dict[str, float] = {}
    for figure, (metric, point) in FIGURES.items():
        if not metric:
            tokens = sum(s["out_tok_s"] * s["window_s"] for s in steps if s.get("out_tok_s") is not None)
            truth[figure] = tokens / sum(s["window_s"] for s in steps)
            continue
        dense = DenseHistogram(metric)
        for s in steps:
            b64 = (s.get("hists") or {}).get(metric)
            if b64:
                dense.counts += hdr_counts(decode_histogram(b64))
        spec = spec_for(metric)
        truth[figure] = getattr(
            summarize(dense.counts, spec.layout, spec.display_div, with_bins=False)[0], point
        )
    return truth


def coverage(
    steps: list[dict[str, Any]], truths: list[dict[str, float]]
) -> dict[str, tuple[float, float, float]]:
    """Per figure: share covered (step i against ``truths[i]``), share untrusted, median relative half-width."""
    table: dict[str, tuple[float, float, float]] = {}
    for figure in FIGURES:
        covered = untrusted = 0
        widths: list[float] = []
        for s, truth in zip(steps, truths, strict=True):
            m = (s.get("margins") or {}).get(figure)
            if m is None or m.get("lo") is None:
                untrusted += 1
                continue
            # an interval open above (too few values to bound a tail) holds every value from its lower end
            covered += m["lo"] <= truth[figure] <= (math.inf if m.get("hi") is None else m["hi"])
            untrusted += not m.get("trusted")
            if m["value"] and m.get("hi") is not None:
                widths.append((m["hi"] - m["lo"]) / 2 / abs(m["value"]))
        n = max(1, len(steps))
        table[figure] = (covered / n, untrusted / n, float(np.median(widths)) if widths else math.nan)
    return table


def interval_of(step: dict[str, Any], figure: str) -> Interval | None:
    m = (step.get("margins") or {}).get(figure)
    if m is None or m.get("lo") is None:
        return None
    b = int(m.get("batches") or 0)
    return Interval(
        m["value"], m["lo"], m.get("hi"), b, int(m.get("n") or 0), float(b - 1), bool(m.get("trusted"))
    )


def called(a: Interval, b: Interval) -> bool | None:
    """Whether ``ramp compare`` would call ``a`` and ``b`` different (None: no interval to judge on): the
    interval of the difference (``loadgen.stats.difference_bounds``, open ends included) excludes 0."""
    bounds = difference_bounds(a, b)
    return None if bounds is None else not bounds[0] <= 0 <= bounds[1]


def false_calls(steps: list[dict[str, Any]]) -> dict[str, float]:
    """Per figure: the share of pairs of the row's steps (the same server twice) whose difference's
    interval excludes 0: what ``ramp compare`` would call a difference that is not there."""
    out: dict[str, float] = {}
    for figure in FIGURES:
        calls = pairs = 0
        for i, a in enumerate(steps):
            for b in steps[i + 1 :]:
                ia, ib = interval_of(a, figure), interval_of(b, figure)
                call = None if ia is None or ib is None else called(ia, ib)
                if call is not None:
                    pairs += 1
                    calls += call
        out[figure] = calls / pairs if pairs else math.nan
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--streams", default="16,64")
    parser.add_argument("--servers", default="random,sim")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--pin", action="store_true", help="each simulator on CPU 0, ramp on the others")
    args = parser.parse_args()
    print(
        f"{args.steps} steps of {args.seconds:g} s (+{args.warmup:g} s warm-up) per row; 95 % intervals;"
        f" {'simulator and ramp pinned apart' if args.pin else 'not pinned'}"
    )
    print(f"{'server':<8} {'streams':>7} {'truth':<7}  " + "  ".join(f"{f:>16}" for f in FIGURES))
    for server in args.servers.split(","):
        for streams in (int(s) for s in args.streams.split(",")):
            t0 = time.monotonic()
            steps = run(server, streams, args)
            # every other step's data pooled: what this step estimates, less any bias common to all steps
            others = [pooled_truth(steps[:i] + steps[i + 1 :]) for i in range(len(steps))]
            rows = [("pooled", others, pooled_truth(steps))]
            if server == "random":
                exact = random_truth(streams)
                rows.insert(0, ("exact", [exact] * len(steps), exact))
            clean = [s for s in steps if not s.get("client_bound")]
            if server == "random" and 0 < len(clean) < len(steps):
                # the steps the tool did not flag client-bound: a flagged step's figures are the client's
                # share of the machine as much as the server's, and say so
                rows.append(("clean", [random_truth(streams)] * len(clean), random_truth(streams)))
            for name, truths, shown in rows:
                table = coverage(clean if name == "clean" else steps, truths)
                cells = "  ".join(
                    f"{100 * c:4.0f}% ±{100 * w:4.1f}% u{100 * u:3.0f}" for c, u, w in table.values()
                )
                print(f"{server:<8} {streams:>7} {name:<7}  {cells}")
                print(f"{'':<8} {'':>7} {'truth':<7}  " + "  ".join(f"{shown[f]:>16.4g}" for f in FIGURES))
            calls = false_calls(steps)
            print(
                f"{'':<8} {'':>7} {'f-call':<7}  " + "  ".join(f"{100 * calls[f]:>15.0f}%" for f in FIGURES)
            )
            bound = sum(bool(s.get("client_bound")) for s in steps)
            print(f"  ({len(steps)} steps, {bound} flagged client-bound, {time.monotonic() - t0:.0f} s)")
            sys.stdout.flush()
    print("cell: covered share · median relative half-width · share untrusted (u)")
    print(
        "truth: exact = the server's known distribution; pooled = every other step of the row pooled; clean ="
        " exact, over the steps not flagged client-bound"
    )
    print("f-call: pairs of the row's steps (the same server twice) whose difference's interval excludes 0")


if __name__ == "__main__":
    main()
