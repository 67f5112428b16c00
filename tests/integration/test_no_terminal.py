"""Without a terminal ``ramp demo`` and ``ramp URL`` run headless, say so in one line and end by themselves;
records go where they can be written (a read-only working folder: the XDG state folder)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loadgen.cli.commands import DEMO_LEVELS
from loadgen.record import read_record


def quiet_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RAMP_RUNS_DIR", "TEXTUAL_DRIVER")}
    return dict(env, XDG_STATE_HOME=str(tmp_path / "state"))


# The chat profile's SLO and early stop, with short replies: each step closes only once its streams' last
# replies land, and chat's (up to 2,048 tokens, 10 ms each on the fast preset) held the 9 steps' closings
# to 26 s of the test's 36 (15 s with these)
SHORT_CHAT = """
name = "short-chat"
[[bucket]]
input = 64
output = { min = 16, max = 64 }
[sampling]
ignore_eos = true
[slo]
ttft_p95_ms = 1000
ttft_p99_ms = 2000
decode_p50_tok_s = 20
itl_p99_ms = 150
e2e_p95_s = 30
max_error_rate = 0.01
"""


def test_demo_without_a_terminal_runs_its_plan_headless_and_ends(tmp_path: Path) -> None:
    out, profile = tmp_path / "demo.jsonl", tmp_path / "short-chat.toml"
    profile.write_text(SHORT_CHAT)
    args = ["demo", "--preset", "fast", "--step-seconds", "0.8", "--warmup", "0.2", "--out", str(out)]
    args += ["--profile", str(profile), "--early-stop"]
    proc = subprocess.run(
        [sys.executable, "-m", "loadgen.cli", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=150,  # the console would never end here (it waits for keys after the plan)
        env=quiet_env(tmp_path),
    )
    assert b"\x1b" not in proc.stdout and b"\x1b" not in proc.stderr
    said = proc.stderr.decode().splitlines()
    assert (
        said[0]
        == "ramp: stdin and stdout are not a terminal: running headless (progress on stderr, the step table on stdout)"
    )
    record = read_record(out)
    steps, plan = record.steps, [int(v) for v in DEMO_LEVELS]
    levels = [s["level"] for s in steps]
    assert levels and levels == plan[: len(levels)], levels
    if len(levels) < len(plan):
        # The demo's plan stops at the first step that breaks its SLO (beside other work, its latencies can):
        # that step is the last, unmet, and the record's end says why. Else every level ran.
        (end,) = [e for e in record.events if e["kind"] == "end"]
        assert end["message"].startswith(f"stopped early: step {len(levels)} broke the SLO"), end
        assert steps[-1]["slo_met"] is False, steps[-1]
    assert sum(s["ok"] for s in steps) > 0
    assert proc.returncode == (0 if any(s["slo_met"] for s in steps) else 1), proc.stderr[-2000:]
    assert b"record: " + str(out).encode() in proc.stdout


def read_only_folder(tmp_path: Path) -> Path:
    """A working folder nothing can be written in: chmod for a user; root passes chmod, so a read-only mount."""
    if os.geteuid() != 0:
        folder = tmp_path / "ro"
        folder.mkdir()
        folder.chmod(0o555)
        return folder
    for candidate in ("/proc/sys", "/sys"):
        if os.path.isdir(candidate) and not os.access(candidate, os.W_OK):
            return Path(candidate)
    pytest.skip("root, and no read-only folder on this machine to stand for a read-only root filesystem")


pytestmark = pytest.mark.sim("fast", process=True)  # the conftest's module-scoped simulator


def test_a_read_only_working_folder_puts_the_record_in_the_xdg_state_folder(sim: Any, tmp_path: Path) -> None:
    cwd = read_only_folder(tmp_path)
    # A seed: a fresh one could draw two warm-up replies longer than the step, which then sends nothing
    # of its own (ok 0, the SLO unjudged: exit 1). Seed 1's step holds three of its own requests.
    plan = ["--steps", "2", "--step-seconds", "3", "--warmup", "0.5", "--no-metrics", "--seed", "1"]
    args = ["run", sim.url, "--headless", *plan]
    proc = subprocess.run(
        [sys.executable, "-m", "loadgen.cli", *args],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=cwd,
        env=quiet_env(tmp_path),
    )
    records = sorted((tmp_path / "state" / "llm-ramp" / "runs").glob("*-chat.jsonl"))
    assert len(records) == 1, (proc.returncode, proc.stderr[-2000:])
    (step,) = read_record(records[0]).steps
    assert proc.returncode == (0 if step["slo_met"] else 1) and step["ok"] > 0
    assert f"record: {records[0]}" in proc.stdout


def test_an_unwritable_ramp_runs_dir_is_one_line_exit_2(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    env = dict(quiet_env(tmp_path), RAMP_RUNS_DIR=str(tmp_path / "afile" / "runs"))
    proc = subprocess.run(
        [sys.executable, "-m", "loadgen.cli", "run", "http://127.0.0.1:9", "--headless", "--steps", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert "--out" in line and "RAMP_RUNS_DIR" in line and "Traceback" not in proc.stderr
