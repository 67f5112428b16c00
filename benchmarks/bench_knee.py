"""How fast and how right ``--find-max`` finds a known knee: a server with N slots and exact timing.

Run: ``python benchmarks/bench_knee.py [--seeds 5] [--slots 20] [--hi 64] [--step-seconds 30]``. Prints, per
seed, the search's answer (knee, bracket, confidence, shape), its probes (level, verdict, window, why
probed again) and the wall time of the whole search; then how many answers hold N (the knee is N, or the
bracket [met, missed] has met <= N < missed) and the wall times' median and maximum. Asserts nothing.

The server is the simulator's batching engine with every step taking exactly 10 ms whatever the batch
(no per-sequence cost), at most N sequences running (``max_num_seqs``): up to N streams a request starts at
once (TTFT one or two steps), past N it waits for a slot. Requests last 0.5 to 1.5 s (50 to 150 output
tokens, uniform), so their ends are spread: at N + 1 streams nearly every request waits for the next end
among N, about S / N = 50 ms on average and its p95 three times that, so TTFT p95 jumps from ~20 ms to
~150 ms. (With equal lengths the ends clump and only about 1 request in N + 1 waits: p95 sits on the edge
and N + 1 is a fair answer too.) The SLO is TTFT p95 <= 100 ms: the true answer is N. Steps as ``ramp run
--find-max`` takes them by default (30 s at most, 5-s warm-up for the first probe).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loadgen.config import SLO, RampPlan  # noqa: E402 - after the path, for a checkout without install
from loadgen.profile import parse_profile  # noqa: E402
from loadgen.run.config import RunConfig  # noqa: E402
from loadgen.run.engine import Engine  # noqa: E402
from loadgen.sim import build_config, spawn_sim_process  # noqa: E402
from loadgen.sim.handle import ProcessSimHandle  # noqa: E402
from loadgen.sim.params import StepCost  # noqa: E402
from loadgen.types import Target  # noqa: E402

EXACT = StepCost(10.0, 0.0, 0.0, ((0, 10.0), (1 << 20, 10.0)), spec_draft_ms=0.0)
PROFILE = 'name = "slots"\n[[bucket]]\ninput = 16\noutput = { min = 50, max = 150 }\n[sampling]\nignore_eos = true\n'


def knee_server(seed: int, slots: int) -> ProcessSimHandle:
    """The known knee's server: the batching engine, exact 10-ms steps, at most ``slots`` sequences."""
    config = build_config(
        "tiny-cpu", seed=seed, max_num_seqs=slots, cost=EXACT, kv_capacity_tokens=1 << 22, max_model_len=4096
    )
    return spawn_sim_process(config)


def search(
    url: str, hi: float, plan: RampPlan, seed: int, out: str
) -> tuple[dict[str, Any], list[Any], float]:
    config = RunConfig(
        Target(url),
        parse_profile(PROFILE, source="<bench_knee>"),
        plan=plan,
        level=1,
        find_max=(1.0, hi),
        out=out,
        telemetry=False,
        seed=seed,
        slo=SLO(ttft_p95_ms=100.0),
    )
    engine = Engine(config)
    t0 = time.monotonic()
    engine.start()
    if engine.wait(900) is None:
        engine.stop()
        raise SystemExit("the search did not end")
    wall = time.monotonic() - t0
    lines = [json.loads(line) for line in Path(out).read_text().splitlines()]
    (event,) = [x for x in lines if x.get("type") == "event" and x.get("kind") == "find_max"]
    return event, [x for x in lines if x.get("type") == "step"], wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--slots", type=int, default=20)
    parser.add_argument("--hi", type=float, default=64.0)
    parser.add_argument("--step-seconds", type=float, default=30.0)
    parser.add_argument("--warmup", type=float, default=None, help="default: the plan's own")
    args = parser.parse_args()
    plan = RampPlan((1.0,), step_s=args.step_seconds)
    if args.warmup is not None:
        plan = RampPlan((1.0,), step_s=args.step_seconds, warmup_s=args.warmup)
    folder = tempfile.mkdtemp(prefix="ramp-bench-knee-")
    holds, walls = 0, []
    for seed in range(1, args.seeds + 1):
        sim = knee_server(seed, args.slots)
        try:
            event, steps, wall = search(
                sim.url, args.hi, plan, seed, os.path.join(folder, f"seed{seed}.jsonl")
            )
        finally:
            sim.stop()
        knee = event["knee"]
        met, missed = knee["bracket"]
        ok = met is not None and met <= args.slots and (missed is None or args.slots < missed)
        holds += ok
        walls.append(wall)
        by_step = {s["step"]: s for s in steps}
        print(
            f"seed {seed}: {'holds' if ok else 'WRONG'} knee {met} bracket {knee['bracket']} "
            f"{knee['confidence']} {knee['shape']}  {len(event['probes'])} probes  {wall:.1f} s wall"
        )
        for p in event["probes"]:
            s = by_step.get(p["step"], {})
            why = f"  again: {p['why']}" if p["why"] else ""
            print(
                f"    {p['level']:>5g} {str(p['verdict']):>9} {s.get('ended_by', '?'):>9} "
                f"window {s.get('window_s', 0):.1f} s  margin {p['margin']}{why}"
            )
    print(
        f"\n{holds} of {args.seeds} answers hold {args.slots}; wall per search: median "
        f"{statistics.median(walls):.1f} s, max {max(walls):.1f} s; load average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
