"""The SLA search on probes decided by their intervals (issue 32), no run: a probe decided met or missed on
its intervals is never probed again, a client-bound probe is probed again only when a faster client could
flip it (and the record says why), an undecided one is; the answer is the knee of a monotone fit over every
probe, with its bracket, confidence and shape (a cliff or a slope)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from loadgen.run.knee import isotonic, knee
from loadgen.run.search import WIDE, Search

SLOTS = 20  # an exact-timing server with 20 slots: TTFT 50 ms up to 20 streams, then queueing


def cliff_margin(level: float) -> float:
    """TTFT p95 vs 100 ms: 50 ms up to the slots (margin +0.5), then a whole request's wait (~ -9)."""
    return 0.5 if level <= SLOTS else -9.0


Probe = Callable[[float, int], tuple[float, bool, str | None]]  # -> (margin, client-bound, verdict)


def run(script: Probe, lo: float = 1.0, hi: float = 64.0, repeat: int = 1) -> Search:
    search = Search(lo, hi, integer=True, repeat=repeat)
    level: float | None = search.first()
    while level is not None:
        room, bound, verdict = script(level, search.trials_at(level))
        level = search.probe_result(
            level, room >= 0, 10.0 * level, len(search.probes) + 1, room, bound, verdict
        )
    return search


def decided_cliff(level: float, _n: int) -> tuple[float, bool, str | None]:
    room = cliff_margin(level)
    return room, False, "met" if room >= 0 else "missed"


def test_probes_decided_on_their_intervals_are_never_probed_again() -> None:
    search = run(decided_cliff)
    assert (search.passed, search.failed) == (SLOTS, SLOTS + 1)
    # 1, 64, then a bisection: each level once, no confirmation of sides that cannot flip
    levels = [p.level for p in search.probes]
    assert len(levels) == len(set(levels)) and len(levels) <= 8, levels
    assert all(p.why == "" for p in search.probes)
    assert all(d.sure for d in search.decided.values())
    event = search.event()
    assert event["knee"]["confidence"] == "high" and event["knee"]["shape"] == "cliff"  # type: ignore[index]
    assert event["knee"]["bracket"] == [SLOTS, SLOTS + 1]  # type: ignore[index]
    assert "between 20 (met) and 21 (missed), a cliff, high confidence" in search.summary()


def test_client_bound_probes_are_probed_again_only_when_a_faster_client_could_flip_them() -> None:
    """The issue's 5 wasted probes: client-bound misses by 13-40x and passes with a 46-49 % margin."""

    def bound_above_8(level: float, _n: int) -> tuple[float, bool, str | None]:
        room, bound, verdict = decided_cliff(level, _n)
        return room, level >= 8, verdict

    search = run(bound_above_8)
    assert (search.passed, search.failed) == (SLOTS, SLOTS + 1)
    assert all(search.trials_at(level) == 1 for level in search.decided), [p.level for p in search.probes]
    assert not any(d.client_bound and not d.sure for d in search.edges())

    def narrow_bound_miss(level: float, n: int) -> tuple[float, bool, str | None]:
        if level == SLOTS + 1 and n == 0:  # client-bound and 10 % over: a faster client could make it pass
            return -0.1, True, "missed"
        return decided_cliff(level, n)

    again = run(narrow_bound_miss)
    (first, second) = [p for p in again.probes if p.level == SLOTS + 1]
    assert first.why == "" and "client-bound" in second.why and f"under {WIDE * 100:g} %" in second.why
    assert [p["why"] for p in again.event()["probes"]].count(second.why) == 1  # type: ignore[index, union-attr]


def test_an_undecided_probe_is_probed_again_with_its_reason() -> None:
    def undecided_at_20(level: float, n: int) -> tuple[float, bool, str | None]:
        if level == SLOTS and n == 0:
            return 0.01, False, "undecided"
        return decided_cliff(level, n)

    search = run(undecided_at_20)
    at = [p for p in search.probes if p.level == SLOTS]
    assert len(at) == 2 and at[1].why.startswith("undecided at its maximum length")
    assert search.decided[SLOTS].sure and search.decided[SLOTS].met


def test_a_slope_is_told_from_a_cliff_and_the_fit_gives_the_crossing() -> None:
    def slope(level: float, _n: int) -> tuple[float, bool, str | None]:
        room = (46.5 - level) * 0.02  # the steep simulator's kind: 2 % of the limit per stream
        return room, False, "met" if room >= 0.005 else "missed" if room <= -0.005 else "undecided"

    search = run(slope, hi=128.0)
    fit = search.fit()
    assert (fit.met, fit.missed) == (46, 47) and fit.shape == "slope"
    assert fit.crossing == pytest.approx(46.5, abs=0.01)


