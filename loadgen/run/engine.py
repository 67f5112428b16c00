"""The engine: a run behind thread-safe commands, for every face alike.

One engine, three faces: the Textual console, the headless CLI and Python code all drive it through the
same commands (``EngineControl``) and receive the same immutable ``Snapshot`` objects. Nothing here knows
which face is attached.

    engine = Engine(config, on_snapshot=print)
    engine.start()
    engine.set_level(8)
    outcome = engine.wait()

The controller (``loadgen.run.controller``) runs in a thread of its own with its own asyncio loop, so a
UI's event loop is never blocked by it; the streams run in worker processes (``loadgen.run.worker``).
Commands are typed messages (``loadgen.run.protocol``) handed to the controller's loop; the ones given
before the loop exists are kept and delivered, in order, once it does.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Protocol

from loadgen.config import MODES, Mode, RunConfig, RunOutcome
from loadgen.run.controller import Controller
from loadgen.run.protocol import (
    ChangeLevel,
    ControlCommand,
    Mark,
    NextStep,
    Pause,
    Resume,
    SetAuto,
    SetLevel,
    SetMode,
    SetRate,
    Stop,
)
from loadgen.snapshot import Snapshot


class EngineControl(Protocol):
    """What a face needs of an engine: lifecycle, the latest snapshot and the operator's commands."""

    def start(self) -> None: ...
    def stop(self, cancel: bool = True) -> None: ...
    def wait(self, timeout: float | None = None) -> RunOutcome | None: ...
    def latest(self) -> Snapshot | None: ...
    @property
    def done(self) -> bool: ...
    def set_level(self, level: int) -> None: ...
    def change_level(self, delta: int) -> None: ...
    def set_rate(self, rate_rps: float) -> None: ...
    def set_mode(self, mode: Mode) -> None: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def next_step(self) -> None: ...
    def set_auto(self, on: bool) -> None: ...
    def mark(self, note: str) -> None: ...


class Engine:
    def __init__(self, config: RunConfig, on_snapshot: Callable[[Snapshot], None] | None = None) -> None:
        self.config = config
        self.on_snapshot = on_snapshot
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ctl: Controller | None = None
        self._thread: threading.Thread | None = None
        self._early: list[ControlCommand] = []
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._outcome: RunOutcome | None = None
        self._latest: Snapshot | None = None

    # ---- lifecycle --------------------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:
            return
        # Start multiprocessing's resource tracker now, while this process's stderr is still a real file:
        # under a running Textual app sys.stderr has no file descriptor, and spawning it then fails.
        try:
            from multiprocessing import resource_tracker

            resource_tracker.ensure_running()
        except Exception:
            pass
        self._thread = threading.Thread(target=self._thread_main, name="ramp-controller", daemon=True)
        self._thread.start()

    def wait(self, timeout: float | None = None) -> RunOutcome | None:
        self._done.wait(timeout)
        return self._outcome

    def latest(self) -> Snapshot | None:
        return self._latest

    def worker_pids(self) -> list[int]:
        ctl = self._ctl
        return ctl.worker_pids() if ctl is not None else []

    @property
    def done(self) -> bool:
        return self._done.is_set()

    # ---- commands (thread-safe, return at once) ---------------------------------------------------------
    def stop(self, cancel: bool = True) -> None:
        self._send(Stop(bool(cancel)))

    def set_level(self, level: int) -> None:
        self._send(SetLevel(int(level)))

    def change_level(self, delta: int) -> None:
        self._send(ChangeLevel(int(delta)))

    def set_rate(self, rate_rps: float) -> None:
        self._send(SetRate(float(rate_rps)))

    def set_mode(self, mode: Mode) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be 'closed' or 'open', not {mode!r}")
        self._send(SetMode(mode))

    def pause(self) -> None:
        self._send(Pause())

    def resume(self) -> None:
        self._send(Resume())

    def next_step(self) -> None:
        self._send(NextStep())

    def set_auto(self, on: bool) -> None:
        self._send(SetAuto(bool(on)))

    def mark(self, note: str) -> None:
        self._send(Mark(str(note)))

    def _send(self, cmd: ControlCommand) -> None:
        with self._lock:
            if self._loop is None or self._ctl is None:
                self._early.append(cmd)
                return
            loop, ctl = self._loop, self._ctl
        if not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # closed between the check and the call
                loop.call_soon_threadsafe(ctl.command, cmd)

    # ---- the controller thread --------------------------------------------------------------------------
    def _publish(self, snap: Snapshot) -> None:
        self._latest = snap
        if self.on_snapshot is not None:
            try:
                self.on_snapshot(snap)
            except Exception:  # a face's bug must not kill the measurement
                pass

    def _thread_main(self) -> None:
        loop = asyncio.new_event_loop()
        ctl = Controller(self.config, self._publish)
        with self._lock:
            self._loop, self._ctl = loop, ctl
            early, self._early = self._early, []
        for cmd in early:
            loop.call_soon(ctl.command, cmd)
        try:
            self._outcome = loop.run_until_complete(ctl.run())
        except BaseException as exc:  # pragma: no cover - last resort, keeps the face informed
            self._outcome = ctl.crashed(exc)
        finally:
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()
            self._done.set()
