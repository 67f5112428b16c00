"""The real `ramp demo` command in a real terminal: tmux runs it, send-keys steers it, capture-pane reads it.

This is what an operator over SSH does: start the demo, watch numbers arrive, raise the level with the
arrow key, see the level change and the numbers move, quit (confirming), and find the run's record on disk.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)"
)


def _ramp_cmd() -> list[str]:
    exe = shutil.which("ramp")
    return [exe] if exe else [sys.executable, "-m", "loadgen.cli"]


class Pane:
    def __init__(self, session: str) -> None:
        self.session = session

    def capture(self) -> str:
        out = subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", self.session], capture_output=True, text=True, check=False
        )
        return out.stdout

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.session, *keys], check=True)

    def wait_for(self, predicate, timeout: float, what: str) -> str:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.capture()
            if predicate(screen):
                return screen
            time.sleep(0.2)  # polling the terminal for a condition, with a deadline
        raise AssertionError(f"timed out waiting for {what}; screen was:\n{screen}")

    def alive(self) -> bool:
        return (
            subprocess.run(["tmux", "has-session", "-t", self.session], capture_output=True).returncode == 0
        )


def _level(screen: str) -> int | None:
    m = re.search(r"\blevel (\d+)", screen)
    return int(m.group(1)) if m else None


def _ok_count(screen: str) -> int | None:
    m = re.search(r"\bok (\d[\d,]*)", screen)
    return int(m.group(1).replace(",", "")) if m else None


def test_ramp_demo_in_tmux(tmp_path: Path) -> None:
    session = f"ramp-e2e-{uuid.uuid4().hex[:8]}"
    record = tmp_path / "demo.jsonl"
    cmd = [*_ramp_cmd(), "demo", "--level", "2", "--out", str(record)]
    shell = " ".join(f"'{c}'" for c in cmd)
    env = f"env TERM=xterm-256color COLUMNS=120 LINES=36 {shell}; sleep 30"
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "120", "-y", "36", "-c", os.getcwd(), env],
        check=True,
    )
    pane = Pane(session)
    try:
        first = pane.wait_for(
            lambda s: "RUNNING" in s and _level(s) == 2, 60, "the console to run at level 2"
        )
        assert "sim-llama-8b" in first  # the model discovered from the embedded simulator
        # Numbers arrive: requests complete at level 2 (the step's own count).
        pane.wait_for(lambda s: (_ok_count(s) or 0) >= 2, 60, "completed requests at level 2")
        pane.keys("Up")
        # A new step begins at level 3: its count starts from zero, then grows.
        pane.wait_for(lambda s: _level(s) == 3 and _ok_count(s) == 0, 20, "a new step at level 3")
        raised = pane.wait_for(
            lambda s: _level(s) == 3 and (_ok_count(s) or 0) >= 2, 60, "numbers to move at 3"
        )
        assert "in flight" in raised
        pane.keys("q")
        pane.wait_for(lambda s: "quit" in s.lower() or "stop" in s.lower(), 10, "the quit confirmation")
        pane.keys("y")
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not _ended(record):
            time.sleep(0.2)  # waiting for the app to finish the record, with a deadline
        assert _ended(record), "quitting must finish the record"
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True, check=False)
    lines = [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines()]
    assert lines[0]["type"] == "header" and lines[0]["model"] == "sim-llama-8b"
    levels = [line["level"] for line in lines if line.get("type") == "step"]
    assert levels[:1] == [2]  # the level-2 step ended when the operator raised the level
    assert 3 in levels  # the level-3 step ended when the operator quit
    assert "OPENAI_API_KEY" not in record.read_text(encoding="utf-8")


def _ended(record: Path) -> bool:
    if not record.exists():
        return False
    for line in record.read_text(encoding="utf-8").splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if obj.get("type") == "event" and obj.get("kind") == "end":
            return True
    return False