def test_the_isotonic_fit_pools_out_of_order_levels() -> None:
    points = isotonic([1, 2, 3, 4, 4], [0.5, 0.1, 0.3, -0.2, -0.4])
    assert [round(p.fitted, 3) for p in points] == [0.5, 0.2, 0.2, -0.3]
    assert all(a.fitted >= b.fitted for a, b in zip(points, points[1:], strict=False))
    # a met level read below a missed one: the fit pools them and the answer says low confidence
    sure = {level: (True, "") for level in (10, 11, 12, 13)}
    low = knee([10, 11, 12, 13], [0.2, -0.05, 0.03, -0.3], sure)
    assert low.met == 10 and low.missed == 11 and low.confidence == "low", low
    assert low.why == ("12 read met out of order: the fit pooled it",)
    high = knee([10, 11, 12, 13], [0.2, -0.05, -0.03, -0.3], sure)
    assert high.confidence == "high" and high.why == () and high.missed == 11


def test_a_probe_warms_up_for_two_requests_in_the_server_never_longer_than_the_runs_warmup() -> None:
    from loadgen.measures import E2E_MS, TTFT_MS
    from loadgen.snapshot import HistogramView, Percentiles, WindowStats

    def stats(e2e_ms: float, ttft_ms: float) -> WindowStats:
        hist = {
            E2E_MS: HistogramView(E2E_MS, "ms", Percentiles(p50=e2e_ms)),
            TTFT_MS: HistogramView(TTFT_MS, "ms", Percentiles(p50=ttft_ms)),
        }
        return WindowStats(window="step", ok=10, hist=hist)

    # 64 streams on 20 slots: e2e 3 s of which 2 s queued; the next level starts on an empty server
    assert Search.warmup_after(stats(3000, 2000), 5.0) == pytest.approx(2.0)
    assert Search.warmup_after(stats(9000, 100), 5.0) == 5.0  # long requests: the run's own warm-up
    assert Search.warmup_after(stats(200, 20), 5.0) == 1.0  # short ones: at least a second
    assert Search.warmup_after(WindowStats(window="step"), 5.0) == 5.0  # nothing finished: the run's


def test_the_window_read_at_its_first_instant_is_neither_precise_nor_decided() -> None:
    """The controller reads a step's intervals up to a second into its window, possibly at its very start:
    a window of 0 s has no rate (this raised ZeroDivisionError and failed the run)."""
    from loadgen.config import SLO
    from loadgen.metrics.slices import SliceBook, decided, precise

    book = SliceBook(t0_ns=1_000_000_000)
    slo = SLO(ttft_p95_ms=100.0)
    assert precise(book, book.t0_ns, 5.0, slo) is False
    assert decided(book, book.t0_ns, slo) is None


def test_a_client_too_weak_for_the_range_ends_the_search_saying_add_workers() -> None:
    """A level client-bound because a load worker used up its CPU, and missed by less than WIDE, again after
    its re-probe: a faster client could pass it, so the miss is not the server's. The search stops there, its
    probes kept, and says so in one line (exit 2: the set-up, not the server); no level above is probed. A
    shared machine's loop lag does not stop it (the level is decided on those probes, with a doubt)."""
    cpu = "load worker at 98% CPU: add --workers"

    def script(reason: str, past: float = 12, hi: float = 64.0) -> Search:
        search = Search(1.0, hi, integer=True)
        level: float | None = search.first()
        while level is not None:
            room, bound = (-0.2, True) if level >= past else (cliff_margin(level), False)
            verdict = "met" if room >= 0 else "missed"
            n = len(search.probes) + 1
            level = search.probe_result(level, room >= 0, 10.0 * level, n, room, bound, verdict, reason)
        return search

    search = script(cpu)
    levels = [p.level for p in search.probes]
    assert levels == [32.0, 32.0], levels  # the middle, client-bound twice: nothing more is probed
    assert search.probes[1].why.startswith("client-bound, missed by 20 %")
    failure = search.failure()
    assert failure is not None
    line, unusable = failure
    assert line == (
        "find-max: the client is the limit at 32 streams: add --workers (or a bigger machine) before "
        f"probing further (step 2: {cpu})"
    )
    assert unusable is False  # exit 2, as a range or an SLO the search cannot answer
    event = search.event()
    assert event["client_limit"] == {"level": 32.0, "step": 2, "margin": -0.2, "reason": cpu}
    assert [p["client_bound"] for p in event["probes"]] == [True, True]  # type: ignore[union-attr]

    # the same above a level that met: the probes so far stay in the record, no answer is given
    search = script(cpu, hi=16.0)
    assert [p.level for p in search.probes] == [8.0, 12.0, 12.0]
    assert search.failure() is not None and "at 12 streams" in search.failure()[0]  # type: ignore[index]
    assert search.decided[8.0].met and 12.0 not in search.decided

    # loop lag on a shared machine: decided on the client-bound probes, said as a doubt, the search goes on
    lag = script(
        "worker event loop lag over 5 ms in 5% of samples, max 19 ms: timings may read high", past=20
    )
    assert lag.failure() is None and lag.client_limit is None and lag.fit().met == 19
    assert lag.decided[20.0].client_bound and not lag.decided[20.0].met

    # a wide client-bound miss (a faster client could not make it pass) stands: the search goes on
    def wide(level: float, _n: int) -> tuple[float, bool, str | None]:
        room, _, verdict = decided_cliff(level, _n)
        return room, level > SLOTS, verdict

    assert run(wide).failure() is None and run(wide).fit().met == SLOTS


