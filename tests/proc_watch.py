"""Helpers for tests that run the real ``ramp`` in a subprocess and watch its processes: who is in its
process group, who is still alive (a zombie is gone), and waiting for a condition with a deadline.

Linux only (``/proc``); the tests that use it skip elsewhere.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from loadgen.childproc import own_process_group

T = TypeVar("T")
ROOT = Path(__file__).resolve().parent.parent


def wait_for(cond: Callable[[], T], timeout: float, what: str, every: float = 0.05) -> T:
    """``cond()``'s first true value within ``timeout`` s; AssertionError naming ``what`` otherwise.
    Polling with a deadline: across processes there is nothing to wait on."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (a zombie no longer runs: it is gone for our purposes)."""
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"


def group_members(pgid: int) -> set[int]:
    """Live processes in process group ``pgid``."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            # fields: state, ppid, pgrp, ...
            if fields is not None and fields[0] != "Z" and int(fields[2]) == pgid:
                found.add(int(entry))
    return found


def children(pid: int) -> set[int]:
    """Live processes whose parent is ``pid``."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields is not None and fields[0] != "Z" and int(fields[1]) == pid:
                found.add(int(entry))
    return found


def ignores(pid: int, signum: int) -> bool:
    """Whether process ``pid`` ignores signal ``signum`` (its SigIgn mask in /proc)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            mask = next(int(line.split()[1], 16) for line in f if line.startswith("SigIgn:"))
    except (OSError, StopIteration):
        return False
    return bool(mask & (1 << (signum - 1)))


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def describe(pids: Sequence[int] | set[int]) -> str:
    return "; ".join(f"{pid}: {cmdline(pid)[:120]}" for pid in sorted(pids))


def start_ramp(
    args: Sequence[str], env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.Popen[str]:
    """``python -m loadgen.cli ARGS`` in a process group of its own (so that cleanup can kill it all)."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), full_env.get("PYTHONPATH")) if p)
    full_env.update(env or {})
    return subprocess.Popen(
        [sys.executable, "-m", "loadgen.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full_env,
        cwd=cwd,
        **own_process_group(),
    )


def kill_group(proc: subprocess.Popen[str]) -> None:
    """Cleanup after a test: nothing of this ramp may survive it, whatever the test found."""
    for pid in group_members(proc.pid) | ({proc.pid} if proc.poll() is None else set()):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if proc.poll() is None:
        proc.kill()
    proc.communicate()


def record_has_step(path: Path) -> bool:
    return path.exists() and '"type":"step"' in path.read_text()


def cold_start_pid(path: Path) -> int | None:
    """The launched server's pid from a record's ``cold_start`` event, once that line is whole."""
    if not path.exists():
        return None
    for line in path.read_text().splitlines(keepends=True):
        if line.endswith("\n") and '"cold_start"' in line and '"event"' in line:
            return int(json.loads(line)["pid"])
    return None
