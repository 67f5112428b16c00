"""Whether a run can go on (loadgen/run/vitals.py), on the controller with fake workers and clock: a server
ramp launched that exits under load fails the run at once, marked where it died, and unreachable (exit 3);
all workers dead fails it with the first one's words; a server that exits while the run is already over
changes nothing."""

from __future__ import annotations

from run_fakes import controller, tick


def test_a_launched_server_that_exits_fails_the_run_marked_and_unreachable() -> None:
    died: list[str] = []
    ctl, fleet, clock, _ = controller(server_exit=lambda: died[0] if died else None)
    ctl.start_load()
    fleet.ship(ok=3, in_flight=1)
    clock.advance(2.0)
    tick(ctl)
    ctl.vitals.check(clock())
    assert ctl.status.state == "running"
    died.append("the server ramp launched exited (code 137)")
    ctl.vitals.check(clock())
    assert (ctl.status.state, ctl.status.message) == ("failed", "the server ramp launched exited (code 137)")
    assert ctl.status.unreachable
    assert [note for _, note in ctl.status.marks] == ["the server ramp launched exited (code 137)"]


def test_all_workers_dead_fails_the_run_with_the_first_ones_words() -> None:
    ctl, fleet, clock, _ = controller(workers=2)
    ctl.start_load()
    fleet.fatal += ["worker 0: out of memory", "worker 1: killed"]
    fleet.alive.discard(0)
    ctl.vitals.check(clock())
    assert ctl.status.state == "running"  # one worker still carries the load
    fleet.alive.clear()
    ctl.vitals.check(clock())
    assert (ctl.status.state, ctl.status.message) == (
        "failed",
        "all load workers died: worker 0: out of memory",
    )
    assert not ctl.status.unreachable


def test_a_server_gone_after_the_run_ended_changes_nothing() -> None:
    ctl, _, clock, _ = controller(server_exit=lambda: "exited")
    ctl.start_load()
    ctl.status.stop()
    ctl.vitals.check(clock())
    assert ctl.status.state == "stopped" and ctl.status.marks == []