def test_a_probe_pinned_at_the_limit_ends_the_level_and_two_close_the_bisection() -> None:
    """The smooth knee (h200-llama8b, decode p50 >= 80): near the knee every level reads within 1-3 % of the
    limit, so its probes stayed undecided to their maximum and were run three times each (12 probes, 310 s).
    A probe whose intervals pin it at the limit (``slices.at_limit``) is not probed again, and two such sides
    within 5 % of each other are the knee's bracket."""
    knee_at = 80.2

    def smooth(level: float, _n: int, pinned_ok: bool = True) -> tuple[float, bool, str | None, bool]:
        room = 0.45 * (knee_at - level) / knee_at  # decode falls 0.45 % for each 1 % more streams
        if abs(room) >= 0.01:  # a ±1 % interval: decided once the point is 1 % or more from the limit
            return room, False, "met" if room >= 0 else "missed", False
        return room, False, "undecided", pinned_ok  # ... else it straddles the limit, within 2 % of it

    def search_with(pinned_ok: bool) -> Search:
        search = Search(32.0, 128.0, integer=True)
        level: float | None = search.first()
        while level is not None:
            room, bound, verdict, pinned = smooth(level, search.trials_at(level), pinned_ok)
            level = search.probe_result(
                level, room >= 0, 10.0 * level, len(search.probes) + 1, room, bound, verdict, pinned=pinned
            )
        return search

    before, after = search_with(False), search_with(True)
    assert len(before.probes) > len(after.probes)
    assert any(before.trials_at(x) == before.confirm_trials for x in before.decided)  # the old re-probes
    assert all(after.trials_at(x) == 1 for x in after.decided), [p.level for p in after.probes]
    answer = after.answer()
    assert answer is not None and abs(answer.level - knee_at) <= 0.05 * knee_at
    assert after.decided[answer.level].at_limit and not after.decided[answer.level].uncertain
    fit = after.fit()
    assert fit.missed is not None and fit.missed <= answer.level * 1.05
    assert "within 2 % of the limit" in after.summary()
    assert after.event()["levels"][0]["at_limit"] is not None  # type: ignore[index]
    assert any(p["at_limit"] for p in after.event()["probes"])  # type: ignore[union-attr]


def test_at_limit_needs_every_straddling_clause_trusted_and_within_two_percent() -> None:
    from loadgen.config import SLO
    from loadgen.metrics.slices import at_limit
    from loadgen.stats import Interval

    def iv(value: float, lo: float, hi: float, trusted: bool = True) -> Interval:
        return Interval(value, lo, hi, 20, 200, 19.0, trusted)

    floor = SLO(decode_p50_tok_s=80.0)
    assert at_limit({"decode_p50_tok_s": iv(80.1, 79.2, 80.9)}, floor)
    assert not at_limit({"decode_p50_tok_s": iv(80.1, 77.0, 83.0)}, floor)  # wider than 2 %
    assert not at_limit({"decode_p50_tok_s": iv(80.1, 79.2, 80.9, trusted=False)}, floor)
    assert not at_limit({"decode_p50_tok_s": iv(82.0, 81.0, 83.0)}, floor)  # met on its interval: no pin
    assert not at_limit({}, floor)
    both = SLO(decode_p50_tok_s=80.0, ttft_p95_ms=100.0)
    pinned = {"decode_p50_tok_s": iv(80.1, 79.2, 80.9), "ttft_p95_ms": iv(50.0, 45.0, 55.0)}
    assert at_limit(pinned, both)  # TTFT met, decode at its floor
    assert not at_limit({**pinned, "ttft_p95_ms": iv(130.0, 120.0, 140.0)}, both)  # TTFT missed
