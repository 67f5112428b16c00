"""One warm-up for every step (issue 19, defect 1): a step started from the keyboard (a level, auto-ramp,
``n``) warms up as long as a planned one, 5 s unless ``--warmup`` or the profile's ``warmup_seconds`` say
otherwise — never a second setting that defaults to none."""

from __future__ import annotations

from pathlib import Path

from loadgen.cli.commands import build_parser
from loadgen.cli.resolve import build_config
from loadgen.run.config import RunConfig
from loadgen.run.state import Load

URL = "http://127.0.0.1:8000"
RAMPED = "name = 'p'\n[[bucket]]\ninput = 16\noutput = 16\n[ramp]\nlevels = [4]\nstep_seconds = 9\nwarmup_seconds = 2\n"


def config(*argv: str) -> RunConfig:
    return build_config(build_parser().parse_args(["run", URL, *argv]), URL)


def key_driven(cfg: RunConfig) -> float:
    """The warm-up of a step a key starts: the key leaves the plan (``Wheel.manual``)."""
    load = Load.of(cfg)
    load.plan = None
    return load.warmup_s()


def test_a_manual_run_warms_each_step_up_for_the_default_5_s() -> None:
    cfg = config("--level", "8")
    assert cfg.plan is None and cfg.warmup_s == 5.0
    assert key_driven(cfg) == 5.0


def test_a_key_after_a_plan_warms_up_as_the_plan_did(tmp_path: Path) -> None:
    profile = tmp_path / "p.toml"
    profile.write_text(RAMPED)
    cfg = config("--profile", str(profile))
    assert cfg.plan is not None and cfg.plan.warmup_s == 2.0
    assert (cfg.warmup_s, key_driven(cfg)) == (2.0, 2.0)
    flagged = config("--profile", str(profile), "--warmup", "0.5")
    assert key_driven(flagged) == 0.5
    steps = config("--steps", "2,4")
    assert steps.plan is not None and (steps.plan.warmup_s, key_driven(steps)) == (5.0, 5.0)
