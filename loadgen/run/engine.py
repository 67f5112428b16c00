"""The engine: a run behind thread-safe commands, for every face alike.

One engine, three faces: the Textual console, the headless CLI and Python code all drive it through the
same interface (``EngineControl``) and receive the same immutable ``Snapshot`` objects. Nothing here knows
which face is attached.

    engine = Engine(config, on_snapshot=print)
    engine.start()
    engine.send(SetLevel(8))  # or the shorthand engine.set_level(8)
    outcome = engine.wait()

The controller (``loadgen.run.controller``) runs in a thread of its own with its own asyncio loop, so a
UI's event loop is never blocked by it; the streams run in worker processes (``loadgen.run.worker``).
The operator's commands are typed values (``loadgen.run.protocol``'s ``ControlCommand``) that ``send``
hands to the controller's loop, which acts on each in one place (``Controller.command``); the ones sent
before the loop exists are kept and delivered, in order, once it does. Every command may be sent from a
signal handler too (``interrupt`` is meant for it: see ``loadgen.run.signals``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import signal
import threading
from collections.abc import Callable
from typing import Protocol

from loadgen.run.config import RunConfig, RunOutcome
from loadgen.run.controller import Controller
from loadgen.run.protocol import ControlCommand, Mark, Pause, Resume, SetLevel, Stop
from loadgen.run.signals import signal_name
from loadgen.snapshot import Snapshot


class EngineControl(Protocol):
    """What a face needs of an engine: lifecycle, the latest snapshot, and ``send`` for every one of the
    operator's commands (a ``ControlCommand`` value: ``SetLevel(32)``, ``Pause()``, ``Mark("note")`` ...)."""

    def start(self) -> None: ...
    def stop(self, cancel: bool = True) -> None: ...
    def interrupt(self, signum: int) -> None: ...
    def wait(self, timeout: float | None = None) -> RunOutcome | None: ...
    def latest(self) -> Snapshot | None: ...
    @property
    def done(self) -> bool: ...
    def send(self, cmd: ControlCommand) -> None: ...


class Engine:
    def __init__(self, config: RunConfig, on_snapshot: Callable[[Snapshot], None] | None = None) -> None:
        self.config = config
        self.on_snapshot = on_snapshot
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ctl: Controller | None = None
        self._thread: threading.Thread | None = None
        self._early: list[ControlCommand] = []
        # Re-entrant: a signal handler runs on the main thread between two bytecodes, possibly while that
        # thread holds the lock in a command of its own, and may give a command itself (``interrupt``).
        self._lock = threading.RLock()
        self._signum: int | None = None  # the signal that stopped the run, once one did
        self._done = threading.Event()
        self._outcome: RunOutcome | None = None
        self._latest: Snapshot | None = None

    # ---- lifecycle --------------------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:
            return
        ensure_resource_tracker()
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
        self.send(Stop(bool(cancel)))

    def interrupt(self, signum: int) -> None:
        """Stop at once because of a signal (SIGINT, SIGTERM, SIGHUP): the streams in flight are cancelled,
        the running step is marked with the signal and the record's end event names it, and the outcome
        carries it (``RunOutcome.signum``; the faces exit with 128 + it). Safe to call from a signal
        handler; only the first call counts."""
        with self._lock:
            if self._signum is not None:
                return
            self._signum = int(signum)
            loop, ctl = self._loop, self._ctl
        reason = f"stopped by {signal_name(signum)}"
        self.send(Mark(reason))
        if loop is not None and ctl is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_say_why, ctl, reason)
        self.send(Stop(True))

    def send(self, cmd: ControlCommand) -> None:
        """Give the controller one of the operator's commands (``loadgen.run.protocol``)."""
        with self._lock:
            if self._loop is None or self._ctl is None:
                self._early.append(cmd)
                return
            loop, ctl = self._loop, self._ctl
        if not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # closed between the check and the call
                loop.call_soon_threadsafe(ctl.command, cmd)

    # ---- shorthands for send(), the Python API the README shows -----------------------------------------
    def set_level(self, level: int) -> None:
        self.send(SetLevel(int(level)))

    def pause(self) -> None:
        self.send(Pause())

    def resume(self) -> None:
        self.send(Resume())

    def mark(self, note: str) -> None:
        self.send(Mark(str(note)))

    # ---- the controller thread --------------------------------------------------------------------------
    def _publish(self, snap: Snapshot) -> None:
        self._latest = snap
        sink = self.config.snapshot_sink  # --metrics-port: ramp's own exporter
        if sink is not None:
            try:
                sink(snap)
            except Exception:  # an exporter's bug must not kill the measurement
                pass
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
            signum = self._signum
        for cmd in early:
            loop.call_soon(ctl.command, cmd)
        if signum is not None:  # interrupted before the loop existed
            loop.call_soon(_say_why, ctl, f"stopped by {signal_name(signum)}")
        outcome: RunOutcome | None = None
        try:
            outcome = loop.run_until_complete(ctl.run())
        except BaseException as exc:  # pragma: no cover - last resort, keeps the face informed
            outcome = ctl.crashed(exc)
        finally:
            with self._lock:
                if outcome is not None and self._signum is not None:
                    outcome = dataclasses.replace(outcome, signum=self._signum)
                self._outcome = outcome
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()
            self._done.set()


def ensure_resource_tracker() -> None:
    """Start multiprocessing's resource tracker (it unlinks the semaphores of the workers' queues should
    ramp die) now, while this process's stderr is still a real file: under a running Textual app
    sys.stderr has no file descriptor, and spawning it then fails. Call it before a face takes the screen.

    It is started deaf to SIGHUP (it ignores SIGINT and SIGTERM by itself): a terminal that hangs up
    signals ramp's whole process group, and a tracker killed then is relaunched with warnings and
    tracebacks while ramp finishes its record. It outlives no one: it exits once the last process that
    holds its pipe (ramp and its workers) is gone."""
    from multiprocessing import resource_tracker

    hup = signal.SIGHUP if hasattr(signal, "SIGHUP") else None
    deaf = hup is not None and threading.current_thread() is threading.main_thread()
    old = signal.signal(hup, signal.SIG_IGN) if deaf and hup is not None else None  # kept across exec
    try:
        resource_tracker.ensure_running()
    except Exception:
        pass
    finally:
        if deaf and hup is not None:
            signal.signal(hup, old if old is not None else signal.SIG_DFL)


def _say_why(ctl: Controller, reason: str) -> None:
    """On the controller's loop: the run's message (the record's end event, the outcome) names why it
    stopped, unless something said more already (a failure)."""
    ctl.status.explain(reason)
