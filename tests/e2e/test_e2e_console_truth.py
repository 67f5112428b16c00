"""Issue 9's console checks on the real `ramp demo` in tmux, read on the screen and in the record:

- `↑` during the auto-ramp turns auto off (header and toast), and the level never changes by itself after;
- `o` twice: open loop at the closed loop's achieved rate with no cap, back to closed at the in-flight count
  (at least 1), each ended step's record line keeping its own mode, level and rate;
- after FINISHED (the plan ended, the console idles), `↑` starts a new step that the record gets.
"""

from __future__ import annotations

import re
from pathlib import Path

from tmux_harness import (
    header_line,
    level_of,
    measured_a_while,
    measuring,
    needs_tmux,
    ok_count,
    quit_run,
    ramp_session,
    record_lines,
    step_lines,
    wait_record,
)

pytestmark = needs_tmux

# A planned step is its warm-up, then its window, then its closing (its requests finishing). A key cuts a
# step only once it has counted a request and measured for a second (one with nothing sent, or cut within
# MIN_STEP_S of its start, is no step: Steps.end forgets it, and the record never gets it): the tests wait
# for the step's "ok" count on screen *and* for more than that second of window (the step's clock, or for
# a step without one a hold on the test's own clock: measured_a_while). Pressing at the first "ok" raced
# that second: a short reply done 0.3 s into the window and a key read at 0.9 s leave the record without
# the cut step (a clean-clone CI run's record held no step line 78 s after the key). A chat request of the
# demo takes about 1.5 s, some much longer. The key must reach the step before the plan ends it: the test
# presses it only while the step's clock shows at least KEY_MARGIN_S left (a loaded machine delays a key by
# up to a second or two), which 14 s windows leave room for (a loaded machine may take 5 s for the first
# request of 4 streams).
STEP_S, WARMUP_S = 14, 1
PLAN = ["--step-seconds", str(STEP_S), "--warmup", str(WARMUP_S)]
KEY_MARGIN_S = 4
# Longer than what is left of a planned step with its closing: a level still in the plan's hands would
# have moved. (The auto-ramp without a plan doubles every 30 s: that the header says "auto off" stands
# for it.)
LONGER_THAN_A_STEP_S = 18.0


def seconds_left(screen: str) -> int | None:
    """What the header's step clock says is left of the planned step ('0:07 left')."""
    m = re.search(r"(\d+):(\d\d) left", header_line(screen))
    return int(m.group(1)) * 60 + int(m.group(2)) if m else None


def found(pattern: str, screen: str) -> str:
    """The first group of ``pattern`` on ``screen`` (the caller waited for it to be there)."""
    match = re.search(pattern, screen)
    assert match is not None, f"{pattern!r} is not on the screen:\n{screen}"
    return match.group(1)


def plan_step_with_time_left(screen: str) -> bool:
    """The plan's first step, measuring at level 4 with a request done, auto on, and time for a key: its
    clock (whole seconds, rounded down) shows at most STEP_S - WARMUP_S - 3 s left, so its window has
    measured for more than 2 s (the screen shows an older moment than now, never a later one), more than
    MIN_STEP_S."""
    header = header_line(screen)
    left = seconds_left(screen)
    return (
        measuring(screen)
        and "auto on" in header
        and level_of(screen) == 4
        and bool(ok_count(screen))
        and left is not None
        and KEY_MARGIN_S <= left <= STEP_S - WARMUP_S - 3
    )


def steps_summary(record: Path) -> list[tuple[object, ...]]:
    return [(s["step"], s["mode"], s["level"], s["rate_rps"], s["ended_by"]) for s in step_lines(record)]


