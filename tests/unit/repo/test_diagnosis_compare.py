"""``ramp compare`` carries each run's diagnosis per level: a line in the text, a key in the JSON; a record
written before diagnoses existed shows none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from analysis_fakes import Fig, run_compare, write_record


def with_diagnoses(path: Path, kinds: list[str]) -> Path:
    """The record at ``path`` with its step lines diagnosed as ``kinds``, in order."""
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    steps = iter(kinds)
    for line in lines:
        if line.get("type") == "step":
            line["diagnosis"] = {
                "kind": next(steps),
                "confidence": "high",
                "evidence": ["x"],
                "first_checks": ["y"],
            }
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_compare_says_each_runs_limit_per_level(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ramp = [Fig(level=4, out_tok_s=400.0), Fig(level=8, out_tok_s=700.0)]
    a = with_diagnoses(write_record(tmp_path / "a.jsonl", ramp), ["none", "queueing"])
    b = with_diagnoses(write_record(tmp_path / "b.jsonl", ramp), ["none", "kv_cache"])
    old = write_record(tmp_path / "old.jsonl", ramp)
    code, out, _ = run_compare(capsys, str(a), str(b), "--format", "json")
    assert code == 0
    eight = next(level for level in json.loads(out)["levels"] if level["level"] == 8)
    assert [run["diagnosis"] for run in eight["runs"]] == ["queueing", "kv_cache"]
    code, out, _ = run_compare(capsys, str(a), str(b), str(old))
    assert code == 0
    assert "limit (diagnosis): A queueing · B kv_cache · C n/a" in out
    assert "limit (diagnosis): A none · B none · C n/a" in out
    code, out, _ = run_compare(capsys, str(old), str(old), "--format", "json")
    assert all("diagnosis" not in run for level in json.loads(out)["levels"] for run in level["runs"])
