"""How often the step line's diagnosis names the right limit: a confusion matrix over the simulator's
scenarios (``loadgen.sim.scenarios``).

Run: ``python benchmarks/bench_diagnosis.py [--seeds 3] [--levels 1,2,4,8,16,32] [--step-s 5]
[--scenarios none,queue,kv,decode,prefill,network]``. Prints a table; asserts nothing.

Each scenario × seed is one ramp over ``--levels`` against the simulator made to stop for that scenario's
reason. A step's expected kind is ``none`` below the scenario's limit level and the scenario's kind at and
past it. Two readings per step: ``said``, the kind its record line says, and ``free``, the kind its figures
name once the client-bound flag is taken away (what a client on a machine of its own would have been told:
on a shared machine ramp flags many steps client-bound and says ``client``, rightly). Confident wrong =
a step whose said kind is neither the expected one, nor ``unknown``, nor ``client`` on a client-bound step.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import tempfile
import time
from pathlib import Path

from loadgen.analysis.diagnosis import KINDS, StepFigures, diagnose
from loadgen.config import RampPlan
from loadgen.profile import parse_profile
from loadgen.run.config import RunConfig
from loadgen.run.engine import Engine
from loadgen.sim import build_config, run_sim_in_thread
from loadgen.sim.scenarios import BASE_PRESET, scenario_overrides, scenarios
from loadgen.snapshot import StepSummary
from loadgen.types import Target

PROFILE = """
name = "diagnosis"
[[bucket]]
input = {input}
output = {output}
[sampling]
ignore_eos = true
"""


def ramp(name: str, seed: int, levels: tuple[int, ...], step_s: float, out: Path) -> list[StepSummary]:
    scenario = scenarios()[name]
    handle = run_sim_in_thread(build_config(BASE_PRESET, seed=seed, **scenario_overrides(name)))
    try:
        text = PROFILE.format(input=scenario.input_tokens, output=scenario.output_tokens)
        config = RunConfig(
            target=Target(url=handle.url),
            profile=parse_profile(text, source="<diagnosis>"),
            plan=RampPlan(levels, step_s=step_s, warmup_s=0.3),
            out=str(out),
            seed=seed,
        )
        engine = Engine(config)
        engine.start()
        outcome = engine.wait(600)
        if outcome is None or outcome.state != "finished":
            print(f"{name} seed {seed}: the run ended {outcome.state if outcome else 'without an outcome'}")
        return list(outcome.steps) if outcome is not None else []
    finally:
        handle.stop()


def free_kind(steps: list[StepSummary], at: int) -> str:
    before = [StepFigures.of(s) for s in steps[:at]]
    now = dataclasses.replace(StepFigures.of(steps[at]), client_bound=False)
    return str(diagnose(now, before)["kind"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--levels", default="1,2,4,8,16,32")
    parser.add_argument("--step-s", type=float, default=5.0)
    parser.add_argument("--scenarios", default=",".join(scenarios()))
    args = parser.parse_args()
    levels = tuple(int(x) for x in args.levels.split(","))
    said: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    free: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    bound = total = wrong = 0
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.scenarios.split(","):
            scenario = scenarios()[name]
            for seed in range(args.seeds):
                steps = ramp(name, seed + 1, levels, args.step_s, Path(tmp) / f"{name}-{seed}.jsonl")
                for at, step in enumerate(steps):
                    want = scenario.kind if step.level >= scenario.limit_level else "none"
                    row = f"{name:8} {want}"
                    kind = str(step.diagnosis.get("kind", "-"))
                    said[row][kind] += 1
                    free[row][free_kind(steps, at)] += 1
                    total += 1
                    bound += step.client_bound
                    if kind not in (want, "unknown") and not (kind == "client" and step.client_bound):
                        wrong += 1
                    if kind != want:  # each step read otherwise, with what it stood on
                        print(
                            f"{name} seed {seed + 1} level {step.level}: said {kind} "
                            f"({step.diagnosis.get('confidence')}), free {free_kind(steps, at)}, expected {want}: "
                            + "; ".join(str(e) for e in step.diagnosis.get("evidence", []) or [])[:400]
                        )
    cols = [k for k in KINDS if any(c[k] for c in (*said.values(), *free.values()))]
    print(
        f"{total} steps, {bound} flagged client-bound, {wrong} confident wrong; {time.monotonic() - started:.0f} s"
    )
    for title, table in (("said (the record line)", said), ("free (client-bound flag taken away)", free)):
        print(f"\n{title}\n{'scenario expected':26}" + "".join(f"{k:>14}" for k in cols) + f"{'right':>8}")
        for row, counts in table.items():
            n = sum(counts.values())
            right = counts[row.split()[-1]]
            print(f"{row:26}" + "".join(f"{counts[k]:>14}" for k in cols) + f"{right:>5}/{n}")


if __name__ == "__main__":
    main()
