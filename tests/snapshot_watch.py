"""A snapshot sink for engine tests: keeps the latest snapshot and waits for a condition on it, with a
deadline (never a sleep as synchronisation)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from loadgen.snapshot import Snapshot


class Watch:
    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.snap: Snapshot | None = None

    def __call__(self, snap: Snapshot) -> None:
        with self.cond:
            self.snap = snap
            self.cond.notify_all()

    def until(self, pred: Callable[[Snapshot], bool], timeout: float = 20.0, what: str = "") -> Snapshot:
        with self.cond:
            met = self.cond.wait_for(lambda: self.snap is not None and pred(self.snap), timeout)
            snap = self.snap
        assert met and snap is not None, (
            f"not within {timeout} s: {what}; last: state={getattr(snap, 'state', None)} "
            + (
                f"in_flight={snap.in_flight} step={snap.step_index} step window={snap.windows['step']} "
                f"msg={snap.message!r}"
                if snap is not None
                else ""
            )
        )
        return snap

    def after(self, snapshots: int) -> Snapshot:
        """The snapshot ``snapshots`` publications from now (an observation period, not a synchronisation)."""
        with self.cond:
            start = self.snap.seq if self.snap is not None else 0
        return self.until(lambda s: s.seq >= start + snapshots, 20.0, f"{snapshots} more snapshots")
