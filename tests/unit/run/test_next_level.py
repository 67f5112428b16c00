"""Where ``n`` and the auto-ramp go (issue 21, item 3): after a manual change, the plan's next level above
the current load (17 -> 32, not 34); at the plan's end, nowhere; without a plan, doubling up to a ceiling,
and the auto-ramp stops at the first step that missed the SLO."""

from __future__ import annotations

from loadgen.cli.commands import build_parser
from loadgen.cli.resolve import build_config
from loadgen.run.config import RunConfig
from loadgen.run.state import Load
from loadgen.run.wheel import AUTO_CEILING, Wheel, next_load
from loadgen.snapshot import SLOVerdict

URL = "http://127.0.0.1:8000"


def config(*argv: str) -> RunConfig:
    return build_config(build_parser().parse_args(["run", URL, *argv]), URL)


def after_manual(cfg: RunConfig, level: int) -> Load:
    """The load after a key set ``level`` (``Wheel.manual`` leaves the plan)."""
    load = Load.of(cfg)
    load.level, load.plan = level, None
    return load


def test_n_after_a_manual_change_goes_to_the_plans_next_level_above() -> None:
    cfg = config("--steps", "8,16,32,64")
    assert next_load(after_manual(cfg, 17), cfg.plan) == (2, 32)
    assert next_load(after_manual(cfg, 16), cfg.plan) == (2, 32)  # strictly above
    assert next_load(after_manual(cfg, 3), cfg.plan) == (0, 8)
    assert next_load(after_manual(cfg, 64), cfg.plan) is None  # nothing above: no doubling to 128
    assert next_load(after_manual(cfg, 100), cfg.plan) is None


def test_n_in_the_plan_takes_its_next_position_and_stops_at_its_end() -> None:
    cfg = config("--steps", "8,16,32")
    load = Load.of(cfg)
    assert next_load(load, cfg.plan) == (1, 16)
    load.plan_index = 2
    assert next_load(load, cfg.plan) is None


def test_without_a_plan_the_level_doubles_up_to_the_ceiling() -> None:
    cfg = config("--level", "17")
    assert cfg.plan is None
    assert next_load(after_manual(cfg, 17), None) == (None, 34)
    assert next_load(after_manual(cfg, 0), None) == (None, 1)
    assert next_load(after_manual(cfg, 700), None) == (None, AUTO_CEILING)
    assert next_load(after_manual(cfg, AUTO_CEILING), None) is None


def test_the_auto_ramp_without_a_plan_stops_at_the_first_step_that_missed_the_slo() -> None:
    missed = SLOVerdict(False, ("ttft p95 900 ms > 500 ms",))
    met = SLOVerdict(True)
    assert Wheel.ceiling_reached_by(missed, planned=False)
    assert not Wheel.ceiling_reached_by(met, planned=False)
    assert not Wheel.ceiling_reached_by(missed, planned=True)  # a plan's early stop is the plan's own
    assert not Wheel.ceiling_reached_by(SLOVerdict(None), planned=False)  # no SLO: only the ceiling


def test_a_key_asking_for_the_load_already_running_changes_nothing() -> None:
    """`l⏎` on the level shown cut a step for nothing; by hand, no plan or auto-ramp to take over from."""
    from loadgen.run.wheel import unchanged

    load = after_manual(config("--level", "17"), 17)
    load.auto = False
    assert unchanged(load, 17, None)
    assert not unchanged(load, 18, None)
    load.auto = True  # the key takes the wheel from the auto-ramp: that is a change
    assert not unchanged(load, 17, None)
    planned = Load.of(config("--steps", "8,16"))
    assert not unchanged(planned, 8, None)
