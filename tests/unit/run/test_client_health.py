"""The client's own health, which decides the client-bound flag: CPU shares over spans long enough to
mean something, and a worker starved of CPU by other processes told apart from a busy one."""

from __future__ import annotations

import os
import sys
import time

import pytest

from loadgen.run.health import BoundJudge, HealthSampler, runqueue_wait_ns


def _spin(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


class Clocks:
    """The process's CPU time and the wall clock, moved by the test: a loaded machine cannot stretch them."""

    def __init__(self) -> None:
        self.cpu_s = self.wall_s = 0.0

    def spin(self, cpu_s: float, wall_s: float) -> None:
        self.cpu_s += cpu_s
        self.wall_s += wall_s


def test_cpu_share_is_taken_over_a_span_not_per_delta() -> None:
    clocks = Clocks()
    h = HealthSampler(span_s=0.05, cpu_clock=lambda: clocks.cpu_s, wall_clock=lambda: clocks.wall_s)
    clocks.spin(0.1, 0.1)
    first = h.take()["cpu_pct"]
    assert first > 50.0  # this thread did nothing but spin
    # A delta shipped right after: too short a span to judge, the last figure stands (no 0 %/100 % flicker)
    clocks.spin(0.0, 0.001)
    assert h.take()["cpu_pct"] == first
    # Once a span has passed, the share is taken again, over that span only: idle now, it reads 0 %.
    clocks.spin(0.0, 0.05)
    assert h.take()["cpu_pct"] == 0.0


def test_the_cpu_share_is_read_from_the_real_clocks_by_default() -> None:
    h = HealthSampler(span_s=0.0)
    _spin(0.05)
    assert 0.0 < h.take()["cpu_pct"] <= 100.0 * max(1, os.cpu_count() or 1)


def test_a_fresh_worker_reads_no_cpu_share_before_a_full_span() -> None:
    h = HealthSampler()
    _spin(0.02)
    assert h.take()["cpu_pct"] == 0.0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="schedstat is Linux's")
def test_runqueue_wait_is_read_on_linux() -> None:
    a = runqueue_wait_ns()
    _spin(0.01)
    b = runqueue_wait_ns()
    assert a is not None and b is not None and b >= a
    h = HealthSampler(span_s=0.01)
    _spin(0.02)
    assert 0.0 <= h.take()["runq_wait_pct"] <= 100.0


def _bound_reason(health: dict[str, float]) -> str | None:
    return BoundJudge.of([health]).reason()


def test_bound_reasons_name_the_cause() -> None:
    quiet = {"cpu_pct": 20.0, "lag_n": 20.0, "lag_over": 0.0, "loop_lag_ms_max": 1.0, "runq_wait_pct": 50.0}
    assert _bound_reason(quiet) is None
    busy = _bound_reason({"cpu_pct": 97.0, "lag_n": 20.0, "lag_over": 0.0})
    assert busy == "load worker at 97% CPU: add --workers"
    starved = _bound_reason(
        {"cpu_pct": 8.0, "lag_n": 20.0, "lag_over": 9.0, "loop_lag_ms_max": 740.0, "runq_wait_pct": 45.0}
    )
    assert starved is not None and "waited for a CPU 45%" in starved and "other processes" in starved
    assert "in 45% of samples, max 740 ms" in starved
    slow = _bound_reason({"cpu_pct": 8.0, "lag_n": 20.0, "lag_over": 3.0, "loop_lag_ms_max": 12.0})
    assert slow == "worker event loop lag over 5 ms in 15% of samples, max 12 ms: timings may read high"


def test_a_step_is_judged_on_all_its_lag_samples() -> None:
    """One 7 ms hiccup in an 8 s step (160 samples) is not a client-bound step; lag in 2 % of them is."""
    judge = BoundJudge()
    for i in range(32):  # 32 reports of 5 samples: 160 samples
        judge.add({"cpu_pct": 10.0, "lag_n": 5.0, "lag_over": 1.0 if i == 7 else 0.0, "loop_lag_ms_max": 7.0})
    assert judge.reason() is None
    for _ in range(3):
        judge.add({"cpu_pct": 10.0, "lag_n": 5.0, "lag_over": 1.0, "loop_lag_ms_max": 30.0})
    assert judge.over == 4 and judge.n == 175
    assert (
        judge.reason() == "worker event loop lag over 5 ms in 2% of samples, max 30 ms: timings may read high"
    )


def test_the_worker_counts_lag_samples_over_the_threshold() -> None:
    h = HealthSampler()
    h.lags_ms = [0.1, 4.9, 5.1, 80.0]
    out = h.take()
    assert out["lag_n"] == 4 and out["lag_over"] == 2 and out["loop_lag_ms_max"] == 80.0
    assert h.take()["lag_n"] == 0  # each report counts its own samples
