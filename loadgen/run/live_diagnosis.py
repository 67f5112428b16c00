"""The measuring step's diagnosis so far, for the live snapshot: the limit read from the window's figures
until now, the server's telemetry over the same seconds and the finished steps' trend
(``loadgen.analysis.diagnosis``). Provisional: the step's own diagnosis, at its end, is the one recorded.

Reading the server's window and the TTFT split costs a little, so ``LiveDiagnosis.read`` reads at most once a
``EVERY_NS`` and returns the last reading in between (the snapshot is built a few times a second); nothing
here runs per chunk or per request. Until the window holds ``MIN_REQUESTS`` it reads nothing: too few to
read a mechanism from, the console keeps the last finished step's line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from loadgen import measures
from loadgen.analysis.diagnosis import MIN_REQUESTS, StepFigures, diagnose
from loadgen.analysis.ttft_split import ttft_split
from loadgen.run.steps import Steps
from loadgen.run.telemetry_link import TelemetryLink
from loadgen.snapshot import EMPTY, WindowStats
from loadgen.types import ErrorKind

EVERY_NS = 1_000_000_000


@dataclass(slots=True)
class LiveDiagnosis:
    """The last reading, when it was taken, and of which window."""

    read_ns: int = 0
    since_ns: int | None = None
    last: Mapping[str, object] = field(default_factory=lambda: EMPTY)
    finished: int = 0  # the steps finished when it was read

    def read(
        self, steps: Steps, link: TelemetryLink, stats: WindowStats, level: int, now_ns: int
    ) -> Mapping[str, object]:
        """The diagnosis of the window measuring now (``stats``: its figures so far, at ``level``), kept while
        it closes; empty from the next warm-up or the step's own diagnosis on, and while it holds too few
        requests."""
        seg, since = steps.current, steps.measuring_since_ns()
        if seg is None or since is None:
            # A window closing (its last requests coming back) keeps its line until its own diagnosis is
            # in; a new step's warm-up, or a finished step, ends it.
            if steps.closing is None or len(steps.summaries) != self.finished:
                self.last, self.read_ns, self.since_ns = EMPTY, 0, None
            return self.last
        if since == self.since_ns and now_ns < self.read_ns + EVERY_NS:
            return self.last
        self.read_ns, self.since_ns, self.finished = now_ns, since, len(steps.summaries)
        if stats.ok + stats.error_count < MIN_REQUESTS:
            self.last = EMPTY
            return self.last
        ttft, decode = stats.pct(measures.TTFT_MS), stats.pct(measures.DECODE_TOK_S)
        bound = seg.bound_reason()
        now = StepFigures(
            level=level,
            ok=stats.ok,
            errors=stats.error_count,
            rate_limited=stats.errors.get(ErrorKind.HTTP_429.value, 0),
            out_tok_s=stats.out_tok_s,
            ttft_p50_ms=ttft.p50,
            ttft_p95_ms=ttft.p95,
            decode_p50_tok_s=decode.p50,
            client_bound=bound is not None,
            bound_reason=bound or "",
            server=link.window_summary(since, now_ns),
            split=ttft_split(ttft, link.ttft_histograms(since, now_ns)),
            doubt=link.window_doubt(since, now_ns),
        )
        before = [StepFigures.of(s) for s in steps.summaries]
        self.last = {**diagnose(now, before), "provisional": True}
        return self.last
