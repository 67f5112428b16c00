"""The real `ramp demo` command in a real terminal: tmux runs it, send-keys steers it, capture-pane reads it.

This is what an operator over SSH does: start the demo, watch numbers arrive, raise the level with the
arrow key, see the level change and the numbers move, quit (confirming), and find the run's record on disk.
"""

from __future__ import annotations

import json
from pathlib import Path

from tmux_harness import (
    level_of,
    measured_a_while,
    measuring,
    needs_tmux,
    ok_count,
    quit_run,
    ramp_session,
)

pytestmark = needs_tmux


def test_ramp_demo_in_tmux(tmp_path: Path) -> None:
    record = tmp_path / "demo.jsonl"
    with ramp_session(["demo", "--level", "2", "--out", str(record)]) as pane:
        first = pane.wait_for(
            lambda s: "RUNNING" in s and level_of(s) == 2, 60, "the console to run at level 2"
        )
        assert "sim-llama-8b" in first  # the model discovered from the embedded simulator
        # Numbers arrive: requests complete at level 2 (the step's own count), once its warm-up (the demo's
        # 3 s: every step warms up, a key-driven or --level one too) is over and the step measures.
        measured_a_while(
            pane,
            "level 2 measuring requests",
            lambda s: measuring(s) and (ok_count(s) or 0) >= 2,
        )
        pane.keys("Up")
        # A new step begins at level 3: its count starts from zero, then grows.
        pane.wait_for(lambda s: level_of(s) == 3 and ok_count(s) == 0, 20, "a new step at level 3")
        raised = pane.wait_for(
            lambda s: level_of(s) == 3 and measuring(s) and (ok_count(s) or 0) >= 2,
            60,
            "numbers to move at 3, measuring",
        )
        assert "in flight" in raised
        quit_run(pane, record)  # quitting must finish the record (its end event)
    lines = [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines()]
    assert lines[0]["type"] == "header" and lines[0]["model"] == "sim-llama-8b"
    levels = [line["level"] for line in lines if line.get("type") == "step"]
    assert levels[:1] == [2]  # the level-2 step ended when the operator raised the level
    assert 3 in levels  # the level-3 step ended when the operator quit
    assert "OPENAI_API_KEY" not in record.read_text(encoding="utf-8")
