"""The auto-ramp on the three-valued verdict (issue 31): it stops at a step missed on its intervals, and an
undecided step (its interval straddles a limit, whichever side its point value fell) stops nothing: it is not
met, never the best, and the level above decides."""

from __future__ import annotations

from loadgen.run.wheel import Wheel
from loadgen.snapshot import SLOVerdict

STRADDLING = ("TTFT p95 505 (470-540) ms vs 500 ms, ≈40 s more",)


def test_an_undecided_step_does_not_stop_the_auto_ramp_a_missed_one_does() -> None:
    missed = SLOVerdict(False, ("TTFT p95 800 ms > 500 ms",), on_intervals="missed")
    assert Wheel.ceiling_reached_by(missed, planned=False)
    assert Wheel.ceiling_reached_by(
        SLOVerdict(False, ("TTFT p95 800 ms > 500 ms",)), planned=False
    )  # no margins
    point_missed = SLOVerdict(
        False, ("TTFT p95 505 ms > 500 ms",), undecided=STRADDLING, on_intervals="undecided"
    )
    assert not Wheel.ceiling_reached_by(point_missed, planned=False)
    point_met = SLOVerdict(True, undecided=STRADDLING, on_intervals="undecided")
    assert not Wheel.ceiling_reached_by(point_met, planned=False)
    assert not Wheel.ceiling_reached_by(missed, planned=True)  # a plan's early stop is the plan's own
