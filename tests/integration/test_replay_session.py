"""Sessions become scripts (issue 32): a console session steered by hand (levels changed mid-step, as the
keys do, through the engine's API) is recorded against one simulator, then ``ramp run URL
--replay-session RECORD --headless`` runs it against a second simulator: the same levels in the same
order, each step as long (within 1 s) with its warm-up, the exit code the SLO gate says, and the new
record naming the session it replays."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from snapshot_watch import Watch

from loadgen.cli.commands import build_parser, main
from loadgen.cli.resolve import build_config
from loadgen.record import read_record, step_from_line
from loadgen.run.engine import Engine
from loadgen.sim import SimHandle, run_sim_in_thread
from loadgen.sim import build_config as sim_config
from loadgen.sim.params import StepCost
from loadgen.snapshot import StepSummary

PROFILE = """
name = "session"
[[bucket]]
input = 64
output = {{ min = 8, max = 24 }}
[sampling]
ignore_eos = true
[slo]
ttft_p95_ms = {ttft}
"""
WARMUP_S = 0.5
# (level, seconds its window measures before the next key): up, up, down; the last one a stop ends
SESSION = ((2, 2.0), (5, 3.0), (1, 2.0))

pytestmark = pytest.mark.sim("tiny-cpu", seed=7)  # the conftest's module-scoped simulator: the session's


@pytest.fixture(scope="module")
def second_sim() -> Iterator[SimHandle]:
    """The server the session is replayed against (another simulator, on another port)."""
    handle = run_sim_in_thread(sim_config("tiny-cpu", seed=11))
    yield handle
    handle.stop()


@pytest.fixture(scope="module")
def slow_sim() -> Iterator[SimHandle]:
    """A server that takes 1.5 s to prefill a prompt of 64 tokens: its TTFT misses a 1-s limit."""
    slow = StepCost(2.0, 1.0, 0.0, ((0, 2.0), (64, 1500.0), (1024, 20000.0)))
    handle = run_sim_in_thread(sim_config("tiny-cpu", seed=13, cost=slow))
    yield handle
    handle.stop()


@pytest.fixture(scope="module")
def session(sim: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The recorded console session (its record, its profile): steered level by level, then stopped."""
    folder = tmp_path_factory.mktemp("session")
    profile = folder / "session.toml"
    profile.write_text(PROFILE.format(ttft=60_000))
    out = folder / "session.jsonl"
    argv = ["run", sim.url, "--profile", str(profile), "--out", str(out), "--no-metrics"]
    argv += ["--level", str(SESSION[0][0]), "--warmup", str(WARMUP_S), "--seed", "3"]
    config = build_config(build_parser().parse_args(argv), sim.url)
    assert config.plan is None  # the console's manual steering: no step ends but by a key
    watch = Watch()
    engine = Engine(config, on_snapshot=watch)
    engine.start()
    try:
        for at, (level, seconds) in enumerate(SESSION):
            watch.until(
                lambda s, n=level: s.level == n and s.phase == "measure", 30, f"level {level} measures"
            )
            watch.until(lambda s, t=WARMUP_S + seconds: s.step_elapsed_s >= t, 30, f"level {level}'s window")
            if at + 1 < len(SESSION):
                engine.set_level(SESSION[at + 1][0])  # what `l N` sends
        engine.stop(cancel=False)
        assert engine.wait(60) is not None
    finally:
        engine.stop()
        engine.wait(30)
    return out, profile


def recorded(path: Path) -> list[StepSummary]:
    return [step_from_line(line) for line in read_record(str(path)).steps]


def test_the_session_record_holds_each_key_and_level_change(session: tuple[Path, Path]) -> None:
    record = read_record(str(session[0]))
    steps = recorded(session[0])
    assert [s.level for s in steps] == [level for level, _ in SESSION]
    assert [s.ended_by for s in steps] == ["level", "level", "stop"]
    commands = [e for e in record.events if e["kind"] == "command"]
    assert [(e["command"], e.get("level")) for e in commands] == [
        ("set_level", 5),
        ("set_level", 1),
        ("stop", None),
    ]
    # the load asked for after each command, on the run's clock, in the order they came
    assert [e["load"]["level"] for e in commands[:2]] == [5, 1]
    assert commands[0]["elapsed_s"] < commands[1]["elapsed_s"] < commands[2]["elapsed_s"]


def test_a_replay_visits_the_same_levels_for_as_long_and_passes_the_gate(
    session: tuple[Path, Path], second_sim: SimHandle, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    original_path, profile = session
    before = original_path.read_bytes()
    out = tmp_path / "replay.jsonl"
    argv = ["run", second_sim.url, "--replay-session", str(original_path), "--headless"]
    code = main([*argv, "--profile", str(profile), "--out", str(out), "--no-metrics"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "SLO from the record: ttft_p95_ms 60000" in err
    assert "met the SLO at each of the 3 steps where the original met it" in err
    original, replayed = recorded(original_path), recorded(out)
    assert [s.level for s in replayed] == [s.level for s in original]
    for old, new in zip(original, replayed, strict=True):
        assert new.warmup_s == pytest.approx(old.warmup_s, abs=0.05)
        assert abs(new.duration_s - old.duration_s) <= 1.0, (old.duration_s, new.duration_s)
        assert abs(new.window_s - old.window_s) <= 1.0, (old.window_s, new.window_s)
        assert new.ended_by == "plan" and new.verdict.met is True
    header = read_record(str(out)).header
    assert header["replay_of"]["record"] == os.path.abspath(original_path)
    assert header["replay_of"]["steps"] == 3
    assert header["plan"]["levels"] == [2.0, 5.0, 1.0]
    assert header["seed"] == 3 and header["seed_source"] == "given"  # the session's prompts again
    assert original_path.read_bytes() == before  # the session's record is read, never written


def test_a_replay_that_misses_where_the_original_met_exits_1(
    session: tuple[Path, Path], slow_sim: SimHandle, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Judged by the profile's SLO (``--replay-slo profile``: TTFT p95 under 1 s), the original's steps are
    judged again under it and meet it; a server that takes 1.5 s to prefill each prompt misses it at each
    step: the gate fails (1) and names them."""
    original_path, _ = session
    profile = tmp_path / "one-second.toml"
    profile.write_text(PROFILE.format(ttft=1000))
    out = tmp_path / "slow.jsonl"
    argv = ["run", slow_sim.url, "--replay-session", str(original_path), "--headless", "--no-metrics"]
    code = main([*argv, "--profile", str(profile), "--replay-slo", "profile", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "SLO from the profile: ttft_p95_ms 1000" in err
    assert "missed the SLO at step 1, 2, 3 of 3, where the original met it" in err
    replayed = recorded(out)
    assert [s.level for s in replayed] == [level for level, _ in SESSION]
    assert all(s.verdict.met is not True for s in replayed)
