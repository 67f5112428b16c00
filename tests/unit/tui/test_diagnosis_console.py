"""The console shows the diagnosis and the TTFT split: a "limit" column in the steps table (giving way first
on a narrow panel, absent when no step has a diagnosis), and in the step detail (``d``) the limit's line
and the split's means with the server's bucket for its TTFT p95."""

from __future__ import annotations

import io
from dataclasses import replace

from rich.console import Console
from tui_fakes import judged_steps, make_snapshot

from loadgen.config import SLO
from tui.step_report import step_report
from tui.steps import StepsPanel, fitting_columns, render_steps_table

QUEUEING = {
    "kind": "queueing",
    "confidence": "high",
    "evidence": ["12 waiting", "TTFT p95 ×4 since 32 streams", "decode flat"],
    "first_checks": ["max-num-seqs (the batch limit)", "KV capacity", "queueing policy, request length mix"],
}
SPLIT = {
    "client": {"n": 40, "mean_ms": 298.6, "p50_ms": 290.0, "p95_ms": 400.0},
    "server": {"n": 40, "mean_ms": 295.6, "p95_ms": 380.0, "p95_bucket_ms": [250.0, 500.0]},
    "queue": {"n": 40, "mean_ms": 288.5},
    "prefill": {"n": 40, "mean_ms": 7.06},
    "outside": {"mean_ms": 3.0},
    "method": "...",
}


def text(renderable: object, width: int = 200) -> str:
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return console.export_text()


def test_the_steps_table_has_a_limit_column_only_once_steps_are_diagnosed() -> None:
    plain = judged_steps()
    assert "limit" not in [c.header for c in fitting_columns(plain, None)]
    diagnosed = tuple(replace(s, diagnosis=QUEUEING) for s in plain)
    assert "limit" in [c.header for c in fitting_columns(diagnosed, None)]
    drawn = text(render_steps_table(diagnosed, 2, 20, width=200), 200)
    assert "limit" in drawn.splitlines()[0] and "queueing" in drawn
    # on a narrow panel it gives way before the core columns
    narrow = [c.header for c in fitting_columns(diagnosed, 70)]
    assert "limit" not in narrow and "TTFT p95" in narrow


def test_the_step_detail_says_the_limit_and_the_split() -> None:
    step = replace(judged_steps()[0], diagnosis=QUEUEING, ttft_split=SPLIT)
    shown = " ".join(text(step_report(step, SLO(), {}, best=False)).split())
    assert (
        "limit queueing — 12 waiting, TTFT p95 ×4 since 32 streams, decode flat · check max-num-seqs" in shown
    )
    assert "client 299 ms = server 296 ms (queue 288 ms + prefill 7.06 ms) + outside 3.00 ms" in shown
    assert "server TTFT p95 in its bucket 250 ms–500 ms" in shown
    bare = " ".join(text(step_report(judged_steps()[0], SLO(), {}, best=False)).split())
    assert "TTFT split" not in bare and "limit" not in bare


def test_the_steps_panel_title_says_the_last_steps_limit() -> None:
    steps = judged_steps()
    panel = StepsPanel()
    panel.update_titles(make_snapshot(steps=steps, best_step=0), view=None)  # type: ignore[arg-type]
    assert str(panel.border_title) == "Ramp steps"
    steps = (*steps[:-1], replace(steps[-1], diagnosis=QUEUEING))
    panel.update_titles(make_snapshot(steps=steps, best_step=0), view=None)  # type: ignore[arg-type]
    assert str(panel.border_title).startswith("Ramp steps · Limit: queueing — 12 waiting, TTFT p95 ×4")
    assert str(panel.border_title).endswith("· check max-num-seqs (the batch limit), KV capacity")
