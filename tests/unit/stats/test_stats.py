"""The margin-of-error estimator (``loadgen.stats``) on synthetic correlated data with a known answer: an
AR(1) series whose marginal is N(0, 1), so its true quantiles and mean are known. 95 % intervals must cover
the truth in 95 % of replications (within the replications' own sampling error); the same data treated as
independent samples must not (the test can fail); three-valued verdicts, differences and repeats combined."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import numpy.typing as npt
import pytest

from loadgen.stats import (
    Interval,
    combine,
    decide,
    difference,
    quantile_interval,
    ratio_interval,
    seconds_to_precision,
    t_quantile,
)

REPS = 400
SAMPLES = 2000
SLICES = 32
EDGES = np.linspace(-5.0, 5.0, 801)
# 400 replications: a true coverage of 95 % reads within 92.8-97.2 % in 19 of 20 seeds; the seed is fixed
COVERAGE = (0.92, 0.985)


def ar1(phi: float, seed: int = 7) -> npt.NDArray[np.float64]:
    """REPS independent AR(1) series of SAMPLES values with a N(0, 1) marginal (lag-k correlation phi^k)."""
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal((REPS, SAMPLES))
    x = np.empty_like(noise)
    x[:, 0] = noise[:, 0]
    scale = math.sqrt(1 - phi * phi)
    for t in range(1, SAMPLES):
        x[:, t] = phi * x[:, t - 1] + scale * noise[:, t]
    return x


def sliced_counts(x: npt.NDArray[np.float64], slices: int) -> npt.NDArray[np.int64]:
    """Each replication's values as histograms (EDGES) per time slice: replications x slices x bins."""
    reps, bins = x.shape[0], EDGES.size - 1
    which = np.clip(np.searchsorted(EDGES, x, side="right") - 1, 0, bins - 1)
    where = (np.arange(x.shape[1]) * slices) // x.shape[1]
    flat = (np.arange(reps)[:, None] * slices + where[None, :]) * bins + which
    return np.bincount(flat.ravel(), minlength=reps * slices * bins).reshape(reps, slices, bins)


@pytest.fixture(scope="module")
def correlated() -> npt.NDArray[np.float64]:
    return ar1(0.8)  # correlated over ~9 samples: 2,000 values hold ~220 independent ones


@pytest.mark.parametrize("p", [0.5, 0.95, 0.99])
def test_percentile_intervals_cover_the_truth_of_correlated_data(
    correlated: npt.NDArray[np.float64], p: float
) -> None:
    counts = sliced_counts(correlated, SLICES)
    truth = NormalDist().inv_cdf(p)
    intervals = [quantile_interval(c, EDGES[1:], p, lower=EDGES[:-1]) for c in counts]
    coverage = sum(iv.contains(truth) for iv in intervals) / REPS
    assert COVERAGE[0] <= coverage <= COVERAGE[1], coverage
    assert sum(iv.trusted for iv in intervals) >= 0.9 * REPS


def test_the_same_data_taken_as_independent_samples_is_not_covered(
    correlated: npt.NDArray[np.float64],
) -> None:
    """One value per batch and no merging: the per-sample interval of the median that ignores correlation (what a
    per-token ITL interval is) covers far less than 95 %: the coverage test above can fail."""
    counts = sliced_counts(correlated[:40, :600], 600)
    naive = [
        quantile_interval(c, EDGES[1:], 0.5, lower=EDGES[:-1], max_batches=600, min_batches=600, merge_to=600)
        for c in counts
    ]
    assert sum(iv.contains(0.0) for iv in naive) / 40 < 0.75


def test_rate_intervals_cover_the_true_mean(correlated: npt.NDArray[np.float64]) -> None:
    """A rate is Σ amount / Σ seconds over slices: here the AR(1) series + 3 per 1 s sample, true rate 3."""
    starts = (np.arange(SLICES) * SAMPLES) // SLICES
    amounts = np.add.reduceat(correlated + 3.0, starts, axis=1)
    seconds = np.diff(np.append(starts, SAMPLES)).astype(np.float64)
    intervals = [ratio_interval(a, seconds) for a in amounts]
    coverage = sum(iv.contains(3.0) for iv in intervals) / REPS
    assert COVERAGE[0] <= coverage <= COVERAGE[1], coverage
    naive = [
        ratio_interval(a, np.ones(SAMPLES), max_batches=SAMPLES, min_batches=SAMPLES, merge_to=SAMPLES)
        for a in correlated[:100] + 3.0
    ]
    assert sum(iv.contains(3.0) for iv in naive) / 100 < 0.7


def test_an_interval_with_too_few_batches_or_values_is_not_trusted() -> None:
    few = quantile_interval(np.ones((4, 10), dtype=np.int64), np.arange(1.0, 11.0), 0.5)
    assert not few.trusted and "4 batches" in few.why
    tail = quantile_interval(np.ones((16, 10), dtype=np.int64), np.arange(1.0, 11.0), 0.99)
    assert not tail.trusted and "values" in tail.why
    assert ratio_interval([5.0], [1.0]).lo is None


