"""How ramp's children must not outlive it or starve it: the ``Popen`` arguments that put a child in a
process group of its own inside ramp's session, with a Linux parent-death signal; and, for a child that is
Python (a load worker), ending itself as soon as its parent is gone, whatever killed the parent.

Owns ``own_process_group`` (why: its docstring), ``parent_death_signal`` and ``with_hook`` (a child hook
chained after one already given), ``child_popen_args``, the three together, ``exit_with_parent``, and
``main_left_alone`` (a spawned worker that does not run the parent's ``__main__`` again); and, for ending a
launched server, ``left_behind`` (its processes outside its group: a /proc walk of its tree and of the
environment mark it was started with), ``signal_each`` and ``ignores_signal``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from typing import Any

__all__ = [
    "LAUNCH_MARK",
    "child_popen_args",
    "exit_with_parent",
    "ignores_signal",
    "left_behind",
    "main_left_alone",
    "own_process_group",
    "parent_death_signal",
    "signal_each",
    "with_hook",
]

PR_SET_PDEATHSIG = 1  # linux/prctl.h
ORPHAN_EXIT = 3  # the exit code of a child that ended itself because its parent was gone
PARENT_POLL_S = 0.2  # without a sentinel: how often the parent's pid is checked
LAUNCH_MARK = "RAMP_LAUNCH_MARK"  # set in a launched server's environment: its descendants inherit it


def own_process_group() -> dict[str, Any]:
    """``Popen`` arguments that give a child its own process group but keep it in ramp's session.

    Its own group: Ctrl-C in ramp's terminal does not reach it, and one ``killpg`` stops it and all its
    children. The same session: Linux's scheduler autogroups (on by default on desktop and most server
    kernels) share CPU equally between *sessions*, not processes. A server in a session of its own, busy-
    spinning on every core (vLLM's CPU engine does), left ramp's mostly-idle workers waiting 0.3-1.6 s for a
    core (measured on 2 cores: TTFT p50 212-364 ms instead of 22-33 ms, half the throughput). In one session
    the scheduler is fair per process and a waking worker gets a core at once.
    """
    if sys.version_info >= (3, 11):
        return {"process_group": 0}
    return {"preexec_fn": os.setpgrp}


def _prctl() -> Callable[..., int] | None:
    """Linux's ``prctl`` through ctypes, or None elsewhere (or without a C library to load)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return prctl


def parent_death_signal() -> Callable[[], None] | None:
    """Linux: a child hook asking the kernel to SIGTERM the server if ramp dies without stopping it
    (SIGKILL, a crash): a forgotten vLLM keeps gigabytes of memory and its cores busy. A ramp that died
    between the fork and the hook (the kernel would never tell) is caught by the parent's pid."""
    prctl = _prctl()  # resolved here: the child only makes the call
    if prctl is None:
        return None
    parent = os.getpid()

    def hook() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(ORPHAN_EXIT)

    return hook


def with_hook(kwargs: dict[str, Any], hook: Callable[[], None] | None) -> dict[str, Any]:
    """Add a child hook to ``Popen`` arguments, chained after a ``preexec_fn`` already there."""
    if hook is None:
        return kwargs
    first = kwargs.pop("preexec_fn", None)
    if first is None:
        return {**kwargs, "preexec_fn": hook}

    def both() -> None:
        first()
        hook()

    return {**kwargs, "preexec_fn": both}


def child_popen_args() -> dict[str, Any]:
    """Its own process group in ramp's session, and SIGTERM from the kernel if ramp dies first."""
    return with_hook(own_process_group(), parent_death_signal())


def exit_with_parent(parent_pid: int, sentinel: int | None = None, kernel: bool = True) -> None:
    """In a child, as early as it can: end it (``os._exit``) as soon as its parent is gone, whatever killed
    the parent. A load worker must never go on loading a server for a controller that no longer exists.

    Two layers. Linux: the kernel SIGKILLs this process when its parent ends (``PR_SET_PDEATHSIG``; strictly,
    when the parent's *thread* that started it ends — ramp's controller thread outlives its workers).
    ``kernel=False`` leaves that layer out (tests of the other one). Everywhere: a daemon thread waits for
    ``sentinel`` (a descriptor that turns readable once the parent is gone, as multiprocessing's parent
    sentinel does) or, without one, polls the parent's pid. A parent that died before this call is caught
    at once by its pid (this process was handed to another parent)."""
    prctl = _prctl() if kernel else None
    if prctl is not None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent_pid:
        _orphaned()
    threading.Thread(
        target=_watch_parent, args=(parent_pid, sentinel), name="ramp-parent-watch", daemon=True
    ).start()


def _watch_parent(parent_pid: int, sentinel: int | None) -> None:
    if sentinel is not None:
        from multiprocessing.connection import wait

        wait([sentinel])
    else:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
    _orphaned()


def _orphaned() -> None:
    try:
        os.write(2, b"ramp: the process that started this one is gone: exiting\n")
    except OSError:
        pass
    os._exit(ORPHAN_EXIT)


class _MainStandIn(types.ModuleType):
    """``__main__`` as a spawning parent shows it to multiprocessing while a worker starts: no file and no
    spec (so the child leaves its own ``__main__`` alone), every other name read through to the real one."""

    def __init__(self, real: types.ModuleType) -> None:
        super().__init__("__main__")
        self.__file__: str | None = None
        self.__spec__ = None
        self._real = real

    def __getattr__(self, name: str) -> Any:
        try:
            return vars(self._real)[name]
        except KeyError:
            raise AttributeError(f"module '__main__' has no attribute {name!r}") from None


_MAIN_SWAP = threading.Lock()


@contextlib.contextmanager
def main_left_alone() -> Iterator[None]:
    """Around ``Process.start()`` of a spawn context: the child does not run the parent's ``__main__`` again.

    Spawn (and forkserver) children import the parent's main script as ``__mp_main__`` before they unpickle
    their target, which is why scripts need ``if __name__ == "__main__":``: without the guard the child runs
    the script's own ``Engine(...).start()`` and dies ("load worker exited with code 1"). A load worker's
    target and arguments are ramp's own (importable by name), so it needs nothing from ``__main__``:
    multiprocessing leaves main alone when ``__main__`` has neither a file nor a spec (as in an
    interactive session), which the stand-in shows for the few milliseconds of the start. Other threads
    reading a name of ``__main__`` meanwhile (pickle does) still find it, through the stand-in."""
    with _MAIN_SWAP:
        real = sys.modules["__main__"]
        sys.modules["__main__"] = _MainStandIn(real)
        try:
            yield
        finally:
            sys.modules["__main__"] = real


def ignores_signal(pid: int, sig: int) -> bool:
    """Linux: whether process ``pid`` ignores ``sig`` (its ``SigIgn`` mask); False where unknown."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("SigIgn:"):
                    return bool(int(line.split()[1], 16) >> (int(sig) - 1) & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks since boot) of a live process; None if gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if len(fields) < 20 or fields[0] == b"Z":
        return None
    return int(fields[1]), int(fields[19])


def _carries(pid: int, mark: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return mark in f.read().split(b"\0")
    except OSError:  # another user's process, or gone
        return False


def left_behind(root: int, mark: str | None = None) -> dict[int, int]:
    """pid -> start time of every live process under ``root`` (by parent links) or carrying ``mark``
    (``LAUNCH_MARK=mark``) in its environment, ``root`` excluded; {} without /proc.

    A server that ``setsid``s and forks has a child outside its process group that ``killpg`` misses;
    one that forks twice hands it to init, out of its tree too. Its environment still carries the mark
    ``ramp launch`` gave the server. The start time lets ``signal_each`` skip a pid reused meanwhile."""
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return {}
    stats = {pid: stat for pid in pids if pid != os.getpid() and (stat := _stat(pid)) is not None}
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, []))
    if mark:
        wanted = f"{LAUNCH_MARK}={mark}".encode()
        found.update(pid for pid in stats if pid not in found and pid != root and _carries(pid, wanted))
    return {pid: stats[pid][1] for pid in found}


def signal_each(processes: dict[int, int], sig: int) -> int:
    """Send ``sig`` to each pid of ``processes`` (pid -> start time) still the same process; how many."""
    sent = 0
    for pid, started in processes.items():
        stat = _stat(pid)
        if stat is None or stat[1] != started:
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
            sent += 1
    return sent
