"""A snapshot sink for engine tests: keeps the latest snapshot and waits for a condition on it, with a
deadline (never a sleep as synchronisation); ``run_until_ok`` and ``simulated_step`` (one recorded step on a
simulator process, with the simulator's truth of what it served) on it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loadgen.config import Api, RampPlan
from loadgen.profile import Profile
from loadgen.record import JsonObject, read_record, step_from_line
from loadgen.run.config import RunConfig, RunOutcome
from loadgen.run.engine import Engine
from loadgen.sim import SimConfig, spawn_sim_process
from loadgen.snapshot import Snapshot, StepSummary
from loadgen.types import Target

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


def simulated_step(
    sim_config: SimConfig,
    profile: Profile,
    out_dir: Path,
    *,
    level: int = 4,
    ok: int = 12,
    api: Api = "chat",
    requests_detail: bool = True,
) -> tuple[JsonObject, StepSummary, list[dict[str, Any]]]:
    """One step at ``level`` on a simulator process of ``sim_config``, recorded to ``out_dir/run.jsonl``
    (and its per-request export with ``requests_detail``) and stopped, not cancelled, at ``ok`` requests:
    its step line, that line read back, and the simulator's truth of each request it served. The step
    counts exactly those requests, all of them answered (checked here)."""
    sim = spawn_sim_process(sim_config)
    try:
        config = RunConfig(
            target=Target(url=sim.url, api=api),
            profile=profile,
            plan=RampPlan((level,), step_s=300.0, warmup_s=0.0),
            out=str(out_dir / "run.jsonl"),
            telemetry=False,
            save_requests_detail=requests_detail,
        )
        run_until_ok(config, ok)
        truth = [g for g in sim.ground_truth() if g.get("request_id")]
    finally:
        sim.stop()
    line = read_record(out_dir / "run.jsonl").steps[0]
    step = step_from_line(line)
    assert step.stats.error_count == 0 and step.stats.ok == len(truth)
    return line, step, truth
