"""A step closes for exactly the time its last counted request needs, and a lowering's settling is
recorded (issue 19, defect 10): ``closing_s`` is the time from the window's end to its last request's end
(not rounded up to the next snapshot tick: the load held ~0.5 s too long on average headless), and the
next step's ``settling_s`` is the time its warm-up waited for the surplus streams. Against the simulator's
fixed-timing engine; the requests' own end times come from ``--save-requests-detail``."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from loadgen.cli.commands import build_parser
from loadgen.cli.resolve import build_config
from loadgen.record import read_record
from loadgen.run.engine import Engine
from loadgen.sim.handle import ProcessSimHandle

PROFILE = """
name = "spread"
[[bucket]]
input = 16
output = { min = 20, max = 100 }
[sampling]
ignore_eos = true
"""
SLACK_S = 0.15  # the worker's "done" reaching the controller (polled every 10 ms while a step closes)


pytestmark = pytest.mark.sim("fast", seed=7, process=True)  # the conftest's module-scoped simulator


def test_closing_holds_exactly_as_long_as_needed_and_settling_is_recorded(
    sim: ProcessSimHandle, tmp_path: Path
) -> None:
    profile = tmp_path / "spread.toml"
    profile.write_text(PROFILE)
    out = tmp_path / "closing.jsonl"
    argv = ["run", sim.url, "--headless", "--profile", str(profile), "--steps", "8,8,8,2"]
    argv += ["--step-seconds", "2.5", "--warmup", "0.5", "--no-metrics", "--out", str(out)]
    argv += ["--save-requests-detail", "--seed", "6"]
    engine = Engine(build_config(build_parser().parse_args(argv), sim.url))  # headless: 1 Hz snapshots
    engine.start()
    outcome = engine.wait(90)
    assert outcome is not None and outcome.state == "finished", outcome
    steps = read_record(str(out)).steps
    with open(out.with_suffix(".requests.csv"), encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for step, after in zip(steps, steps[1:], strict=False):
        t0, t1 = step["window_t0_ns"], step["window_t1_ns"]
        last_end = max(int(r["end_ns"]) for r in rows if t0 <= int(r["sent_ns"]) < t1)
        needed = (last_end - t1) / 1e9
        assert needed > 0.0, step  # its requests ran past the window's end: it closed
        assert needed <= step["closing_s"] <= needed + SLACK_S, (step["level"], step["closing_s"], needed)
        # The next step begins once it has closed (and, after a lowering, settled), not a tick later.
        begun = (after["window_t0_ns"] - after["warmup_s"] * 1e9 - t1) / 1e9
        waited = step["closing_s"] + after.get("settling_s", 0.0)
        assert waited <= begun + 0.02 and begun <= waited + SLACK_S, (after["level"], begun, waited)
    # The 2-stream step waited for 6 of the 8 streams' requests to finish (20-100 tokens, 10 ms each).
    lowered = steps[-1]
    assert lowered["level"] == 2 and 0.0 < lowered["settling_s"] <= 1.1, lowered
    assert all(s.get("settling_s") == 0.0 for s in steps[:-1])
