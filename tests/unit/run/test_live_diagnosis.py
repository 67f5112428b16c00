"""The measuring step's diagnosis so far (``LiveDiagnosis``): read from the window's figures, the server's over
the same seconds and the finished steps, marked provisional; read at most once a second (the snapshot is
built a few times a second), at once for a new window; nothing while the window holds too few requests;
kept while the step closes, gone once its own diagnosis is in or the next warm-up starts."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from tui_fakes import STEPS, window

from loadgen.run.live_diagnosis import EVERY_NS, LiveDiagnosis
from loadgen.snapshot import StepSummary

S = 1_000_000_000
QUEUE = {"running_max": 4.0, "waiting_max": 12.0, "kv_usage_max": 0.3}


@dataclass
class Seg:
    reason: str | None = None

    def bound_reason(self) -> str | None:
        return self.reason


@dataclass
class Book:
    """What the reading takes of ``Steps``: the window measuring, one closing, the finished steps."""

    current: Seg | None = field(default_factory=Seg)
    since: int | None = 0
    closing: Seg | None = None
    summaries: list[StepSummary] = field(default_factory=lambda: [replace(STEPS[0], level=2)])

    def measuring_since_ns(self) -> int | None:
        return self.since if self.current is not None else None


@dataclass
class Link:
    server: dict[str, float | None] = field(default_factory=lambda: dict(QUEUE))
    doubt: str = ""
    reads: int = 0

    def window_summary(self, t0_ns: int, t1_ns: int) -> dict[str, float | None]:
        self.reads += 1
        return self.server

    def ttft_histograms(self, t0_ns: int, t1_ns: int) -> dict[str, object]:
        return {}

    def window_doubt(self, t0_ns: int, t1_ns: int) -> str:
        return self.doubt


def test_a_window_with_a_queue_reads_queueing_marked_provisional_once_a_second() -> None:
    live, book, link = LiveDiagnosis(), Book(), Link()
    stats = window("step", 0.4, ttft_median=900.0)  # 800 requests, TTFT ×5 the first step's
    got = live.read(book, link, stats, 16, 1 * S)  # type: ignore[arg-type]
    assert got["kind"] == "queueing" and got["provisional"] is True, got
    assert "12 waiting" in got["evidence"]  # type: ignore[operator]
    link.server = {**QUEUE, "waiting_max": 0.0}
    assert live.read(book, link, stats, 16, 1 * S + EVERY_NS - 1) is got  # type: ignore[arg-type]
    assert link.reads == 1  # within the second: the last reading, nothing read again
    later = live.read(book, link, stats, 16, 1 * S + EVERY_NS)  # type: ignore[arg-type]
    assert link.reads == 2 and later["kind"] != "queueing"
    book.since = 5 * S  # a new window reads at once
    live.read(book, link, stats, 16, 5 * S + 1)  # type: ignore[arg-type]
    assert link.reads == 3


def test_too_few_requests_read_nothing_and_a_doubt_reads_unknown() -> None:
    few = replace(window("step", 0.4), ok=5, errors={})
    assert LiveDiagnosis().read(Book(), Link(), few, 16, S) == {}  # type: ignore[arg-type]
    lost = Link(doubt="the server's telemetry stopped")
    got = LiveDiagnosis().read(Book(), lost, window("step", 0.4), 16, S)  # type: ignore[arg-type]
    evidence = got["evidence"]
    assert got["kind"] == "unknown" and isinstance(evidence, list)
    assert evidence[0] == "the server's telemetry stopped: its figures over the step are not read"


def test_kept_while_the_step_closes_and_gone_once_it_is_diagnosed_or_the_next_warms_up() -> None:
    live, book, link = LiveDiagnosis(), Book(), Link()
    stats = window("step", 0.4, ttft_median=900.0)
    got = live.read(book, link, stats, 16, S)  # type: ignore[arg-type]
    book.current, book.closing = None, Seg()  # the window ended; its last requests come back
    assert live.read(book, link, stats, 16, 3 * S) is got  # type: ignore[arg-type]
    book.closing, book.summaries = None, [*book.summaries, STEPS[1]]  # its own diagnosis is in
    assert live.read(book, link, stats, 16, 4 * S) == {}  # type: ignore[arg-type]
    live.read(Book(), link, stats, 16, S)  # type: ignore[arg-type]
    warming = Book(current=Seg(), since=None)  # a key ended it at once: the next step warms up
    assert live.read(warming, link, stats, 16, 2 * S) == {}  # type: ignore[arg-type]
