"""How right and how fast ``--find-max`` finds a smooth knee: a server whose figures worsen gradually with load.

Run: ``python benchmarks/bench_smooth_knee.py --sweep`` once (the long fixed sweep, written to
``benchmarks/reference/smooth_knee.json``: ``--levels``, ``--repeats 5``, ``--seconds 60``), then
``python benchmarks/bench_smooth_knee.py [--seeds 3]``: each seed's search over ``--range 32:128`` with
ramp's default steps, its answer against the sweep's knee (within ±5 %?) and its wall time against the
sweep's (at most a fifth?). Prints; asserts nothing.

The server is the simulator's ``h200-llama8b`` engine (step times of a real H200 serving Llama-3.1-8B: every
decode step slows as the batch grows), the workload the built-in ``chat`` profile, the SLO a floor on the
decode speed one user sees (``--decode-p50``, tok/s): decode p50 falls smoothly with the streams, so the SLO
bites at a level between 32 and 128 with no cliff. The sweep's knee: at each level the median of its repeats'
decode p50, and the level where that median crosses the floor, interpolated linearly between the last level
that met and the first that missed (the highest level that meets it, ``knee_level``, is the whole-stream
answer).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from loadgen.config import SLO, RampPlan  # noqa: E402 - after the path, for a checkout without install
from loadgen.profile import load_profile  # noqa: E402
from loadgen.run.config import RunConfig  # noqa: E402
from loadgen.run.engine import Engine  # noqa: E402
from loadgen.sim import build_config, spawn_sim_process  # noqa: E402
from loadgen.types import Target  # noqa: E402

REFERENCE = ROOT / "benchmarks" / "reference" / "smooth_knee.json"
FIGURE = "decode_p50_tok_s"


def run(
    url: str, config_args: dict[str, Any], out: str, timeout_s: float
) -> tuple[list[dict[str, Any]], float]:
    """One run of the engine; its record's lines and its wall time."""
    config = RunConfig(Target(url), load_profile("chat"), out=out, telemetry=False, **config_args)
    engine = Engine(config)
    t0 = time.monotonic()
    engine.start()
    if engine.wait(timeout_s) is None:
        engine.stop()
        engine.wait(30)
        raise SystemExit("the run did not end")
    wall = time.monotonic() - t0
    return [json.loads(line) for line in Path(out).read_text().splitlines()], wall


def decode_p50(step: dict[str, Any]) -> float:
    return float(step["decode_tok_s"]["p50"])


def sweep(args: argparse.Namespace, url: str, folder: str) -> None:
    levels = tuple(float(x) for x in args.levels.split(","))
    plan = RampPlan(levels, step_s=args.seconds, warmup_s=args.warmup, repeat=args.repeats)
    lines, wall = run(
        url,
        {"plan": plan, "seed": 1, "slo": SLO(decode_p50_tok_s=args.decode_p50)},
        os.path.join(folder, "sweep.jsonl"),
        timeout_s=len(levels) * args.repeats * (args.seconds + args.warmup + 60) + 300,
    )
    steps = [x for x in lines if x.get("type") == "step"]
    by_level: dict[float, list[float]] = {}
    for s in steps:
        by_level.setdefault(float(s["level"]), []).append(decode_p50(s))
    medians = {lv: statistics.median(v) for lv, v in sorted(by_level.items())}
    met = [lv for lv, m in medians.items() if m >= args.decode_p50]
    missed = [lv for lv, m in medians.items() if m < args.decode_p50 and (not met or lv > max(met))]
    knee_level = max(met) if met else None
    knee = knee_level
    if met and missed:
        a, b = max(met), min(missed)
        ma, mb = medians[a], medians[b]
        knee = a + (b - a) * (ma - args.decode_p50) / (ma - mb) if ma != mb else a
    build = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    reference = {
        "command": " ".join(["python", "benchmarks/bench_smooth_knee.py", *sys.argv[1:]]),
        "build": build,
        "date": time.strftime("%Y-%m-%d"),
        "decode_p50_floor": args.decode_p50,
        "repeats": args.repeats,
        "seconds": args.seconds,
        "warmup_s": args.warmup,
        "levels": {f"{lv:g}": {"decode_p50": by_level[lv], "median": medians[lv]} for lv in medians},
        "client_bound_steps": sum(bool(s.get("client_bound")) for s in steps),
        "knee": knee,
        "knee_level": knee_level,
        "wall_s": round(wall, 1),
        "load_average": os.getloadavg()[0],
    }
    REFERENCE.parent.mkdir(parents=True, exist_ok=True)
    REFERENCE.write_text(json.dumps(reference, indent=1) + "\n")
    for lv, m in medians.items():
        print(
            f"  {lv:>5g} streams  decode p50 median {m:6.1f} tok/s  ({', '.join(f'{v:.1f}' for v in by_level[lv])})"
        )
    print(
        f"sweep: knee {knee} (highest level meeting {args.decode_p50:g} tok/s: {knee_level}); {wall:.0f} s wall"
    )
    print(f"written: {REFERENCE.relative_to(ROOT)}")