def test_up_takes_the_wheel_and_o_twice_keeps_each_step(tmp_path: Path) -> None:
    record = tmp_path / "keys.jsonl"
    # 5 is not a level of the plan: if the plan still drove, the level would go to 16 after a step.
    with ramp_session(["demo", "--steps", "4,16,32", *PLAN, "--out", str(record)]) as pane:
        pane.wait_for(
            plan_step_with_time_left,
            60,
            f"the plan's first step measuring at level 4 with a request done, auto on, {KEY_MARGIN_S} s left",
        )
        pane.keys("Up")
        pane.wait_for(
            lambda s: (
                level_of(s) == 5 and "auto off" in header_line(s) and "auto-ramp off — a to resume" in s
            ),
            10,
            "level 5, auto off in the header and the toast",
        )
        pane.hold(
            lambda s: level_of(s) == 5 and "closed loop 5" in header_line(s) and "auto off" in header_line(s),
            LONGER_THAN_A_STEP_S,
            "level 5 with auto off",
        )
        # The cut step's line is written once its counted requests are done (a demo reply of 2,048 tokens
        # takes about 12 s, longer on a loaded machine): wait for it, then only it has ended.
        wait_record(record, lambda r: bool(step_lines(r)), 60, "the cut level-4 step's line")
        assert [line[2] for line in steps_summary(record)] == [4]  # only the cut level-4 step has ended

        measured_a_while(pane, "level 5 measuring requests")
        pane.keys("o")
        # The header and the control line say what was chosen (the toast says it too, but it may wrap on
        # screen and it fades: the Pilot tests read it).
        opened = pane.wait_for(
            lambda s: "open loop λ" in header_line(s) and "cap none" in s,
            10,
            "open loop at the achieved rate, no cap (header and control line)",
        )
        rate = float(found(r"open loop λ ([\d.]+) req/s", header_line(opened)))
        assert 0.5 <= rate <= 30.0, f"5 streams of the demo's chat requests send about 3 req/s, not {rate}"
        measured_a_while(pane, "the open step measuring")

        pane.keys("o")
        closed = pane.wait_for(
            lambda s: re.search(r"closed loop \d+", header_line(s)) is not None,
            10,
            "closed loop at the in-flight count",
        )
        streams = int(found(r"closed loop (\d+)", header_line(closed)))
        assert streams >= 1
        assert level_of(closed) == streams and f"closed loop {streams}" in header_line(closed)
        assert "auto off" in header_line(closed)
        measured_a_while(pane, "the closed step measuring")
        quit_run(pane, record)

    check_each_step_kept(steps_summary(record), rate, streams)


def check_each_step_kept(steps: list[tuple[object, ...]], rate: float, streams: int) -> None:
    """↑ cut the plan's step, o twice kept each mode's own step, the last ended by the stop."""
    assert [line[0] for line in steps] == [1, 2, 3, 4]  # counted from 1, as the header
    assert steps[0] == (1, "closed", 4, None, "level")  # the plan's step cut by ↑
    assert steps[1] == (2, "closed", 5, None, "mode")  # the manual level, held until o
    number, mode, cap, asked, ended_by = steps[2]
    assert (mode, cap, ended_by) == ("open", 0, "mode")  # the open step keeps its own mode, no cap
    assert isinstance(asked, float) and abs(asked - rate) <= 0.01
    assert steps[3] == (4, "closed", streams, None, "stop")


def test_up_after_finished_starts_a_step(tmp_path: Path) -> None:
    record = tmp_path / "finished.jsonl"
    # No warm-up: at 1 stream the new step's first request is then its own (counted) one.
    plan = ["--steps", "1,2", "--step-seconds", "3", "--warmup", "0"]
    with ramp_session(["demo", *plan, "--out", str(record)]) as pane:
        idle = pane.wait_for(
            lambda s: "FINISHED" in header_line(s) and "idle" in header_line(s), 60, "FINISHED, idle"
        )
        assert level_of(idle) == 0 and "auto off" in header_line(idle)
        assert [line[2] for line in steps_summary(record)] == [1, 2]
        pane.keys("Up")
        started = pane.wait_for(
            lambda s: "RUNNING" in header_line(s) and "FINISHED" not in header_line(s) and level_of(s) == 1,
            10,
            "a new step at level 1",
        )
        assert "closed loop 1" in header_line(started)
        pane.wait_for(lambda s: measuring(s) and (ok_count(s) or 0) >= 1, 30, "the new step measuring")
        quit_run(pane, record)
    wait_record(record, lambda r: len(step_lines(r)) == 3, 5, "the new step's line")
    assert steps_summary(record)[2] == (3, "closed", 1, None, "stop")  # the third step, counted from 1
    assert record_lines(record)[-1]["kind"] == "end"
