"""No load is left behind: whatever kills ramp's main process, its load workers (and multiprocessing's
resource tracker) die with it within 3 s, no request reaches the server afterwards, and a server that
``ramp launch`` started goes down too.

The real ``ramp run … --headless`` runs in a subprocess (a process group of its own, so that cleanup can
take it all) against the simulator in another (``spawn_sim_process``, port 0 on 127.0.0.1). The simulator's
ground truth stamps each request's arrival on the same monotonic clock as this process: no request may
arrive after every ramp process was seen gone.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from proc_watch import (
    alive,
    cmdline,
    cold_start_pid,
    describe,
    group_members,
    kill_group,
    start_ramp,
    wait_for,
)

from loadgen.sim import SimHandle, build_config, spawn_sim_process

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

GONE_WITHIN_S = 3.0
PROFILE = """
name = "orphans"
[[bucket]]
input = 16
output = 64
[sampling]
ignore_eos = true
"""


@pytest.fixture
def sim() -> Iterator[SimHandle]:
    handle = spawn_sim_process(build_config("fast", seed=3))
    yield handle
    handle.stop()


def _profile(tmp_path: Path) -> str:
    path = tmp_path / "orphans.toml"
    path.write_text(PROFILE)
    return str(path)


def _with_workers(pgid: int, n: int) -> set[int] | None:
    """ramp's process group once ``n`` load workers are in it (multiprocessing spawn children)."""
    members = group_members(pgid)
    workers = [pid for pid in members if "spawn_main" in cmdline(pid)]
    return members if len(workers) >= n else None


def _quiet_server(sim: SimHandle, timeout: float) -> None:
    """Until the simulator has nothing running or waiting (the cut streams ended on its side too)."""

    def quiet() -> bool:
        info = sim.info()
        return info["running"] == 0 and info["waiting"] == 0

    wait_for(quiet, timeout, "the simulator to have no request running or waiting", every=0.1)


@pytest.mark.parametrize("pdeathsig", ["on", "off"])
def test_kill_9_of_ramp_leaves_no_load_behind(sim: SimHandle, tmp_path: Path, pdeathsig: str) -> None:
    """``off``: the kernel's parent-death signal is not asked for, so the portable fallback (the worker
    watching its parent's liveness) must stop the load on its own."""
    out = tmp_path / "run.jsonl"
    args = ["run", sim.url, "--headless", "--profile", _profile(tmp_path), "--steps", "4,8",
            "--step-seconds", "120", "--warmup", "0", "--workers", "2", "--no-metrics", "--out", str(out)]  # fmt: skip
    proc = start_ramp(args, env={"RAMP_PDEATHSIG": "1" if pdeathsig == "on" else "0"})
    try:
        # Loaded: requests have ended at the server, and both workers are up (main + 2 workers + tracker).
        wait_for(lambda: len(sim.ground_truth()) >= 20, 60, "requests to reach the simulator", every=0.1)
        members = wait_for(lambda: _with_workers(proc.pid, 2), 30, "both workers")
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        proc.send_signal(signal.SIGKILL)  # the main process alone: no handler runs
        killed_ns = time.monotonic_ns()
        proc.wait(timeout=10)
        try:
            wait_for(lambda: not any(alive(pid) for pid in members), GONE_WITHIN_S, "ramp's processes to go")
        except AssertionError:
            raise AssertionError(
                "still alive after kill -9: " + describe({p for p in members if alive(p)})
            ) from None
        gone_ns = time.monotonic_ns()
        assert not group_members(proc.pid), describe(group_members(proc.pid))
        _quiet_server(sim, 10)
        late = [r for r in sim.ground_truth() if r["arrival_ns"] > gone_ns]
        assert not late, f"{len(late)} requests reached the server after ramp was gone"
        assert (gone_ns - killed_ns) / 1e9 < GONE_WITHIN_S
    finally:
        kill_group(proc)


LAUNCH_PROFILE = """
name = "orphans-launch"
[target]
api = "chat"
model = "auto"
[[bucket]]
input = 32
output = 64
[sampling]
ignore_eos = true
"""
FAKES = Path(__file__).resolve().parents[1] / "vllm" / "fake_pkgs"


def test_kill_9_of_ramp_launch_takes_workers_and_server_down(tmp_path: Path) -> None:
    profile = tmp_path / "p.toml"
    profile.write_text(LAUNCH_PROFILE)
    out = tmp_path / "run.jsonl"
    args = ["launch", "vllm", "fake/tiny", "--python", sys.executable, "--headless", "--profile", str(profile),
            "--steps", "2,4", "--step-seconds", "120", "--warmup", "0", "--no-metrics", "--out", str(out)]  # fmt: skip
    env = {"PYTHONPATH": os.pathsep.join([str(FAKES), str(Path(__file__).resolve().parents[2])])}
    proc = start_ramp(args, env={**env, "FAKE_MODE": "sim"}, cwd=tmp_path)
    try:
        server = wait_for(lambda: cold_start_pid(out), 60, "the server to be started")
        members = wait_for(lambda: _with_workers(proc.pid, 1), 30, "the worker")
        assert proc.poll() is None and alive(server)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        everyone = members | {server}
        try:
            wait_for(
                lambda: not any(alive(pid) for pid in everyone), GONE_WITHIN_S, "ramp and its server to go"
            )
        except AssertionError:
            raise AssertionError(
                "still alive after kill -9: " + describe({p for p in everyone if alive(p)})
            ) from None
    finally:
        kill_group(proc)
        pid = cold_start_pid(out)
        if pid is not None and alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_kill_9_of_ramp_demo_takes_its_simulator_down(tmp_path: Path) -> None:
    out = tmp_path / "demo.jsonl"
    proc = start_ramp(
        ["demo", "--headless", "--preset", "fast", "--steps", "2", "--step-seconds", "30", "--out", str(out)],
        cwd=tmp_path,
    )
    try:
        sims = wait_for(
            lambda: [p for p in group_members(proc.pid) if "loadgen.sim" in cmdline(p)] or None,
            30,
            "the demo's simulator process",
        )
        wait_for(
            lambda: out.exists() and '"type": "step"' not in out.read_text() and out.stat().st_size > 0,
            30,
            "the record",
        )
        os.kill(proc.pid, signal.SIGKILL)
        wait_for(
            lambda: not any(alive(p) for p in sims), GONE_WITHIN_S, f"the simulator to go: {describe(sims)}"
        )
    finally:
        kill_group(proc)
