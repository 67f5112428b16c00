"""loadgen.arrivals: each process's mean rate and dispersion, its seed, a live rate change, a schedule."""

from __future__ import annotations

import math
import statistics

import pytest

from loadgen.arrivals import ArrivalKind, Arrivals, ArrivalSpec, arrivals

N = 40_000  # gaps per sample: the mean's standard error is cv / sqrt(N) (0.5 % for Poisson)
START_NS = 1_000_000_000_000


def gaps_s(stream: Arrivals, n: int = N) -> list[float]:
    times = [stream.next_ns() for _ in range(n + 1)]
    assert all(t is not None for t in times)
    return [(b - a) / 1e9 for a, b in zip(times, times[1:], strict=False)]  # type: ignore[operator]


def cv(values: list[float]) -> float:
    return statistics.pstdev(values) / statistics.fmean(values)


# (spec, the coefficient of variation its gaps must have): burstiness is gamma's shape k, cv = 1/sqrt(k)
PROCESSES = [
    (ArrivalSpec("constant", rate_rps=50.0), 0.0),
    (ArrivalSpec("poisson", rate_rps=50.0), 1.0),
    (ArrivalSpec("gamma", rate_rps=50.0, burstiness=0.25), 2.0),
    (ArrivalSpec("gamma", rate_rps=50.0, burstiness=0.5), 1 / math.sqrt(0.5)),
    (ArrivalSpec("gamma", rate_rps=50.0, burstiness=1.0), 1.0),
    (ArrivalSpec("gamma", rate_rps=50.0, burstiness=4.0), 0.5),
]


@pytest.mark.parametrize(("spec", "want_cv"), PROCESSES, ids=lambda p: getattr(p, "label", ""))
@pytest.mark.parametrize("seed", [0, 1, 12345])
def test_each_process_keeps_its_mean_rate_and_its_dispersion(
    spec: ArrivalSpec, want_cv: float, seed: int
) -> None:
    spec = ArrivalSpec(spec.kind, spec.rate_rps, spec.burstiness, seed=seed)
    gaps = gaps_s(arrivals(spec, START_NS))
    rate = 1 / statistics.fmean(gaps)
    # Five standard errors of the mean gap (constant: only the ns rounding of each gap).
    assert rate == pytest.approx(spec.rate_rps, rel=max(1e-6, 5 * want_cv / math.sqrt(N)))
    # The sample cv's standard error grows with the tail (gamma's kurtosis 3 + 6/k): 0.05 holds k >= 0.25.
    assert cv(gaps) == pytest.approx(want_cv, abs=0.05 if want_cv else 1e-6)


def test_the_first_arrival_is_one_gap_after_the_start_never_before() -> None:
    kinds: tuple[ArrivalKind, ...] = ("constant", "poisson", "gamma")
    for kind in kinds:
        stream = arrivals(ArrivalSpec(kind, rate_rps=10.0, burstiness=0.5), START_NS)
        times = [stream.next_ns() or 0 for _ in range(1000)]
        assert times[0] >= START_NS
        assert times == sorted(times), kind
    constant = arrivals(ArrivalSpec("constant", rate_rps=4.0), START_NS)
    assert [constant.next_ns() for _ in range(3)] == [START_NS + k * 250_000_000 for k in (1, 2, 3)]


def test_a_seed_gives_the_same_times_and_another_seed_other_times() -> None:
    def times(seed: int) -> list[int | None]:
        stream = arrivals(ArrivalSpec("gamma", rate_rps=20.0, burstiness=0.5, seed=seed), START_NS)
        return [stream.next_ns() for _ in range(200)]

    assert times(7) == times(7)
    assert times(7) != times(8)


@pytest.mark.parametrize("kind", ["constant", "poisson", "gamma"])
def test_a_rate_change_mid_stream_starts_over_from_that_instant_at_the_new_rate(kind: ArrivalKind) -> None:
    spec = ArrivalSpec(kind, rate_rps=10.0, burstiness=0.5, seed=3)
    stream = arrivals(spec, START_NS)
    before = gaps_s(stream, 5000)
    change_ns = (stream.next_ns() or 0) + 123_456  # the operator's key, between two arrivals
    again = arrivals(ArrivalSpec(kind, rate_rps=40.0, burstiness=0.5, seed=3), change_ns, stream)
    assert again is stream, "the same process at another rate continues its draws"
    first = again.next_ns() or 0
    assert first >= change_ns  # nothing scheduled before the change is sent after it, nor before it
    after = gaps_s(again, 20_000)
    bound = 5 * max(1e-6, 1 / math.sqrt(0.5)) / math.sqrt(5000)
    assert 1 / statistics.fmean(before) == pytest.approx(10.0, rel=bound)
    assert 1 / statistics.fmean(after) == pytest.approx(40.0, rel=bound)
    # The draws continued: the first gaps after the change are not the stream's first gaps replayed.
    if kind != "constant":
        fresh = gaps_s(arrivals(ArrivalSpec(kind, rate_rps=40.0, burstiness=0.5, seed=3), 0), 10)
        assert after[:10] != fresh


def test_another_process_or_seed_starts_a_fresh_stream() -> None:
    stream = arrivals(ArrivalSpec("poisson", rate_rps=10.0, seed=1), START_NS)
    assert (
        arrivals(ArrivalSpec("gamma", rate_rps=10.0, burstiness=2.0, seed=1), START_NS, stream) is not stream
    )
    assert arrivals(ArrivalSpec("poisson", rate_rps=10.0, seed=2), START_NS, stream) is not stream


def test_a_schedule_sends_each_time_divided_by_its_scale_from_the_restart_then_ends() -> None:
    spec = ArrivalSpec("schedule", rate_rps=1.0, times_s=(0.0, 0.5, 2.0), time_scale=2.0)
    stream = arrivals(spec, START_NS)
    assert [stream.next_ns() for _ in range(4)] == [
        START_NS,
        START_NS + 250_000_000,
        START_NS + 1_000_000_000,
        None,
    ]
    # A rate change (a new scale) starts the schedule over from its first item, at the new scale.
    later = START_NS + 5_000_000_000
    again = arrivals(
        ArrivalSpec("schedule", rate_rps=4.0, times_s=(0.0, 0.5, 2.0), time_scale=8.0), later, stream
    )
    assert [again.next_ns() for _ in range(4)] == [later, later + 62_500_000, later + 250_000_000, None]


def test_a_zero_rate_sends_nothing() -> None:
    assert arrivals(ArrivalSpec("poisson", rate_rps=0.0), START_NS).next_ns() is None


def test_the_label_is_what_the_record_names() -> None:
    assert ArrivalSpec("gamma", burstiness=0.5).label == "gamma(0.5)"
    assert ArrivalSpec("poisson", burstiness=0.5).label == "poisson"
    assert ArrivalSpec("constant").label == "constant"
