"""Flags + profile → RunConfig, resolved in one place: precedence, the mode travelling with the levels,
the API reaching the target, and usage errors that say what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadgen.cli.commands import build_parser
from loadgen.cli.flags import RunFlags
from loadgen.cli.resolve import build_config, load_shape, resolve
from loadgen.config import RampPlan
from loadgen.exits import UsageError
from loadgen.run.config import RunConfig

URL = "http://127.0.0.1:8000"
PROFILE = """
name = "p"
[target]
api = "{api}"
model = "{model}"
[[bucket]]
input = 16
output = 16
{ramp}
"""
OPEN_RAMP = '[ramp]\nmode = "open"\nlevels = [2, 4]\nstep_seconds = 7\nwarmup_seconds = 1\n'
CLOSED_RAMP = "[ramp]\nlevels = [1, 8]\nstep_seconds = 9\nwarmup_seconds = 2\nearly_stop = true\n"


def profile(tmp_path: Path, ramp: str = "", api: str = "chat", model: str = "auto") -> str:
    path = tmp_path / "p.toml"
    path.write_text(PROFILE.format(api=api, model=model, ramp=ramp))
    return str(path)


def config(*argv: str) -> RunConfig:
    return build_config(build_parser().parse_args(["run", URL, *argv]), URL)


def test_the_profiles_open_plan_runs_open_loop_at_its_rates(tmp_path: Path) -> None:
    cfg = config("--profile", profile(tmp_path, OPEN_RAMP))
    assert cfg.mode == "open"
    assert cfg.plan == RampPlan(levels=(2.0, 4.0), step_s=7.0, warmup_s=1.0, mode="open")
    assert cfg.rate_rps == 2.0 and cfg.level == 0  # no concurrency cap unless --max-concurrency


def test_the_profiles_closed_plan_and_flag_overrides(tmp_path: Path) -> None:
    cfg = config("--profile", profile(tmp_path, CLOSED_RAMP))
    assert cfg.mode == "closed"
    assert cfg.plan == RampPlan(levels=(1, 8), step_s=9.0, warmup_s=2.0, early_stop=True)
    cfg = config("--profile", profile(tmp_path, CLOSED_RAMP), "--step-seconds", "3", "--warmup", "0.5")
    assert cfg.plan is not None and (cfg.plan.step_s, cfg.plan.warmup_s) == (3.0, 0.5)
    assert cfg.plan.levels == (1, 8)


def test_the_mode_travels_with_the_levels(tmp_path: Path) -> None:
    open_profile = profile(tmp_path, OPEN_RAMP)
    # --steps replaces the levels and brings the flags' mode: closed unless --open-loop
    cfg = config("--profile", open_profile, "--steps", "1,2")
    assert cfg.mode == "closed" and cfg.plan is not None and cfg.plan.mode == "closed"
    cfg = config("--profile", open_profile, "--steps", "1,2", "--open-loop")
    assert cfg.mode == "open" and cfg.plan is not None and cfg.plan.levels == (1.0, 2.0)
    # the profile's step length still applies to levels from the flags
    assert cfg.plan.step_s == 7.0
    # --open-loop on a closed plan: its levels are concurrencies, not rates
    with pytest.raises(UsageError, match="open loop needs --rate"):
        config("--profile", profile(tmp_path, CLOSED_RAMP), "--open-loop")


def test_manual_steering_drops_the_profiles_plan(tmp_path: Path) -> None:
    cfg = config("--profile", profile(tmp_path, CLOSED_RAMP), "--level", "3")
    assert cfg.plan is None and cfg.mode == "closed" and cfg.level == 3
    cfg = config("--profile", profile(tmp_path, OPEN_RAMP), "--rate", "0.5", "--max-concurrency", "4")
    assert cfg.plan is None and cfg.mode == "open" and cfg.rate_rps == 0.5 and cfg.level == 4


def test_api_flag_resolves_into_the_target(tmp_path: Path) -> None:
    chat = profile(tmp_path, api="chat")
    assert config("--profile", chat).target.api == "chat"
    cfg = config("--profile", chat, "--api", "completions")
    assert cfg.target.api == "completions" and cfg.api == "completions"
    assert config("--profile", profile(tmp_path, api="completions")).target.api == "completions"


def test_model_and_target_settings(tmp_path: Path) -> None:
    assert config("--profile", profile(tmp_path)).target.model == ""  # "auto": discovered later
    assert config("--profile", profile(tmp_path, model="m1")).target.model == "m1"
    cfg = config("--profile", profile(tmp_path, model="m1"), "--model", "m2", "--api-key-env", "K")
    assert cfg.target.model == "m2" and cfg.target.api_key_env == "K"


def test_headless_refresh_tags_and_record_path(tmp_path: Path) -> None:
    p = profile(tmp_path)
    assert config("--profile", p).snapshot_hz == 4.0
    assert config("--profile", p, "--headless").snapshot_hz == 1.0
    assert config("--profile", p, "--headless", "--refresh", "2").snapshot_hz == 2.0
    cfg = config("--profile", p, "--tag", "gpu=H200", "--tag", "tp=2", "--out", "x.jsonl")
    assert cfg.tags == (("gpu", "H200"), ("tp", "2")) and cfg.out == "x.jsonl"
    out = config("--profile", p).out
    assert out is not None and out.startswith("runs") and out.endswith("-p.jsonl")


def test_usage_errors_say_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="http:// or https://"):
        resolve(RunFlags(), "127.0.0.1:8000")
    with pytest.raises(UsageError, match="--workers must be at least 1"):
        resolve(RunFlags(profile=profile(tmp_path), workers=0), URL)
    with pytest.raises(UsageError, match="unknown profile 'nope'"):
        resolve(RunFlags(profile="nope"), URL)


def test_flags_defaults_match_the_parser() -> None:
    parsed = RunFlags.from_namespace(build_parser().parse_args(["run", URL]))
    assert parsed == RunFlags()


def test_load_shape_without_a_profile_plan() -> None:
    shape = load_shape(RunFlags(), None)
    assert shape.plan is None and shape.mode == "closed" and shape.level == 1 and shape.rate_rps == 1.0
    shape = load_shape(RunFlags(steps=(4.0, 8.0)), None)
    assert shape.plan == RampPlan(levels=(4.0, 8.0), step_s=30.0, warmup_s=5.0)


def test_closed_loop_levels_must_be_whole_concurrencies(tmp_path: Path) -> None:
    # int(0.5) = 0 users would run nothing: say so instead
    with pytest.raises(UsageError, match=r"concurrencies.*0\.5.*--open-loop"):
        config("--profile", profile(tmp_path), "--steps", "0.5,1")
    assert config("--profile", profile(tmp_path), "--steps", "0.5,1", "--open-loop").mode == "open"
    assert config("--profile", profile(tmp_path), "--steps", "1,2.0").plan is not None
