"""``ramp selftest``'s first-token read delay, joined from the workers' traces and the simulator's truth: a
trace holds the worker's window cuts beside its requests (``ramp selftest`` crashed on them, KeyError
'request_id')."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadgen.cli.selftest import read_delays

MS = 1_000_000


def test_window_cuts_in_a_trace_are_not_requests(tmp_path: Path) -> None:
    lines: list[dict[str, object]] = [{"cut": 0, "at_ns": 5 * MS}]
    truth = []
    for i in range(10):
        sent = 100 * MS + i * MS
        stamp = sent + 60 * MS + i * MS // 10  # read 0.0, 0.1 ... 0.9 ms after the write
        lines.append({"request_id": f"r{i}", "intended_ns": sent, "sent_ns": sent, "first_token_ns": stamp})
        truth.append({"request_id": f"r{i}", "arrival_ns": sent + MS, "first_token_ns": sent + 60 * MS})
    lines.append({"request_id": "r0", "intended_ns": 1, "sent_ns": 1, "first_token_ns": 2})  # before it
    lines.append({"cut": -1, "at_ns": 900 * MS})
    (tmp_path / "trace-0.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    p50, p99 = read_delays(truth, 100 * MS, str(tmp_path))
    assert p50 == pytest.approx(0.45) and p99 == pytest.approx(0.891)
