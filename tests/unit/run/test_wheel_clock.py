"""The wheel reads time only through the controller's clock (``run/wheel.py`` on ``Steps.clock``): on a fake
clock, how long a lowering settled and when the controller looks next are the fake clock's, not the machine's.
"""

from __future__ import annotations

from run_fakes import FakeClock, FakeFleet, S, controller, tick

from loadgen.run.controller import Controller
from loadgen.run.protocol import SetLevel
from loadgen.run.wheel import WAITING_POLL_NS


def _measure(ctl: Controller, fleet: FakeFleet, clock: FakeClock, seconds: int, in_flight: int) -> None:
    for _ in range(seconds):
        clock.advance(1.0)
        fleet.ship(ok=2, in_flight=in_flight)
        tick(ctl)


def test_a_settling_step_line_says_how_long_it_settled_on_the_run_s_clock() -> None:
    ctl, fleet, clock, _ = controller(plan=None, level=8)
    ctl.start_load()
    _measure(ctl, fleet, clock, 2, in_flight=8)
    cut_window, lowered_at = fleet.window[0], clock()
    ctl.command(SetLevel(2))
    assert ctl.wheel.phase() == "settling"
    clock.advance(0.5)
    fleet.ship(ok=6, in_flight=2, window=cut_window, closed=True)  # the surplus streams finish
    tick(ctl)
    while ctl.wheel.phase() == "settling":  # the run's clock moves on until the wheel sees them gone
        clock.advance(0.5)
        fleet.ship(ok=0, in_flight=2)
        tick(ctl)
    settled_s = (clock() - lowered_at) / S
    assert ctl.wheel.phase() == "measure" and ctl.steps.level == 2 and settled_s >= 1.0
    _measure(ctl, fleet, clock, 3, in_flight=2)
    settled_window = fleet.window[0]
    ctl.command(SetLevel(4))  # cut the settled step: its line is written once its requests are done
    clock.advance(0.5)
    fleet.ship(ok=2, in_flight=0, window=settled_window, closed=True)
    tick(ctl)
    assert [(s.level, s.settling_s) for s in ctl.steps.summaries] == [(8, 0.0), (2, settled_s)]


def test_while_a_lowering_settles_the_controller_looks_again_on_the_run_s_clock() -> None:
    ctl, fleet, clock, _ = controller(plan=None, level=8)
    ctl.start_load()
    _measure(ctl, fleet, clock, 2, in_flight=8)
    ctl.command(SetLevel(2))
    assert ctl.wheel.phase() == "settling"
    clock.advance(0.25)
    assert ctl.wheel.next_timer_ns() == clock() + WAITING_POLL_NS
    assert WAITING_POLL_NS < S
