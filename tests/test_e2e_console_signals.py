"""SIGTERM and SIGHUP stop the console like quitting does (a dropped SSH session, `kill`, systemd): the real
`ramp demo` in tmux gets the signal, its record gets every finished step and an end event naming the
signal, and ramp exits 128 + N."""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from pathlib import Path

import pytest
from proc_watch import cmdline, wait_for
from tmux_harness import Pane, needs_tmux, ramp_cmd, record_lines, step_lines, tmux, wait_record

pytestmark = needs_tmux


def _descendants(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True).stdout
    children: dict[int, list[int]] = {}
    for line in out.split("\n"):
        if line.strip():
            child, parent = (int(v) for v in line.split())
            children.setdefault(parent, []).append(child)
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_stops_the_console_and_finishes_the_record(sig: signal.Signals, tmp_path: Path) -> None:
    record = tmp_path / "console.jsonl"
    args = ["demo", "--preset", "fast", "--steps", "4,8", "--step-seconds", "2", "--warmup", "0"]
    args += ["--out", str(record)]
    session = f"ramp-sig-{uuid.uuid4().hex[:8]}"
    shell = " ".join(f"'{c}'" for c in [*ramp_cmd(), *args])
    env = f"env TERM=xterm-256color COLUMNS=120 LINES=36 {shell}; echo EXIT=$?; sleep 30"
    cmd = tmux(session, "new-session", "-d", "-s", session, "-x", "120", "-y", "36", "-c", os.getcwd(), env)
    subprocess.run(cmd, check=True)
    try:
        pane = Pane(session)
        wait_record(record, lambda p: len(step_lines(p)) >= 1, 60, "the first step line")
        shell_pid = int(
            subprocess.run(
                tmux(session, "list-panes", "-t", session, "-F", "#{pane_pid}"),
                capture_output=True,
                text=True,
            ).stdout.split()[0]
        )
        ramp = wait_for(
            lambda: next((p for p in _descendants(shell_pid) if "demo" in cmdline(p)), None),
            10,
            "ramp's process",
        )
        os.kill(ramp, sig)
        screen = pane.wait_for(lambda s: "EXIT=" in s, 30, "ramp to exit")
        assert f"EXIT={128 + sig}" in screen, screen
        lines = record_lines(record)
        (end,) = [line for line in lines if line.get("kind") == "end"]
        assert sig.name in str(end.get("message")), end
        assert len(step_lines(record)) >= 1
    finally:
        subprocess.run(tmux(session, "kill-server"), capture_output=True, check=False)