def test_the_percentile_reads_as_the_histogram_does() -> None:
    """The point value is the pooled histogram's, read with HdrHistogram's target rule."""
    counts = np.zeros((8, 5), dtype=np.int64)
    counts[:, 1] = 10
    counts[:, 3] = 10
    iv = quantile_interval(counts, np.array([1.0, 2.0, 3.0, 4.0, 5.0]), 0.5)
    assert iv.value == 2.0
    assert iv.lo is not None and iv.hi is not None and iv.lo <= 2.0 <= iv.hi


def test_t_quantiles_match_the_table() -> None:
    for df, tabled in [(1, 12.706), (2, 4.303), (3, 3.182), (5, 2.571), (10, 2.228), (30, 2.042)]:
        assert t_quantile(0.975, df) == pytest.approx(tabled, rel=2e-3)


def test_a_verdict_on_an_interval_that_straddles_the_bound_is_undecided() -> None:
    straddles = Interval(99.0, 91.0, 107.0, batches=16, df=15, trusted=True)
    decision = decide(straddles, 100.0, "le", elapsed_s=10.0)
    assert decision.verdict == "undecided"
    assert decision.more_s is not None and decision.more_s > 100  # (8 / 1)^2 x 10 s in all
    assert decide(Interval(80.0, 75.0, 85.0, 16, df=15), 100.0, "le").verdict == "met"
    assert decide(Interval(120.0, 110.0, 130.0, 16, df=15), 100.0, "le").verdict == "missed"
    assert decide(Interval(40.0, 35.0, 45.0, 16, df=15), 30.0, "ge").verdict == "met"
    assert seconds_to_precision(Interval(100.0, 90.0, 110.0, 16, df=15), 0.05, 10.0) == pytest.approx(30.0)


def test_a_difference_is_called_only_when_its_interval_excludes_zero() -> None:
    same = difference(
        Interval(50.0, 49.0, 51.0, 16, df=15, trusted=True),
        Interval(50.4, 49.4, 51.4, 16, df=15, trusted=True),
    )
    assert same.lo is not None and same.hi is not None and same.lo < 0 < same.hi
    shifted = difference(
        Interval(53.0, 52.0, 54.0, 16, df=15, trusted=True),
        Interval(50.0, 49.0, 51.0, 16, df=15, trusted=True),
    )
    assert shifted.lo is not None and shifted.lo > 0


def test_repeats_that_disagree_widen_their_combined_interval() -> None:
    agree = combine([Interval(50.0, 49.0, 51.0, 16, df=15), Interval(50.2, 49.2, 51.2, 16, df=15)])
    apart = combine([Interval(50.0, 49.0, 51.0, 16, df=15), Interval(56.0, 55.0, 57.0, 16, df=15)])
    assert agree.half_width is not None and apart.half_width is not None
    assert agree.half_width < 1.0  # two agreeing repeats: narrower than either
    assert apart.lo is not None and apart.hi is not None and apart.lo < 50.0 and apart.hi > 56.0


def test_a_short_step_whose_slices_stay_correlated_is_merged_and_not_trusted() -> None:
    """Ten slices, the rate shifting half-way (a server drifting within the step): neighbouring batches are
    correlated, so they merge (five batches, a wider interval) and the interval is flagged."""
    drifting = ratio_interval([1.0] * 5 + [3.0] * 5, [1.0] * 10)
    assert drifting.batches == 5 and not drifting.trusted and drifting.why == "5 batches"
    steady = ratio_interval([1.0, 3.0] * 5, [1.0] * 10)
    assert steady.batches == 10 and steady.trusted


def test_values_crowded_into_the_last_slice_give_no_interval_or_an_untrusted_one() -> None:
    """A held step whose requests outlive its window: every one finishes after it, so all its values land in
    its last slice (``loadgen.metrics.slices``). The other batches hold nothing, their residuals nothing: the
    interval read from them was the histogram's bucket, trusted, and two 4-s probes of 104 streams of 5-s
    requests read decode p50 63.5 (61.6-66.7) and 73.6 (73.0-74.6). Kish's count of the batches' worth
    (weighted by their values) is what the multiplier and the trust go by."""
    rng = np.random.default_rng(3)
    upper = np.arange(1.0, 101.0)
    crowded = np.zeros((16, 100), dtype=np.int64)
    crowded[-1] = np.bincount(rng.integers(20, 80, 400), minlength=100)
    iv = quantile_interval(crowded, upper, 0.5)
    assert iv.lo is None and iv.hi is None and not iv.trusted and "batches' worth" in iv.why, iv

    # 70 % in the last slice, the rest spread: an interval, wider, not trusted
    mostly = np.zeros((16, 100), dtype=np.int64)
    mostly[-1] = np.bincount(rng.integers(20, 80, 700), minlength=100)
    for row in range(15):
        mostly[row] = np.bincount(rng.integers(20, 80, 20), minlength=100)
    iv = quantile_interval(mostly, upper, 0.5)
    assert iv.lo is not None and iv.hi is not None and not iv.trusted, iv
    assert "batches' worth" in iv.why and iv.df < 3, iv

    # spread evenly: trusted, its multiplier as before (the worth is the count of batches)
    even = np.stack([np.bincount(rng.integers(20, 80, 60), minlength=100) for _ in range(16)])
    iv = quantile_interval(even, upper, 0.5)
    assert iv.trusted and iv.df > 14, iv
