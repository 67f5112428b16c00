"""Stop signals, for every face alike: SIGINT (Ctrl-C), SIGTERM (``kill``, ``timeout``, systemd) and SIGHUP
(a terminal or an SSH session that goes away) all stop a run the same way — the finished steps are kept,
the record gets its end event — and ramp exits with 128 + the signal (130, 143, 129).

``StopSignals`` is a context manager that catches them while inside (in the main thread only: Python runs
signal handlers there). On the first one it calls ``on_signal(signum)`` (``Engine.interrupt`` is safe to
call from a handler) and, with ``raising``, raises ``Interrupted`` there, the way Ctrl-C raises
``KeyboardInterrupt`` (for a face blocked in a call that only an exception ends, such as a server start);
such a face also calls ``check()`` between its tries, since a raise from a handler can be swallowed.
Later signals are noted and ignored, so that the stop itself (finishing the record, stopping a server)
is never cut short. Nested, the inner one handles them and tells the outer ones.

    with StopSignals(engine.interrupt) as stops:
        engine.start()
        ...  # poll stops.signum
    return exit_code(stops.signum) if stops.signum is not None else ...
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

__all__ = ["STOP_SIGNALS", "Interrupted", "StopSignals", "exit_code", "interrupted_by", "signal_label"]

# SIGHUP is POSIX only.
STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM) + (
    (signal.SIGHUP,) if hasattr(signal, "SIGHUP") else ()
)
# What signal.signal returns and takes: a function, SIG_DFL/SIG_IGN, or None (set outside Python).
Handler = Callable[[int, FrameType | None], Any] | int | None

_active: list[StopSignals] = []  # entered and not yet left, outermost first


def exit_code(signum: int) -> int:
    """The shell's convention for a process ended by a signal: 128 + its number."""
    return 128 + int(signum)


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def signal_label(signum: int) -> str:
    """How the operator knows it: ``Ctrl-C`` for SIGINT, else the signal's name."""
    return "Ctrl-C" if signum == signal.SIGINT else signal_name(signum)


class Interrupted(KeyboardInterrupt):
    """A stop signal raised like Ctrl-C: every ``except KeyboardInterrupt`` path stops the same way;
    ``signum`` says which signal it was."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal_name(signum))
        self.signum = signum


def interrupted_by(exc: KeyboardInterrupt) -> int:
    """The signal behind a ``KeyboardInterrupt``: an ``Interrupted``'s own, else SIGINT."""
    return exc.signum if isinstance(exc, Interrupted) else int(signal.SIGINT)


class StopSignals:
    """While inside, the stop signals stop the run instead of killing ramp (see the module's docstring)."""

    def __init__(
        self,
        on_signal: Callable[[int], None] | None = None,
        raising: bool = False,
        signals: tuple[signal.Signals, ...] = STOP_SIGNALS,
    ) -> None:
        self.on_signal = on_signal
        self.raising = raising
        self.signals = signals
        self.signum: int | None = None  # the first one received
        self.received = 0  # how many
        self._old: dict[signal.Signals, Handler] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is not threading.main_thread():
            return self  # handlers can only be set from the main thread: the caller's own stay
        for sig in self.signals:
            self._old[sig] = signal.signal(sig, self._handle)
        _active.append(self)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self not in _active:
            return
        _active.remove(self)
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        first = self.signum is None
        for stops in _active:  # the outer ones know too: their later signals are repeats
            stops.received += 1
            if stops.signum is None:
                stops.signum = signum
        if not first:
            return
        if self.on_signal is not None:
            self.on_signal(signum)
        if self.raising:
            raise Interrupted(signum)

    def check(self) -> None:
        """Raise ``Interrupted`` if a stop signal has come in: for a wait loop to call between its tries.
        The handler's own raise can be lost: when the signal lands while a ``__del__`` or a GC callback
        runs, Python prints the exception ("Exception ignored in ...") and the wait goes on."""
        if self.signum is not None:
            raise Interrupted(self.signum)
