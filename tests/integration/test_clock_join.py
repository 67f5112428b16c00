"""Times that join other systems: the record header's ``clock`` (Unix ↔ monotonic), each step line's window
in Unix nanoseconds, and each per-request row's send time in Unix nanoseconds — one real run against the
simulator (a worker process over 127.0.0.1) with ``--save-requests-detail``, checked against the wall clock
this test reads around it."""

from __future__ import annotations

import csv
import time
from pathlib import Path
from typing import Any

import pytest

from loadgen.config import RampPlan
from loadgen.profile import parse_profile
from loadgen.record import read_record
from loadgen.run.config import RunConfig
from loadgen.run.detail import detail_path
from loadgen.run.engine import Engine
from loadgen.types import Target

PROFILE = """
name = "clock-small"
[[bucket]]
name = "short"
input = 16
output = 16
[sampling]
ignore_eos = true
"""


pytestmark = pytest.mark.sim("h200-llama8b", seed=11)  # the conftest's module-scoped simulator


def test_header_steps_and_rows_carry_unix_time(sim: Any, tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    profile = parse_profile(PROFILE, source="<clock-small>")
    plan = RampPlan((2, 3), step_s=1.0, warmup_s=0.2)
    config = RunConfig(
        target=Target(url=sim.url), profile=profile, plan=plan, out=str(out), save_requests_detail=True
    )
    wall0 = time.time_ns()
    engine = Engine(config)
    engine.start()
    outcome = engine.wait(40)
    wall1 = time.time_ns()
    assert outcome is not None and outcome.state == "finished", outcome
    last = engine.latest()  # no --metrics-port: the snapshots carry no bucket counts (nothing pays for them)
    assert last is not None and last.windows["run"].hist["ttft_ms"].pct.count > 0
    assert all(view.le == () for w in last.windows.values() for view in w.hist.values())
    record = read_record(out)
    clock = record.header["clock"]
    offset = clock["unix_minus_monotonic_ns"]
    assert offset == clock["unix_ns"] - clock["monotonic_ns"]
    assert wall0 <= clock["unix_ns"] <= wall1
    # this process's own offset now: the same host's clocks, a few ms apart at most (NTP slews slowly)
    assert abs((time.time_ns() - time.monotonic_ns()) - offset) < 50_000_000
    assert 0 <= clock["uncertainty_ns"] < 10_000_000
    assert len(record.steps) == 2
    for step in record.steps:
        assert step["window_t0_unix_ns"] == step["window_t0_ns"] + offset
        assert step["window_t1_unix_ns"] == step["window_t1_ns"] + offset
        assert wall0 < step["window_t0_unix_ns"] < step["window_t1_unix_ns"] < wall1
    with Path(detail_path(str(out))).open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows
    for r in rows:
        assert int(r["sent_unix_ns"]) == int(r["sent_ns"]) + offset
        step = record.steps[int(r["step"]) - 1]
        # sent inside its step's window, give or take the closing flush (as tests/integration/test_requests_detail.py)
        assert (
            step["window_t0_unix_ns"] - 1_000_000_000
            <= int(r["sent_unix_ns"])
            <= step["window_t1_unix_ns"] + 1_000_000_000
        )
