"""``--cancel-on-lower`` (issue 19, defect 2): the surplus streams cancelled when the level is lowered were
sent while the last step closed and count nowhere — their streamed tokens are not "taken back" from the
next step, which reads what the lower level reads alone. On the simulator's fixed-timing engine (the
"fast" preset: 50 ms TTFT, 10 ms a token, whatever the load), so the truth is known."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loadgen.cli.commands import build_parser
from loadgen.cli.resolve import build_config
from loadgen.exits import UsageError
from loadgen.record import read_record, step_from_line
from loadgen.run.config import RunOutcome
from loadgen.run.engine import Engine
from loadgen.sim.handle import ProcessSimHandle

OUTPUT = 60  # the mean of 20..100: streams out of step, so the surplus has streamed when it is cancelled
PROFILE = """
name = "fixed"
[[bucket]]
input = 16
output = { min = 20, max = 100 }
[sampling]
ignore_eos = true
"""
TTFT_S, TPOT_S = 0.050, 0.010


pytestmark = pytest.mark.sim("fast", seed=2, process=True)  # the conftest's module-scoped simulator


def run(sim: ProcessSimHandle, tmp_path: Path, steps: str, *extra: str) -> tuple[RunOutcome, list[Any]]:
    profile = tmp_path / "fixed.toml"
    profile.write_text(PROFILE)
    out = tmp_path / f"run-{steps.replace(',', '-')}.jsonl"
    argv = ["run", sim.url, "--profile", str(profile), "--steps", steps, "--step-seconds", "4"]
    argv += ["--warmup", "0.5", "--out", str(out), "--no-metrics", "--headless", "--seed", "4", *extra]
    engine = Engine(build_config(build_parser().parse_args(argv), sim.url))
    engine.start()
    outcome = engine.wait(90)
    assert outcome is not None and outcome.state == "finished", outcome
    return outcome, read_record(str(out)).steps


def test_the_lowered_step_reads_as_the_level_alone(sim: ProcessSimHandle, tmp_path: Path) -> None:
    _, alone_lines = run(sim, tmp_path, "4")
    alone = step_from_line(alone_lines[0])
    outcome, lines = run(sim, tmp_path, "32,4", "--cancel-on-lower")
    high, low = (step_from_line(line) for line in lines)
    assert (high.level, low.level) == (32, 4)
    assert low.stats.cancelled == 0 and low.clean  # the surplus was sent in A's closing: counted nowhere
    # The first token comes at the TTFT, each next one a TPOT later: 4 streams read about 375 tok/s.
    truth = 4 * OUTPUT / (TTFT_S + (OUTPUT - 1) * TPOT_S)
    a, b = alone.stats.out_tok_s, low.stats.out_tok_s
    assert a is not None and b is not None
    assert abs(b - a) <= 0.03 * a, (a, b)
    assert abs(b - truth) <= 0.03 * truth, (b, truth)
    # Its 1 Hz series within its window never reads 0: no tokens are taken back from it.
    series = lines[1]["series"]
    t0 = (low.window_t0_ns - outcome_t0(lines)) / 1e9
    inside = [
        v
        for t, v in zip(series["t_s"], series["out_tok_s"], strict=True)
        if t0 + 1.0 <= t <= t0 + low.window_s
    ]
    assert inside and min(inside) > 0.5 * truth, (inside, truth)


def outcome_t0(lines: list[Any]) -> int:
    """The run's clock origin in the host's monotonic ns, from the first step's start on the run's clock."""
    first = lines[0]
    return int(first["window_t0_ns"] - (first["started_s"] + first["warmup_s"]) * 1e9)


def test_cancel_on_lower_in_open_loop_is_refused() -> None:
    argv = ["run", "http://127.0.0.1:9", "--open-loop", "--steps", "4,2", "--cancel-on-lower"]
    with pytest.raises(UsageError, match="--cancel-on-lower .* open loop"):
        build_config(build_parser().parse_args(argv), "http://127.0.0.1:9")
