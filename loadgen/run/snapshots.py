"""Building the ``Snapshot`` the engine publishes a few times a second, from the run's parts: its status
and load, the step book, the live figures and the server's telemetry. Reading them changes none of them.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import TypedDict

from loadgen.config import SLO
from loadgen.metrics.live_margins import LiveMargins
from loadgen.run.config import RunConfig
from loadgen.run.live import LiveFigures
from loadgen.run.live_diagnosis import LiveDiagnosis
from loadgen.run.replicas import replica_figures
from loadgen.run.state import Load, RunStatus
from loadgen.run.steps import Steps
from loadgen.run.telemetry_link import TelemetryLink
from loadgen.run.wheel import Wheel, next_value
from loadgen.snapshot import Precision, ReplicaStats, SeriesPoint, Snapshot, WindowStats
from loadgen.stats import Interval
from loadgen.target.http import scrub

SERIES_POINTS = 900  # one a second: the last 15 minutes
SERIES_EVERY_NS = 1_000_000_000


class LiveReads(TypedDict):
    """What a snapshot takes of the measuring step's reads (``Snapshot``'s fields of these names)."""

    live_margins: Mapping[str, Interval]
    precision: Precision | None
    live_diagnosis: Mapping[str, object]


class SnapshotBuilder:
    """Numbers the snapshots and keeps the once-a-second series they carry."""

    def __init__(self, config: RunConfig, slo: SLO) -> None:
        self.config = config
        self.slo = slo
        self.seq = 0
        self.series: collections.deque[SeriesPoint] = collections.deque(maxlen=SERIES_POINTS)
        self.last_series_ns = 0
        self.unrecorded: list[SeriesPoint] = []  # points not yet in the record (``take_series``)
        self.margins = LiveMargins(slo)  # the measuring step's intervals so far, read once a second
        self.diagnosis = LiveDiagnosis()  # the measuring step's limit so far, read once a second

    def windows(self, now: int, status: RunStatus, steps: Steps, live: LiveFigures) -> dict[str, WindowStats]:
        """The step's, the rolling and the run's figures at ``now``."""
        cur = steps.current
        held = steps.closing
        windows: dict[str, WindowStats] = {}
        if cur is not None:
            windows["step"] = cur.acc.stats("step", max(1e-3, (now - cur.t0_ns) / 1e9))
        elif held is not None and held.t1_ns is not None:  # closing: the step's own figures, still filling
            windows["step"] = held.acc.stats("step", max(1e-3, (held.t1_ns - held.t0_ns) / 1e9))
        else:
            windows["step"] = WindowStats(window="step")
        roll_s = min(self.config.rolling_s, max(1e-3, status.elapsed_s(now)))
        windows["rolling"] = (
            live.rolling.stats(now, roll_s) if status.state != "starting" else WindowStats("rolling")
        )
        since = steps.measuring_since_ns()
        run_s = steps.run_measured_s + ((now - since) / 1e9 if since is not None else 0.0)
        windows["run"] = steps.run_acc.stats("run", max(1e-3, run_s))
        if self.config.snapshot_sink is not None:  # --metrics-port: the run's histograms, bucketed
            windows["run"] = steps.run_acc.with_buckets(windows["run"])
        return windows

    def build(
        self,
        now: int,
        status: RunStatus,
        load: Load,
        steps: Steps,
        live: LiveFigures,
        link: TelemetryLink,
        record_path: str | None,
        wheel: Wheel,
    ) -> Snapshot:
        return Snapshot(
            seq=self.next_seq(),
            elapsed_s=status.elapsed_s(now),
            state=status.state,
            url=scrub(self.config.target.base_url),  # drawn in the console's header (and its screenshots)
            model=status.model,
            runtime=status.runtime,
            runtime_version=status.runtime_version,
            profile=self.config.profile.name,
            mode=load.mode,
            level=load.level,
            rate_rps=load.rate if load.mode == "open" else None,
            achieved_rps=live.rates(now)[3] if load.mode == "open" else None,
            arrival=load.arrival_label(),
            paused=load.paused,
            auto_ramp=load.auto,
            step_index=steps.shown_index(),
            step_count=load.plan.positions if load.plan is not None and wheel.search is None else None,
            step_elapsed_s=(now - steps.t0_step_ns) / 1e9 if steps.t0_step_ns else 0.0,
            step_remaining_s=remaining_s(now, status, steps),
            warming_up=(phase := wheel.phase()) == "warmup",
            **live.gauges_now(now),  # in flight, queued, backing off, waiting for a first token
            windows=(windows := self.windows(now, status, steps, live)),
            rolling_s=self.config.rolling_s,
            step_starts_s=tuple(steps.starts_s),
            steps=tuple(steps.summaries),
            best_step=steps.best,
            slo=self.slo,
            health=live.client_health(),
            recent_errors=tuple(live.recent_errors),
            warnings=tuple(status.warnings),
            server=link.latest(steps.measuring_since_ns()),
            record_path=record_path,
            marks=tuple(status.marks),
            message=status.message,
            server_log=self.server_log(),
            phase=phase,
            closing_left=steps.closing_left() if phase == "closing" else 0,
            surplus=wheel.surplus(),
            next_load=None if wheel.search is not None else next_value(wheel.next_load()),
            notices=tuple(wheel.notices),
            latest_errors=dict(live.latest_errors),
            series=self.series_point(now, status.elapsed_s(now), status, load, live),
            replicas=self.replicas(now, status, live, link),
            worker_hosts=worker_hosts(status.fleet),
            **self.live_reads(now, load, steps, link, windows["step"]),  # margins, diagnosis: once a second
            search=wheel.searching.view(),
        )

    def live_reads(
        self, now: int, load: Load, steps: Steps, link: TelemetryLink, stats: WindowStats
    ) -> LiveReads:
        """The measuring step's margins so far and, under --precision, the time left to its target; and its
        diagnosis so far (``stats``: its figures), each read at most once a second."""
        seg = steps.current
        since = steps.measuring_since_ns()
        pct = load.plan.precision_pct if load.plan is not None else None
        found = self.margins.read(seg.slices if seg is not None else None, since, now, pct)
        return LiveReads(
            live_margins=found.margins,
            precision=found.precision,
            live_diagnosis=self.diagnosis.read(steps, link, stats, load.level, now),
        )

    def replicas(
        self, now: int, status: RunStatus, live: LiveFigures, link: TelemetryLink
    ) -> tuple[ReplicaStats, ...]:
        """Each replica's last N s (the rolling window, already expired to ``now`` by ``windows``)."""
        target = self.config.target
        if len(target.replicas) < 2 or status.state == "starting":
            return ()
        roll_s = min(self.config.rolling_s, max(1e-3, status.elapsed_s(now)))
        return replica_figures(target, live.rolling.acc, roll_s, link.replica_kv_now())

    def next_seq(self) -> int:
        """The next snapshot's number (1, 2, ...)."""
        self.seq += 1
        return self.seq

    def series_point(
        self, now: int, elapsed: float, status: RunStatus, load: Load, live: LiveFigures
    ) -> tuple[SeriesPoint, ...]:
        """The once-a-second throughput series, with a point added when a second has passed."""
        if now - self.last_series_ns >= SERIES_EVERY_NS and status.state in ("running", "paused"):
            self.last_series_ns = now
            out_s, in_s, ok_s, _ = live.rates(now)
            point = SeriesPoint(elapsed, out_s, in_s, ok_s, live.in_flight, load.level)
            self.series.append(point)
            self.unrecorded.append(point)
        return tuple(self.series)

    def take_series(self) -> dict[str, list[float]]:
        """The points since the last call, column by column (the record's ``series``: what ``ramp replay``
        draws the throughput timeline from); the next call starts after them."""
        points, self.unrecorded = self.unrecorded, []
        return series_columns(points)

    def server_log(self) -> tuple[str, ...]:
        """The last lines of the server ramp launched (none otherwise; a failing reader shows none)."""
        if self.config.server_log is None:
            return ()
        try:
            return tuple(self.config.server_log())
        except Exception:
            return ()


