"""What ``--precision`` saves and whether its figures hold: steps that end when sure against a long step.

Run: ``python benchmarks/bench_precision.py [--streams 16] [--precision 5] [--repeat 3] [--sigma 0] [--pin]``. Prints each
precision-ended step (why it ended, its window, out tok/s, TTFT p50 and p95 with their relative half-widths)
and whether a 60-s step's value lies within its interval; asserts nothing.

The server is the simulator's fast engine with lognormal latencies (TTFT median 80 ms, sigma 0.4; time per
token median 20 ms, sigma 0.3; 32 tokens), independent of the load; ``--sigma 0`` makes it the exact mock
of issue 31's target (TTFT 80 ms and 20 ms a token, every request alike). The SLO judges TTFT p95 (1 s: the
limit is not what is tested, only which figures must be precise). Steps last at most 30 s.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pinning import pin_apart  # noqa: E402 - beside this script

from loadgen.config import SLO, RampPlan  # noqa: E402 - after the path, for a checkout without install
from loadgen.profile import parse_profile  # noqa: E402
from loadgen.run.config import RunConfig  # noqa: E402
from loadgen.run.engine import Engine  # noqa: E402
from loadgen.sim import build_config, spawn_sim_process  # noqa: E402
from loadgen.types import Target  # noqa: E402

FIGURES = ("out_tok_s", "ttft_p50_ms", "ttft_p95_ms")


def run(url: str, plan: RampPlan, out: str) -> tuple[list[dict[str, Any]], float]:
    profile = parse_profile(
        'name = "precision"\n[[bucket]]\ninput = 64\noutput = 32\n[sampling]\nignore_eos = true\n',
        source="<bench_precision>",
    )
    config = RunConfig(
        Target(url), profile, plan=plan, out=out, telemetry=False, seed=5, slo=SLO(ttft_p95_ms=1000.0)
    )
    engine = Engine(config)
    t0 = time.monotonic()
    engine.start()
    if engine.wait(600) is None:
        engine.stop()
        raise SystemExit("the run did not end")
    lines = [json.loads(line) for line in Path(out).read_text().splitlines()]
    return [line for line in lines if line.get("type") == "step"], time.monotonic() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=16)
    parser.add_argument("--precision", type=float, default=5.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--sigma", type=float, default=None, help="both latencies' lognormal sigma (0: exact)"
    )
    parser.add_argument("--pin", action="store_true", help="the simulator on CPU 0, ramp on the others")
    args = parser.parse_args()
    sim = spawn_sim_process(
        build_config(
            "fast",
            seed=2,
            fixed_ttft_ms=80.0,
            fixed_ttft_sigma=0.4 if args.sigma is None else args.sigma,
            fixed_tpot_ms=20.0,
            fixed_tpot_sigma=0.3 if args.sigma is None else args.sigma,
        )
    )
    pinned = pin_apart(sim.pid) if args.pin else "not pinned"
    folder = tempfile.mkdtemp(prefix="ramp-bench-precision-")
    try:
        plan = RampPlan(
            (args.streams,), step_s=30.0, warmup_s=2.0, precision_pct=args.precision, repeat=args.repeat
        )
        precise, wall = run(sim.url, plan, os.path.join(folder, "precision.jsonl"))
        long, long_wall = run(
            sim.url, RampPlan((args.streams,), step_s=62.0, warmup_s=2.0), os.path.join(folder, "long.jsonl")
        )
    finally:
        sim.stop()
    ref = long[0]["margins"]

    def shown(m: dict[str, Any]) -> str:
        return "  ".join(
            f"{f} {m[f]['value']:.1f} ±{100 * (m[f]['hi'] - m[f]['lo']) / 2 / m[f]['value']:.1f} %"
            if m[f].get("hi") is not None
            else f"{f} {m[f]['value']:.1f} (open above)"
            for f in FIGURES
        )

    def within(m: dict[str, Any], value: float) -> bool:
        return bool(m["lo"] <= value <= (m["hi"] if m.get("hi") is not None else float("inf")))

    print(
        f"{args.streams} streams, --precision {args.precision:g}, sigma {'0.4/0.3' if args.sigma is None else args.sigma},"
        f" steps of at most 30 s ({wall:.0f} s wall; {pinned})"
    )
    for step in precise:
        m = step["margins"]
        agree = ", ".join(f"{f} {'yes' if within(m[f], ref[f]['value']) else 'NO'}" for f in FIGURES)
        print(
            f"  ended by {step['ended_by']:<9} after {step['window_s']:5.1f} s   {shown(m)}   60-s value within: {agree}"
        )
    print(f"  60-s step ({long_wall:.0f} s wall): {shown(ref)}")


if __name__ == "__main__":
    main()
