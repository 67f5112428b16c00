"""A level's repeats are the ``--repeat`` steps of one pass (issue 19, defect 6): two visits to a level in one
ramp are two passes, never pooled — in ``levels_of`` (compare, report) and in the console's repeats cell."""

from __future__ import annotations

from analysis_fakes import summary_of

from loadgen.analysis.runs import LevelKey, levels_of, passes_of
from loadgen.snapshot import SLOVerdict, StepSummary, WindowStats
from tui.steps import repeats_text


def step(index: int, level: int, repeat: int, out_tok_s: float, carried: float = 0.0) -> StepSummary:
    stats = WindowStats(window="step", out_tok_s=out_tok_s)
    return summary_of(stats, SLOVerdict(True), index, level=level, repeat=repeat, carried_share=carried)


# --steps 4,8,4 --repeat 2: 4 (twice), 8 (twice), 4 again (twice)
RAMP = [
    step(0, 4, 0, 400.0),
    step(1, 4, 1, 420.0),
    step(2, 8, 0, 800.0),
    step(3, 8, 1, 820.0),
    step(4, 4, 0, 300.0),
    step(5, 4, 1, 310.0),
]


def test_each_visit_to_a_level_is_its_own_pass() -> None:
    four, eight = LevelKey("closed", 4.0), LevelKey("closed", 8.0)
    assert passes_of(RAMP) == {four: [[0, 1], [4, 5]], eight: [[2, 3]]}
    levels = levels_of(RAMP)
    assert levels[four].at == (0, 1) and levels[four].other_passes == 2 and levels[four].left_out == 0
    assert levels[eight].at == (2, 3) and levels[eight].other_passes == 0


def test_a_pass_with_no_clean_step_gives_way_to_the_next() -> None:
    cut_first = [step(0, 4, 0, 100.0, carried=0.4), step(1, 8, 0, 800.0), step(2, 4, 0, 400.0)]
    four = levels_of(cut_first)[LevelKey("closed", 4.0)]
    assert four.at == (2,) and four.left_out == 0 and four.other_passes == 1


def test_the_console_shows_the_repeats_of_a_steps_own_pass_only() -> None:
    assert repeats_text(RAMP, 1) == "×2: 410 (400–420) tok/s"
    assert repeats_text(RAMP, 4) == ""  # the second visit to 4 streams: not a repeat of the first
