"""How much a key's cut moves a step's figures (issue 32): a level run alone (a plan's only step, closed under
its own load) against the same level set by a key and cut by the next key, going down (16 -> 8) and up
(8 -> 16), on the steep simulator of the tests (2 ms + 1 ms per running sequence a decode step), in its own
process. Prints, per pair, each figure alone, as the keyed step reads it (all its requests) and as its
requests done before the key read it (``before_key``), with the carried share. docs/numbers.md quotes it.

    python scripts/key_cut_bias.py --repeats 3
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from loadgen.config import RampPlan
from loadgen.profile import parse_profile
from loadgen.run.config import RunConfig
from loadgen.run.engine import Engine
from loadgen.sim import build_config, spawn_sim_process
from loadgen.sim.params import StepCost
from loadgen.snapshot import Snapshot, StepSummary
from loadgen.types import Target

PROFILE = """
name = "keyed"
[[bucket]]
input = 24
output = { min = 20, max = 60 }
[sampling]
ignore_eos = true
[slo]
decode_p50_tok_s = 5
"""
STEEP = StepCost(2.0, 1.0, 0.0, ((0, 2.0), (128, 4.0)), spec_draft_ms=0.5)
WINDOW_S, WARMUP_S = 6.0, 1.0
FIGURES: tuple[tuple[str, str, str], ...] = (
    ("TTFT p50", "ttft_ms", "p50"),
    ("ITL p50", "itl_ms", "p50"),
    ("e2e p50", "e2e_ms", "p50"),
    ("e2e p95", "e2e_ms", "p95"),
)


def config(url: str, out: Path, plan: RampPlan | None, level: int, seed: int) -> RunConfig:
    return RunConfig(
        Target(url),
        parse_profile(PROFILE, source="<keyed>"),
        plan=plan,
        level=level,
        out=str(out),
        telemetry=False,
        seed=seed,
        after_plan="idle" if plan is None else "finish",
        warmup_s=WARMUP_S,
    )


def alone(url: str, tmp: Path, level: int, seed: int) -> StepSummary:
    plan = RampPlan((float(level),), step_s=WARMUP_S + WINDOW_S, warmup_s=WARMUP_S)
    engine = Engine(config(url, tmp / f"alone-{level}-{seed}.jsonl", plan, level, seed))
    engine.start()
    outcome = engine.wait(120)
    assert outcome is not None and len(outcome.steps) == 1, outcome
    return outcome.steps[0]


def keyed(url: str, tmp: Path, level: int, then: int, seed: int) -> StepSummary:
    """`l level`, its window, `l then` (the cut), then a stop once the next step measured 2 s."""
    latest: list[Snapshot] = []
    engine = Engine(
        config(url, tmp / f"keys-{level}-{then}-{seed}.jsonl", None, 1, seed), on_snapshot=latest.append
    )
    engine.start()

    def until(pred: object, timeout: float = 60.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if latest and pred(latest[-1]):  # type: ignore[operator]
                return
            time.sleep(0.02)
        raise TimeoutError("no such snapshot")

    until(lambda s: s.phase == "measure" and s.step_elapsed_s >= 2.5)
    engine.set_level(level)
    until(lambda s: s.level == level and s.phase == "measure" and s.step_elapsed_s >= WARMUP_S + WINDOW_S)
    engine.set_level(then)
    until(lambda s: s.level == then and s.phase == "measure" and s.step_elapsed_s >= WARMUP_S + 2.0)
    engine.stop(cancel=False)
    outcome = engine.wait(60)
    assert outcome is not None
    (step,) = [s for s in outcome.steps if s.level == level and s.ended_by == "level"]
    return step


def show(label: str, a: StepSummary, b: StepSummary) -> None:
    print(
        f"{label}: carried {b.carried_share:.1%}, ok alone {a.stats.ok} keyed {b.stats.ok} "
        f"before key {b.before_key.get('ok')}, agrees {b.before_key.get('agrees')}, clean {b.clean}"
    )
    out_a, out_b = a.stats.out_tok_s or 0.0, b.stats.out_tok_s or 0.0
    print(f"  out tok/s: alone {out_a:.0f}, keyed {out_b:.0f} ({(out_b - out_a) / out_a:+.1%})")
    for name, metric, point in FIGURES:
        va, vb = getattr(a.stats.pct(metric), point), getattr(b.stats.pct(metric), point)
        vc = b.before_key.get(f"{metric}_{point}")
        c = f"{float(str(vc)):.1f} ({(float(str(vc)) - va) / va:+.1%})" if vc is not None else "n/a"
        print(f"  {name}: alone {va:.1f}, keyed {vb:.1f} ({(vb - va) / va:+.1%}), before key {c}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    sim = spawn_sim_process(
        build_config("tiny-cpu", seed=4, max_num_seqs=256, cost=STEEP, kv_capacity_tokens=1 << 22)
    )
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(args.repeats):
                for level, then in ((16, 8), (8, 16)):
                    seed = 21 + r
                    show(
                        f"{level} -> {then} (repeat {r + 1})",
                        alone(sim.url, Path(tmp), level, seed),
                        keyed(sim.url, Path(tmp), level, then, seed),
                    )
    finally:
        sim.stop()


if __name__ == "__main__":
    main()
