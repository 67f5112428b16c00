"""The real `ramp` in a real terminal, for end-to-end tests: tmux runs it, send-keys steers it, capture-pane
reads it, and the run's record (``--out``) is read back line by line.

Every wait is on a condition with a deadline (the screen or the record file); ``Pane.hold`` checks that a
condition stays true over a span (the level must not change by itself), polling the screen all along.
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from loadgen.run.steps import MIN_STEP_S

POLL_S = 0.2  # how often a wait reads the screen or the record

needs_tmux = pytest.mark.skipif(
    shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)"
)


def tmux(session: str, *args: str) -> list[str]:
    """A tmux command on the session's own server (``-L``): tests never share one, so a test's server going
    away as its last session ends cannot meet the next test's ``new-session`` ("server exited
    unexpectedly")."""
    return ["tmux", "-L", session, *args]


def ramp_cmd() -> list[str]:
    """The ``ramp`` of the interpreter running the tests (its venv's), else the one on PATH, else ``-m``: a
    ``ramp`` of another install earlier on PATH would test other code."""
    beside = Path(sys.executable).with_name("ramp")
    exe = str(beside) if beside.exists() else shutil.which("ramp")
    return [exe] if exe else [sys.executable, "-m", "loadgen.cli"]


class Pane:
    def __init__(self, session: str) -> None:
        self.session = session

    def capture(self) -> str:
        out = subprocess.run(
            tmux(self.session, "capture-pane", "-p", "-t", self.session),
            capture_output=True,
            text=True,
            check=False,
        )
        return out.stdout

    def keys(self, *keys: str) -> None:
        subprocess.run(tmux(self.session, "send-keys", "-t", self.session, *keys), check=True)

    def wait_for(self, predicate: Callable[[str], bool], timeout: float, what: str) -> str:
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.capture()
            if predicate(screen):
                return screen
            time.sleep(POLL_S)  # polling the terminal for a condition, with a deadline
        raise AssertionError(f"timed out waiting for {what}; screen was:\n{screen}")

    def hold(self, predicate: Callable[[str], bool], seconds: float, what: str) -> int:
        """Check ``predicate`` on every screen for ``seconds``; fail on the first screen where it is false.
        Returns how many screens were read."""
        deadline = time.monotonic() + seconds
        reads = 0
        while time.monotonic() < deadline:
            screen = self.capture()
            reads += 1
            if not predicate(screen):
                raise AssertionError(f"{what} stopped holding; screen was:\n{screen}")
            time.sleep(POLL_S)  # observing the terminal over a span
        return reads

    def alive(self) -> bool:
        return (
            subprocess.run(
                tmux(self.session, "has-session", "-t", self.session), capture_output=True
            ).returncode
            == 0
        )


@contextmanager
def ramp_session(args: list[str], *, width: int = 120, height: int = 36) -> Iterator[Pane]:
    """``ramp ARGS`` in a detached tmux session of ``width`` x ``height``; killed on the way out."""
    session = f"ramp-e2e-{uuid.uuid4().hex[:8]}"
    shell = " ".join(f"'{c}'" for c in [*ramp_cmd(), *args])
    env = f"env TERM=xterm-256color COLUMNS={width} LINES={height} {shell}; sleep 30"
    size = ["-x", str(width), "-y", str(height)]
    subprocess.run(
        tmux(session, "new-session", "-d", "-s", session, *size, "-c", os.getcwd(), env), check=True
    )
    try:
        yield Pane(session)
    finally:
        subprocess.run(tmux(session, "kill-server"), capture_output=True, check=False)


def quit_run(pane: Pane, record: Path, timeout: float = 15.0) -> None:
    """q, confirm, and wait for the record's end event."""
    pane.keys("q")
    pane.wait_for(lambda s: "quit" in s.lower() or "stop" in s.lower(), 10, "the quit confirmation")
    pane.keys("y")
    wait_record(record, record_ended, timeout, "the record's end event")


def level_of(screen: str) -> int | None:
    """The closed loop's target level on the control line ('level 3')."""
    m = re.search(r"\blevel (\d+)", screen)
    return int(m.group(1)) if m else None


def ok_count(screen: str) -> int | None:
    m = re.search(r"\bok (\d[\d,]*)", screen)
    return int(m.group(1).replace(",", "")) if m else None


def header_line(screen: str) -> str:
    """The progress line under the identity line (state, phase, mode, step, auto)."""
    lines = screen.splitlines()
    return lines[1] if len(lines) > 1 else ""


def record_lines(record: Path) -> list[dict[str, object]]:
    """The record's complete JSON lines (a line being written is left out)."""
    if not record.exists():
        return []
    found = []
    for line in record.read_text(encoding="utf-8").splitlines():
        try:
            found.append(json.loads(line))
        except ValueError:
            continue
    return found


def step_lines(record: Path) -> list[dict[str, object]]:
    return [line for line in record_lines(record) if line.get("type") == "step"]


def record_ended(record: Path) -> bool:
    return any(line.get("type") == "event" and line.get("kind") == "end" for line in record_lines(record))


def wait_record(record: Path, predicate: Callable[[Path], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate(record):
            return
        time.sleep(POLL_S)  # polling the record file for a condition, with a deadline
    raise AssertionError(f"timed out waiting for {what}; the record holds {record_lines(record)}")


def measuring(screen: str) -> bool:
    """The header says the step measures (its window is open: no warm-up, closing or settling)."""
    return "MEASURING" in header_line(screen)


def measured_a_while(pane: Pane, what: str, ready: Callable[[str], bool] | None = None) -> None:
    """A step measuring with a request done (or ``ready``), then still measuring for longer than MIN_STEP_S on
    the test's own clock. A key cuts a step only once it has measured that long (one cut sooner is no step:
    the record never gets it), and a count on screen says nothing of how long: a short reply is done a
    fraction of a second into the window. The screen shows an earlier moment than the one it is read at, so
    the window opened before the first read: a key pressed after the hold cuts a step the record keeps.
    (The run's clock in the header is the first thing a long header drops: not read.)"""
    pane.wait_for(ready or (lambda s: measuring(s) and (ok_count(s) or 0) >= 1), 60, what)
    pane.hold(measuring, MIN_STEP_S + 0.5, f"{what}, for over a second")
