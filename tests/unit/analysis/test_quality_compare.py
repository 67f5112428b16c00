"""``ramp compare`` with answer probes: a run whose answers agree less than the first run's is never called
"better" without saying so, and a line says "B faster, but answers changed: agreement 0.62 (0.55–0.69) vs
1.00"; runs without probes read as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from analysis_fakes import Fig, run_compare, write_record

from loadgen.analysis.quality import answers_changed, pooled


def with_quality(path: Path, agrees: list[tuple[float, float, float] | None]) -> Path:
    """The record at ``path`` with its step lines' quality as (agree, lo, hi), in order (None: no probes)."""
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    steps = iter(agrees)
    for line in lines:
        if line.get("type") == "step":
            q = next(steps)
            if q is not None:
                line["quality"] = {"n": 40, "agree": q[0], "agree_lo": q[1], "agree_hi": q[2], "errors": 0}
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_faster_but_answers_changed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = with_quality(
        write_record(tmp_path / "a.jsonl", [Fig(level=4, out_tok_s=400.0), Fig(level=8, out_tok_s=700.0)]),
        [(1.0, 0.91, 1.0), (1.0, 0.91, 1.0)],
    )
    b = with_quality(
        write_record(tmp_path / "b.jsonl", [Fig(level=4, out_tok_s=400.0), Fig(level=8, out_tok_s=900.0)]),
        [(1.0, 0.91, 1.0), (0.62, 0.55, 0.69)],
    )
    code, out, _ = run_compare(capsys, str(a), str(b))
    assert code == 0, out
    assert "! B faster, but answers changed: agreement 0.62 (0.55–0.69) vs 1.00" in out
    eight = out[out.index("8 ") :] if "8 " in out else out
    throughput = next(line for line in out.splitlines() if line.startswith("out tok/s") and "900" in line)
    assert throughput.rstrip().endswith("better, but answers changed"), throughput
    assert "answer agreement" in eight
    assert out.count("answers changed:") == 1  # level 4 agreed: no line there
    code, out, _ = run_compare(capsys, str(a), str(b), "--format", "json")
    levels = {level["level"]: level for level in json.loads(out)["levels"]}
    assert [r["answers_changed"] for r in levels[8]["runs"]] == [False, True]
    assert [r["answers_changed"] for r in levels[4]["runs"]] == [False, False]
    marks = {m["metric"]: m["deltas"][1]["mark"] for m in levels[8]["metrics"]}
    assert marks["out_tok_s"] == "better, but answers changed" and marks["quality_agree"] == "worse"


def test_runs_without_probes_read_as_before(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_record(tmp_path / "a.jsonl", [Fig(level=4, out_tok_s=400.0)])
    b = write_record(tmp_path / "b.jsonl", [Fig(level=4, out_tok_s=900.0)])
    code, out, _ = run_compare(capsys, str(a), str(b))
    assert code == 0 and "answers changed" not in out and "answer agreement" not in out
    code, out, _ = run_compare(capsys, str(a), str(b), "--format", "json")
    assert all("quality" not in run for level in json.loads(out)["levels"] for run in level["runs"])


def test_pooling_and_the_change_rule() -> None:
    one = {"n": 40, "agree": 0.62, "agree_lo": 0.55, "agree_hi": 0.69}
    assert pooled([one]) == one
    both = pooled([one, {"n": 60, "agree": 1.0, "agree_lo": 0.94, "agree_hi": 1.0}])
    assert both is not None and both["n"] == 100 and both["agree"] == pytest.approx(0.848)
    assert pooled([{"n": 0, "agree": None}]) is None and pooled([]) is None
    full = {"n": 40, "agree": 1.0, "agree_lo": 0.91, "agree_hi": 1.0}
    assert answers_changed(full, one) and not answers_changed(one, full) and not answers_changed(full, full)
    assert not answers_changed(full, {"n": 40, "agree": 0.95, "agree_lo": 0.83, "agree_hi": 1.0})  # within
    assert not answers_changed(None, one) and answers_changed(full, {"n": 3, "agree": 0.5})
