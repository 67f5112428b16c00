"""A snapshot sink for engine tests: keeps the latest snapshot and waits for a condition on it, with a
deadline (never a sleep as synchronisation)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from loadgen.config import RunConfig, RunOutcome
from loadgen.run.engine import Engine
from loadgen.snapshot import Snapshot

SEEN_KEPT = 10_000  # snapshots kept for ``seen`` (40 minutes at 4 Hz)


class Watch:
    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.snap: Snapshot | None = None
        self.published: list[Snapshot] = []  # every snapshot, in order (``seen`` looks at each one)

    def __call__(self, snap: Snapshot) -> None:
        with self.cond:
            self.snap = snap
            self.published.append(snap)
            del self.published[:-SEEN_KEPT]
            self.cond.notify_all()

    def seen(self, pred: Callable[[Snapshot], bool], timeout: float = 20.0, what: str = "") -> Snapshot:
        """The first snapshot, the latest one included, that meets ``pred``: a state that lasts a snapshot
        or two is found even when this thread was not scheduled while it lasted (``until`` looks only at the
        latest snapshot each time it wakes)."""
        with self.cond:
            start = max(0, len(self.published) - 1)
            found: list[Snapshot] = []

            def met() -> bool:
                nonlocal start
                for snap in self.published[start:]:
                    if pred(snap):
                        found.append(snap)
                        return True
                start = len(self.published)
                return False

            self.cond.wait_for(met, timeout)
        assert found, f"no snapshot within {timeout} s: {what}; {len(self.published)} seen"
        return found[0]

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


def run_until_ok(config: RunConfig, ok: int, timeout_s: float = 90.0) -> RunOutcome:
    """``config``'s engine run until its step has ``ok`` requests, then stopped (not cancelled: the step's
    requests finish and the step is recorded); its outcome, checked to be that stop."""
    watch = Watch()
    engine = Engine(config, on_snapshot=watch)
    engine.start()
    try:
        watch.until(lambda s: s.windows["step"].ok >= ok, timeout_s)
    finally:
        engine.stop(cancel=False)
        outcome = engine.wait(60)
    assert outcome is not None and outcome.state == "stopped", outcome
    return outcome
