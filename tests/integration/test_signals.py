"""SIGINT, SIGTERM and SIGHUP (an SSH session that drops) stop ``ramp run … --headless`` the way Ctrl-C does:
the finished steps and an end event naming the signal are in the record, the exit code is 128 + the signal
(130, 143, 129) and never claims the SLO, and no ramp process survives.

Each case runs the real command in a subprocess (a process group of its own) against the simulator in
another (port 0, 127.0.0.1) and sends the signal once the first step is in the record (the record file is
polled, with a deadline): to the main process alone (``kill PID``), or to the whole group (what ``timeout``
and a terminal hang-up do).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from proc_watch import (
    alive,
    cold_start_pid,
    describe,
    group_members,
    kill_group,
    record_has_step,
    start_ramp,
    wait_for,
)
from tui_fakes import STEPS

from loadgen.cli.headless import finish, wait_with_progress
from loadgen.record import Record, read_record
from loadgen.run.config import RunOutcome
from loadgen.run.signals import Interrupted, StopSignals, exit_code, interrupted_by
from loadgen.sim import SimHandle
from loadgen.snapshot import Snapshot

pytestmark = [
    pytest.mark.sim("fast", seed=5, process=True),
    pytest.mark.timeout(120),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX signals, reads /proc"),
]

PROFILE = """
name = "signals"
[[bucket]]
input = 16
output = 16
[sampling]
ignore_eos = true
"""
NAMES = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}


def _args(sim: SimHandle, tmp_path: Path, *load: str) -> tuple[list[str], Path]:
    profile = tmp_path / "signals.toml"
    profile.write_text(PROFILE)
    out = tmp_path / "run.jsonl"
    return [
        "run",
        sim.url,
        "--headless",
        "--profile",
        str(profile),
        *load,
        "--no-metrics",
        "--out",
        str(out),
    ], out


def _signal_and_finish(
    proc_args: list[str], sig: int, to_group: bool, ready: Callable[[], object]
) -> tuple[int, str, str]:
    """Start ramp, wait for ``ready()``, send ``sig``; (exit code, stdout, stderr) once every process ramp
    had is gone (the resource tracker goes once its last holder has)."""
    proc = start_ramp(proc_args)
    try:
        wait_for(lambda: ready() or proc.poll() is not None, 60, "the run to be ready for the signal")
        assert proc.poll() is None, "the run ended before the signal: " + proc.communicate()[1][-3000:]
        members = group_members(proc.pid)
        if to_group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
        try:
            wait_for(lambda: not (members & group_members(proc.pid)), 3.0, "ramp's processes to go")
        except AssertionError:
            raise AssertionError("survived: " + describe(members & group_members(proc.pid))) from None
        return proc.returncode, out, err
    finally:
        kill_group(proc)


def _stopped_by(record: Record, sig: int) -> None:
    name = signal.Signals(sig).name
    assert not record.truncated
    end = record.events[-1]
    assert end["kind"] == "end" and end["state"] == "stopped", end
    assert end["steps"] == len(record.steps)
    assert name in end["message"], end
    assert any(e["kind"] == "mark" and name in e["note"] for e in record.events), record.events


CASES = [
    pytest.param(signal.SIGINT, False, id="SIGINT"),
    pytest.param(signal.SIGTERM, False, id="SIGTERM"),
    pytest.param(signal.SIGHUP, False, id="SIGHUP"),
    pytest.param(signal.SIGTERM, True, id="SIGTERM-group"),  # `timeout 40 ramp run …`
    pytest.param(signal.SIGHUP, True, id="SIGHUP-group"),  # the SSH session drops
]


@pytest.mark.parametrize(("sig", "to_group"), CASES)
def test_a_signal_stops_the_run_like_ctrl_c(sim: SimHandle, tmp_path: Path, sig: int, to_group: bool) -> None:
    args, out = _args(sim, tmp_path, "--steps", "1,2,4,8", "--step-seconds", "1.2", "--warmup", "0")
    code, stdout, stderr = _signal_and_finish(args, sig, to_group, lambda: record_has_step(out))
    assert code == 128 + sig, stderr[-3000:]
    assert "Traceback" not in stderr, stderr
    assert f"stopping ({NAMES[sig]})" in stderr, stderr
    record = read_record(out)
    assert len(record.steps) >= 1 and record.steps[0]["level"] == 1 and record.steps[0]["ended_by"] == "plan"
    assert all(s["ended_by"] in ("plan", "stop") for s in record.steps)
    _stopped_by(record, sig)
    assert f"record: {out}" in stdout


def test_sigterm_during_an_open_loop_run_keeps_its_only_step(sim: SimHandle, tmp_path: Path) -> None:
    """`timeout 40 ramp run URL --headless --rate 5 …` used to leave a header-only record."""
    args, out = _args(sim, tmp_path, "--open-loop", "--rate", "5", "--warmup", "0")
    started = time.monotonic_ns()

    def loaded() -> bool:  # this run's requests have reached the server for 1.5 s: a step long enough to keep
        arrivals = [r["arrival_ns"] for r in sim.ground_truth() if r["arrival_ns"] > started]
        return bool(arrivals) and max(arrivals) - min(arrivals) > 1_500_000_000

    code, _, stderr = _signal_and_finish(args, signal.SIGTERM, True, loaded)
    assert code == 143, stderr[-3000:]
    record = read_record(out)
    (step,) = record.steps
    assert step["ended_by"] == "stop" and step["ok"] > 0 and step["mode"] == "open"
    _stopped_by(record, signal.SIGTERM)


def test_a_step_cut_by_a_signal_is_never_the_best(sim: SimHandle, tmp_path: Path) -> None:
    """The cut step (8 streams) outdoes the finished one (1 stream): it must still not be the best."""
    args, out = _args(sim, tmp_path, "--steps", "1,8", "--step-seconds", "4", "--warmup", "0")
    seen: list[int] = []

    def into_second_step() -> bool:  # the second step has run 1.5 s: long enough to be kept as a step
        if not seen:
            if record_has_step(out):
                seen.append(time.monotonic_ns())
            return False
        return any(r["arrival_ns"] > seen[0] + 1_500_000_000 for r in sim.ground_truth())

    code, _, stderr = _signal_and_finish(args, signal.SIGTERM, False, into_second_step)
    assert code == 143, stderr[-3000:]
    record = read_record(out)
    assert [s["ended_by"] for s in record.steps] == ["plan", "stop"]
    _stopped_by(record, signal.SIGTERM)
    first, cut = record.steps
    assert cut["out_tok_s"] > first["out_tok_s"]
    assert record.events[-1]["best_step"] == 1


# ---- ramp launch ---------------------------------------------------------------------------------

FAKES = Path(__file__).resolve().parents[1] / "vllm" / "fake_pkgs"
LAUNCH_PROFILE = """
name = "signals-launch"
[target]
api = "chat"
model = "auto"
[[bucket]]
input = 32
output = 8
[sampling]
ignore_eos = true
"""


def _launch(tmp_path: Path, *extra: str) -> tuple[list[str], Path]:
    profile = tmp_path / "p.toml"
    profile.write_text(LAUNCH_PROFILE)
    out = tmp_path / "run.jsonl"
    args = ["launch", "vllm", "fake/tiny", "--python", sys.executable, "--headless", "--profile", str(profile),
            "--no-metrics", "--out", str(out), *extra]  # fmt: skip
    return args, out


def _fake_env(**extra: object) -> dict[str, str]:
    env = {"PYTHONPATH": os.pathsep.join([str(FAKES), str(Path(__file__).resolve().parents[2])])}
    return env | {k: str(v) for k, v in extra.items()}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_stops_a_launched_run_and_its_server(tmp_path: Path, sig: int) -> None:
    args, out = _launch(tmp_path, "--steps", "1,2,4,8", "--step-seconds", "1.2", "--warmup", "0")
    proc = start_ramp(args, env=_fake_env(FAKE_MODE="sim"), cwd=tmp_path)
    try:
        wait_for(lambda: record_has_step(out) or proc.poll() is not None, 90, "the first step")
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        server = cold_start_pid(out)
        assert server is not None
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 128 + sig, err[-3000:]
        assert "Traceback" not in err and "stopped the vllm server" in err, err
        record = read_record(out)
        assert record.steps and record.steps[0]["ended_by"] == "plan"
        _stopped_by(record, sig)
        wait_for(lambda: not alive(server), 3.0, "the server to be gone")
    finally:
        kill_group(proc)


def test_sighup_while_the_server_starts_stops_it(tmp_path: Path) -> None:
    pid_file = tmp_path / "server.pid"
    args, _ = _launch(tmp_path)
    proc = start_ramp(args, env=_fake_env(FAKE_DELAY_S=3600, FAKE_PID_FILE=pid_file), cwd=tmp_path)
    try:
        server = int(wait_for(lambda: pid_file.exists() and pid_file.read_text(), 30, "the server"))
        proc.send_signal(signal.SIGHUP)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 129, err[-3000:]
        assert "interrupted while the server was starting" in err
        wait_for(lambda: not alive(server), 10, "the server to be gone")
    finally:
        kill_group(proc)


# ---- the pieces, in this process -------------------------------------------------------------------


def test_stop_signals_call_back_once_and_restore_the_handlers() -> None:
    seen: list[int] = []
    before = signal.getsignal(signal.SIGTERM)
    with StopSignals(seen.append) as stops:
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGHUP)  # a repeat: noted, not acted on
        wait_for(lambda: stops.received == 2, 5, "both signals")
    assert seen == [signal.SIGTERM] and stops.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before


def test_raising_stop_signals_raise_once_and_hear_what_an_inner_one_handled() -> None:
    with pytest.raises(Interrupted) as caught, StopSignals(raising=True):
        os.kill(os.getpid(), signal.SIGHUP)
        wait_for(lambda: False, 5, "the signal")
    assert interrupted_by(caught.value) == signal.SIGHUP and exit_code(signal.SIGHUP) == 129
    with StopSignals(raising=True) as outer:
        with StopSignals() as inner:
            os.kill(os.getpid(), signal.SIGTERM)
            wait_for(lambda: inner.signum is not None, 5, "the signal")
        os.kill(os.getpid(), signal.SIGINT)  # after the inner run: a repeat, not raised
        wait_for(lambda: outer.received == 2, 5, "the second signal")
    assert outer.signum == signal.SIGTERM
    assert interrupted_by(KeyboardInterrupt()) == signal.SIGINT


class StoppableEngine:
    """Runs until interrupted, then ends with the outcome the real engine gives."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def wait(self, timeout: float | None = None) -> RunOutcome | None:
        if self.signum is None:
            time.sleep(min(timeout or 0.0, 0.05))
            return None
        return RunOutcome(
            "stopped", STEPS, 1, "runs/x.jsonl", f"stopped by {self.signum}", signum=self.signum
        )

    def latest(self) -> Snapshot | None:
        return None

    def stop(self, cancel: bool = True) -> None:
        raise AssertionError("a signal interrupts, it does not stop")

    def interrupt(self, signum: int) -> None:
        self.signum = signum


def test_a_stopped_run_exits_with_the_signal_whatever_its_best_step(
    capsys: pytest.CaptureFixture[str],
) -> None:
    engine = StoppableEngine()
    with StopSignals(engine.interrupt) as stops:
        os.kill(os.getpid(), signal.SIGTERM)
        outcome = wait_with_progress(engine, stops)
    assert outcome is not None and outcome.signum == signal.SIGTERM and outcome.best_step == 1
    assert "ramp: stopping (SIGTERM): finished steps are in the record" in capsys.readouterr().err
    assert finish(outcome) == 143
