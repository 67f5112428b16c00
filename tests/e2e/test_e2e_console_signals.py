"""SIGTERM and SIGHUP stop the console like quitting does (a dropped SSH session, `kill`, systemd): the real
`ramp demo` in tmux gets the signal, its record gets every finished step and an end event naming the
signal, and ramp exits 128 + N. A real hang-up (the terminal itself goes away) ends every process of the
console: ramp, its workers, the simulator and multiprocessing's resource tracker, which outlives ramp's
stop instead of dying with the terminal."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from proc_watch import alive, children, cmdline, describe, ignores, wait_for
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


def _start_console(session: str, args: list[str]) -> int:
    """``ramp ARGS`` in a detached tmux session of its own; the pid of ramp's process."""
    shell = " ".join(f"'{c}'" for c in [*ramp_cmd(), *args])
    env = f"env TERM=xterm-256color COLUMNS=120 LINES=36 {shell}; echo EXIT=$?; sleep 30"
    cmd = tmux(session, "new-session", "-d", "-s", session, "-x", "120", "-y", "36", "-c", os.getcwd(), env)
    subprocess.run(cmd, check=True)
    panes = tmux(session, "list-panes", "-t", session, "-F", "#{pane_pid}")
    shell_pid = int(subprocess.run(panes, capture_output=True, text=True).stdout.split()[0])
    return wait_for(
        lambda: next((p for p in _descendants(shell_pid) if "demo" in cmdline(p)), None),
        10,
        "ramp's process",
    )


def test_a_hang_up_ends_every_process_of_the_console(tmp_path: Path) -> None:
    """The terminal goes away (tmux closes the pane's terminal as sshd does: the kernel hangs it up and
    SIGHUP reaches the console's whole process group). Ramp finishes its record, naming SIGHUP; its workers
    and the simulator end; the resource tracker, started deaf to SIGHUP, lives as long as ramp does (never
    killed with the terminal and relaunched with warnings) and ends once ramp and its workers are gone."""
    record = tmp_path / "console.jsonl"
    args = ["demo", "--preset", "fast", "--steps", "4,8,16", "--step-seconds", "2", "--warmup", "0"]
    args += ["--out", str(record)]
    session = f"ramp-hup-{uuid.uuid4().hex[:8]}"
    try:
        ramp = _start_console(session, args)
        wait_record(record, lambda p: len(step_lines(p)) >= 1, 60, "the first step line")
        kids = children(ramp)
        (tracker,) = [p for p in kids if "resource_tracker" in cmdline(p)]
        workers = {p for p in kids if "spawn_main" in cmdline(p)}
        sims = {p for p in kids if "loadgen.sim" in cmdline(p)}
        assert workers and sims, describe(kids)
        assert ignores(tracker, signal.SIGHUP), "the resource tracker would die with the terminal"
        subprocess.run(tmux(session, "kill-server"), check=True)  # the hang-up
        deadline = time.monotonic() + 30
        while alive(ramp):
            trackers = {p for p in children(ramp) if "resource_tracker" in cmdline(p)}
            assert trackers <= {tracker}, f"a resource tracker was relaunched: {describe(trackers)}"
            assert alive(tracker) or not alive(ramp), "the resource tracker died before ramp"
            assert time.monotonic() < deadline, "ramp did not end after the hang-up"
            time.sleep(0.02)  # observing the processes over a span, as Pane.hold does the screen
        everyone = {tracker, *workers, *sims}
        wait_for(lambda: not any(alive(p) for p in everyone), 15, "every process to end")
        (end,) = [line for line in record_lines(record) if line.get("kind") == "end"]
        assert "SIGHUP" in str(end.get("message")), end
    finally:
        subprocess.run(tmux(session, "kill-server"), capture_output=True, check=False)


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