def series_columns(points: list[SeriesPoint]) -> dict[str, list[float]]:
    """Once-a-second points as compact columns (``loadgen.analysis.replay.series_points`` reads them)."""
    return {
        "t_s": [round(p.t_s, 3) for p in points],
        "out_tok_s": [round(p.out_tok_s, 1) for p in points],
        "prefill_tok_s": [round(p.prefill_tok_s, 1) for p in points],
        "req_s": [round(p.req_s, 2) for p in points],
        "in_flight": [p.in_flight for p in points],
        "level": [p.level for p in points],
    }


def worker_hosts(fleet: Mapping[str, object]) -> tuple[str, ...]:
    """Each worker's host by worker id, out of the header's ``fleet.hosts`` table (``fleet.host_table``)."""
    table = fleet.get("hosts")
    by_id: dict[int, str] = {}
    for row in table if isinstance(table, list) else ():
        if isinstance(row, dict):
            by_id.update((int(w), str(row.get("host", ""))) for w in row.get("workers") or ())
    return tuple(by_id.get(w, "") for w in range(max(by_id, default=-1) + 1))


def remaining_s(now: int, status: RunStatus, steps: Steps) -> float | None:
    """Seconds left in the running step of a plan (None: no end is set, or the run is not running)."""
    end_ns = steps.end_ns if status.state == "running" and steps.current is not None else None
    return None if end_ns is None else max(0.0, (end_ns - now) / 1e9)