def searches(args: argparse.Namespace, url: str, folder: str) -> None:
    if not REFERENCE.exists():
        raise SystemExit(f"no reference: run `python {Path(__file__).relative_to(ROOT)} --sweep` first")
    ref = json.loads(REFERENCE.read_text())
    knee, sweep_s = float(ref["knee"]), float(ref["wall_s"])
    lo, hi = (float(x) for x in args.range.split(":"))
    within, walls = 0, []
    for seed in range(1, args.seeds + 1):
        lines, wall = run(
            url,
            {
                "plan": RampPlan((lo,)),
                "level": int(lo),
                "find_max": (lo, hi),
                "seed": seed,
                "slo": SLO(decode_p50_tok_s=float(ref["decode_p50_floor"])),
            },
            os.path.join(folder, f"search{seed}.jsonl"),
            timeout_s=1800,
        )
        (event,) = [x for x in lines if x.get("type") == "event" and x.get("kind") == "find_max"]
        answer = event.get("max_level")
        ok = answer is not None and abs(float(answer) - knee) <= 0.05 * knee
        within += ok
        walls.append(wall)
        print(
            f"seed {seed}: answer {answer} (bracket {event['knee']['bracket']}, {event['knee']['confidence']},"
            f" {event['knee']['shape']}) against the sweep's {knee:.1f}: {'within' if ok else 'OUTSIDE'} ±5 %;"
            f" {len(event['probes'])} probes, {wall:.0f} s wall ({wall / sweep_s:.2f} of the sweep's {sweep_s:.0f} s)"
        )
        for p in event["probes"]:
            print(f"    {p['level']:>5g} {str(p['verdict']):>9}  margin {p['margin']}  {p['why']}")
    print(
        f"\n{within} of {args.seeds} answers within ±5 % of {knee:.1f}; wall per search: median "
        f"{statistics.median(walls):.0f} s, max {max(walls):.0f} s (the sweep: {sweep_s:.0f} s, a fifth "
        f"{sweep_s / 5:.0f} s); load average {os.getloadavg()[0]:.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sweep", action="store_true", help="run the long fixed sweep and write the reference"
    )
    parser.add_argument("--levels", default="64,72,80,88,96,104")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--decode-p50", type=float, default=80.0, help="the SLO's floor on decode p50, tok/s")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--range", default="32:128")
    args = parser.parse_args()
    sim = spawn_sim_process(build_config("h200-llama8b", seed=7))
    folder = tempfile.mkdtemp(prefix="ramp-bench-smooth-knee-")
    try:
        (sweep if args.sweep else searches)(args, sim.url, folder)
    finally:
        sim.stop()


if __name__ == "__main__":
    main()
