"""How often ``ramp compare`` calls a difference: never where there is none, always where there is one.

Run: ``python benchmarks/bench_compare_noise.py [--steps 12] [--seconds 5] [--warmup 1] [--streams 16]
[--repeats 1] [--sigma 0.2] [--output 16] [--pin]``. Prints a table; asserts nothing.

Two servers, the simulator's "fast" engine with its TTFT drawn per request (``fixed_ttft_ms`` 50 and 53: a
real 6 % shift of every TTFT percentile; lognormal with ``--sigma``, 0 for the exact mock's fixed TTFT; 10 ms
a token, ``--output`` tokens). Each is ramped once, ``--steps`` steps at one level (``--repeat``: each step its own warm-up
and window). The steps are then taken as runs of their own, ``--repeats`` consecutive steps to a run (a
level's repeats, combined into one interval by ``ramp compare``), and paired through the comparison
``ramp compare`` builds (``loadgen.analysis.comparison.build``: the same conditions, the same code path):

* **same server**: disjoint pairs of runs of one server (run 1 vs 2, 3 vs 4, ... of each server): a called
  difference ("better"/"worse" rather than "within noise") is a false call. All pairs (not independent:
  each run is in several) are counted too, for a larger denominator;
* **6 % shift**: run i of the 50-ms server against run i of the 53-ms one: a TTFT percentile not called
  "worse" is a miss.

Targets (issue 31): the same server "within noise" in >= 95 % of pairs; the shift called in >= 95 %. On a
loaded machine the client is part of what is measured: the table says how many steps were flagged
client-bound.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pinning import pin_apart  # noqa: E402 - beside this script

from loadgen.analysis.comparison import Comparison, build  # noqa: E402 - after the path, for a checkout
from loadgen.analysis.runs import Run, load_run  # noqa: E402
from loadgen.config import RampPlan  # noqa: E402
from loadgen.profile import parse_profile  # noqa: E402
from loadgen.run.config import RunConfig  # noqa: E402
from loadgen.run.engine import Engine  # noqa: E402
from loadgen.sim import build_config, spawn_sim_process  # noqa: E402
from loadgen.types import Target  # noqa: E402

FIGURES = ("ttft_p50_ms", "ttft_p95_ms", "out_tok_s", "itl_p99_ms", "e2e_p95_s")  # compare's rows
SHIFTED = ("ttft_p50_ms", "ttft_p95_ms")  # the figures the 6 % shift moves by 6 %


def ramp_once(ttft_ms: float, args: argparse.Namespace) -> Run:
    """One server, ``args.steps`` steps at ``args.streams``: its record, read as ``ramp compare`` reads it."""
    config = build_config(
        "fast",
        seed=args.seed,
        fixed_ttft_ms=ttft_ms,
        fixed_ttft_sigma=args.sigma,
        fixed_tpot_ms=10.0,
    )
    sim = spawn_sim_process(config)
    if args.pin:
        pin_apart(sim.pid)
    out = os.path.join(tempfile.mkdtemp(prefix="ramp-bench-compare-"), "run.jsonl")
    profile = parse_profile(
        f'name = "noise"\n[[bucket]]\ninput = 64\noutput = {args.output}\n[sampling]\nignore_eos = true\n',
        source="<bench_compare_noise>",
    )
    try:
        plan = RampPlan(
            (args.streams,), step_s=args.warmup + args.seconds, warmup_s=args.warmup, repeat=args.steps
        )
        engine = Engine(
            RunConfig(
                target=Target(url=sim.url),
                profile=profile,
                plan=plan,
                out=out,
                telemetry=False,
                seed=args.seed,
            )
        )
        engine.start()
        if engine.wait(args.steps * (args.warmup + args.seconds) * 4 + 120) is None:
            engine.stop()
            raise SystemExit(f"the {ttft_ms:g}-ms server: the run did not end")
    finally:
        sim.stop()
    return load_run(out, "A")


def runs_of(run: Run, size: int) -> list[Run]:
    """The record's steps as runs of ``size`` consecutive steps each (a level's repeats)."""
    out = []
    for at in range(0, len(run.steps) - size + 1, size):
        steps, lines = run.steps[at : at + size], run.lines[at : at + size]
        out.append(Run(f"{run.label}{at // size}", run.path, run.header, steps, lines))
    return out


def marks(a: Run, b: Run) -> dict[str, str]:
    """``ramp compare a b``'s mark of each figure at their one level: "within noise", "better", "worse"."""
    comparison: Comparison = build([a, b], (), force=True)
    out: dict[str, str] = {}
    for level in comparison.levels:
        for row in level.rows:
            delta = row.deltas[1]
            if row.figure.key in FIGURES and delta is not None:
                out[row.figure.key] = delta.mark or "within noise"
    return out


def share(pairs: list[dict[str, str]], figure: str, called: str) -> str:
    """'11/12 (92 %)': the pairs whose mark of ``figure`` is ``called`` (or, for "noise", within noise)."""
    seen = [p[figure] for p in pairs if figure in p]
    if not seen:
        return "n/a"
    hits = sum((m == "within noise") if called == "noise" else (m == called) for m in seen)
    return f"{hits}/{len(seen)} ({100 * hits / len(seen):.0f} %)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--streams", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=1, help="steps to a run (a level's repeats)")
    parser.add_argument("--sigma", type=float, default=0.2, help="the TTFT's lognormal sigma (0: fixed)")
    parser.add_argument("--output", type=int, default=16, help="output tokens a request (10 ms each)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--pin", action="store_true", help="each simulator on CPU 0, ramp on the others")
    args = parser.parse_args()
    t0 = time.monotonic()
    base, shifted = ramp_once(50.0, args), ramp_once(53.0, args)
    bound = [sum(s.client_bound for s in r.steps) for r in (base, shifted)]
    a, b = runs_of(base, args.repeats), runs_of(shifted, args.repeats)
    disjoint = [marks(x[i], x[i + 1]) for x in (a, b) for i in range(0, len(x) - 1, 2)]
    every = [marks(x[i], x[j]) for x in (a, b) for i in range(len(x)) for j in range(i + 1, len(x))]
    shift = [marks(a[i], b[i]) for i in range(min(len(a), len(b)))]
    print(
        f"{args.steps} steps of {args.seconds:g} s (+{args.warmup:g} s warm-up) at {args.streams} streams per "
        f"server, {args.repeats} step(s) to a run; TTFT 50 vs 53 ms (sigma {args.sigma:g}); "
        f"client-bound steps {bound[0]} + {bound[1]} of {2 * args.steps}; {time.monotonic() - t0:.0f} s;"
        f" {'pinned apart' if args.pin else 'not pinned'}"
    )
    print(
        f"{'figure':<14} {'same: noise (disjoint)':>24} {'same: noise (all pairs)':>24} {'shift: worse':>16}"
    )
    for figure in FIGURES:
        moved = share(shift, figure, "worse") if figure in SHIFTED else "-"
        print(
            f"{figure:<14} {share(disjoint, figure, 'noise'):>24} {share(every, figure, 'noise'):>24} {moved:>16}"
        )
    medians = [
        (s.stats.pct("ttft_ms").p95, s.stats.pct("ttft_ms").p50) for r in (base, shifted) for s in r.steps[:1]
    ]
    print(f"first step's TTFT p95/p50: 50-ms server {medians[0]}, 53-ms server {medians[1]}")


if __name__ == "__main__":
    main()
