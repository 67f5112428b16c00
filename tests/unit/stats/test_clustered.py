"""A closed loop's rate read per stream (``loadgen.stats.clustered``, issue 31): each stream of a closed loop
is a renewal process, and how many requests it starts in a window varies by about sqrt(W σ²/μ³) requests,
a variance spread evenly over the window that time slices shorter than a request hide. The streams' totals
show it: on simulated closed loops with a known rate, the widened interval covers the truth about 95 % of
the time where the narrow one does not."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from loadgen.stats import Interval, clustered

MEAN_S, CV, WINDOW_S, TOKENS = 0.7, 0.3, 5.0, 32


def closed_loop_windows(streams: int, windows: int, seed: int = 5) -> tuple[npt.NDArray[np.float64], float]:
    """Per window and stream, the output tokens of the requests it started in [0, W): each stream a renewal
    process of gamma-distributed request times (mean 0.7 s, CV 0.3) in equilibrium (started 20 s
    earlier); every request 32 tokens. Returns (windows × streams amounts, the true rate in tok/s)."""
    rng = np.random.default_rng(seed)
    shape = 1 / CV**2
    draws = rng.gamma(shape, MEAN_S / shape, size=(windows, streams, 48))
    starts = np.cumsum(draws, axis=2) - 20.0
    counts = ((starts >= 0) & (starts < WINDOW_S)).sum(axis=2)
    return counts * float(TOKENS), streams * TOKENS / MEAN_S


def narrow(rate: float) -> Interval:
    """A rate's interval that says ±0.1 % (time slices blind to the streams' renewal spread)."""
    return Interval(rate, rate * 0.999, rate * 1.001, batches=10, n=10, df=9, trusted=True)


def test_a_closed_loops_rate_read_per_stream_covers_its_truth() -> None:
    for streams in (16, 64):
        amounts, truth = closed_loop_windows(streams, 400)
        covered = narrow_covered = 0
        widths = []
        for a in amounts:
            rate = a.sum() / WINDOW_S
            iv = clustered(narrow(rate), a)
            assert iv.lo is not None and iv.hi is not None
            covered += iv.lo <= truth <= iv.hi
            narrow_covered += rate * 0.999 <= truth <= rate * 1.001
            widths.append(iv.rel_half_width)
        assert 0.92 <= covered / len(amounts) <= 0.98, (streams, covered)
        assert narrow_covered / len(amounts) < 0.2
        # the renewal theory's width: 1.96 sqrt(W σ²/μ³) / (W/μ) / sqrt(streams)
        expected = (
            1.96 * np.sqrt(WINDOW_S * (CV * MEAN_S) ** 2 / MEAN_S**3) / (WINDOW_S / MEAN_S) / np.sqrt(streams)
        )
        assert 0.75 * expected <= float(np.median(widths)) <= 1.25 * expected, (
            streams,
            np.median(widths),
            expected,
        )


def test_it_only_widens_and_needs_enough_streams() -> None:
    wide = Interval(100.0, 80.0, 120.0, batches=10, n=10, df=9, trusted=True)
    assert clustered(wide, [19.0, 21.0] * 7) is wide  # the streams' spread is narrower: unchanged
    few = clustered(narrow(100.0), [5.0, 50.0, 5.0, 50.0, 5.0, 50.0, 5.0])  # 7 streams: too few to read
    assert few.lo == 99.9 and few.hi == 100.1
    spread = clustered(narrow(100.0), [5.0, 50.0] * 8)
    assert spread.lo is not None and spread.hi is not None and spread.df == 15
    assert spread.lo < 99.9 and spread.hi > 100.1 and abs((spread.lo + spread.hi) / 2 - 100.0) < 1e-9
    open_above = Interval(100.0, 90.0, None)
    assert clustered(open_above, [5.0, 50.0] * 8) is open_above  # nothing to widen
