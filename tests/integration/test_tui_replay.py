"""``ramp replay RECORD``: the console opened on a finished record (``tests/fixtures/replay/run.jsonl``, a
real short ramp against the simulator written by ramp's recorder: see ``make_record.py`` there).

Driven with Textual's Pilot: ← → [ ] b move between the steps and each panel shows the step's own figures
as the record has them (read from the JSON lines, not from the code under test); steering keys only say
"read-only"; w shows the whole run (merged from the stored HDR histograms); an older record without the
1 Hz series still replays and says so; a damaged record is one line naming file and line, exit 2. Plus
a screen snapshot at 120x36 on step 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from textual.binding import Binding
from textual.pilot import Pilot
from textual.screen import ModalScreen
from tui_fakes import text_of

from loadgen.analysis.replay import load_replay
from loadgen.analysis.runs import AnalysisError
from loadgen.cli.commands import main
from loadgen.format import fmt_gib, fmt_ms
from loadgen.run.protocol import ControlCommand
from tui.actions import STEERING_ACTIONS
from tui.commands import steering_entries
from tui.console import ConsoleScreen
from tui.curve import CurvePanel
from tui.detail import StepDetail
from tui.histogram_panel import HistogramPanel
from tui.replay import READ_ONLY, ReplayApp, action_name
from tui.server import ServerPanel
from tui.status import StatusBar
from tui.steps import StepsPanel
from tui.throughput import NOT_RECORDED, ThroughputPanel

FIXTURE = Path(__file__).parents[1] / "fixtures" / "replay" / "run.jsonl"


def step_lines(path: Path = FIXTURE) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line["type"] == "step"]


class Watched(ReplayApp):
    """The replay app, keeping what it told the operator (its toasts)."""

    def __init__(self, path: str) -> None:
        super().__init__(load_replay(path))
        self.said: list[str] = []

    def notify(self, message: str, **kwargs: Any) -> None:
        self.said.append(message)
        super().notify(message, **kwargs)


async def settle(pilot: Pilot[None]) -> None:
    app = pilot.app
    assert isinstance(app, ReplayApp)
    app.redraw(force=True)
    await pilot.pause()


async def test_moving_between_steps_shows_each_steps_figures() -> None:
    lines = step_lines()
    assert len(lines) == 3
    app = Watched(str(FIXTURE))
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        ttft = app.query_one("#hist-left", HistogramPanel)
        steps = app.query_one(StepsPanel)
        status = app.query_one(StatusBar)

        def shows(position: int) -> None:
            line = lines[position]
            assert app.source.position == position
            assert f"p50 {fmt_ms(line['ttft_ms']['p50'])}" in text_of(ttft)
            assert f"n={line['ok']}" in text_of(ttft)
            assert f"step {position + 1}/3" in text_of(status) and "REPLAY" in text_of(status)
            assert f"▸{position + 1}" in text_of(steps) or f"★{position + 1}" in text_of(steps)
            assert f"closed loop {line['level']}" in text_of(status)

        shows(0)
        await pilot.press("right")
        await settle(pilot)
        shows(1)
        assert fmt_ms(lines[1]["ttft_ms"]["p50"]) != fmt_ms(lines[0]["ttft_ms"]["p50"])
        await pilot.press("right_square_bracket", "right")  # past the last step: stays there
        await settle(pilot)
        shows(2)
        await pilot.press("home", "b")  # the best step under the SLO
        await settle(pilot)
        assert app.source.position == app.source.run.best_step == 2
        await pilot.press("left")
        await settle(pilot)
        shows(1)

        await pilot.press("up", "space")
        await settle(pilot)
        assert app.said.count(READ_ONLY) == 2
        assert app.shown_snapshot is not None and app.shown_snapshot.level == lines[1]["level"]

        await pilot.press("w")  # the whole run: every step's requests, from the merged histograms
        await settle(pilot)
        assert "whole run" in text_of(ttft) and f"n={sum(line['ok'] for line in lines)}" in text_of(ttft)
        await pilot.press("w")  # back to the step's own window

        assert "mid-ramp note" in text_of(app.query_one(ThroughputPanel))
        assert "✕2" in text_of(app.query_one(CurvePanel))  # step 2 missed the SLO (its error rate)
        await pilot.press("left", "d")  # the step detail opens on the step looked at
        await pilot.pause()
        assert isinstance(app.screen, StepDetail) and app.screen.position == 0
        await pilot.press("right", "escape")  # moved in the details: the console follows
        await settle(pilot)
        shows(1)
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code in (0, None)


async def test_every_steering_key_and_palette_entry_says_read_only() -> None:
    """The replay refuses steering in one place: every key the live console steers with, and every
    steering entry of the palette, says read-only, opens no dialog and sends the record nothing."""
    keys = [
        key
        for binding in ConsoleScreen.BINDINGS
        if isinstance(binding, Binding) and action_name(binding.action) in STEERING_ACTIONS
        for key in binding.key.split(",")
    ]
    assert {"up", "space", "n", "a", "o", "k", "l"} <= set(keys)
    app = Watched(str(FIXTURE))
    sent: list[ControlCommand] = []
    app.source.send = sent.append  # type: ignore[method-assign]
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        for key in keys:
            await pilot.press(key)
        await pilot.pause()
        assert app.said.count(READ_ONLY) == len(keys)
        entries = steering_entries(app)
        for _, _, run in entries:
            run()
        await pilot.pause()
        assert app.said.count(READ_ONLY) == len(keys) + len(entries)
        assert not isinstance(app.screen, ModalScreen) and sent == []


async def test_an_older_record_without_the_series_still_replays(tmp_path: Path) -> None:
    old = tmp_path / "old.jsonl"
    out = []
    for raw in FIXTURE.read_text(encoding="utf-8").splitlines():
        line = json.loads(raw)
        line.pop("series", None)
        line.pop("started_s", None)
        out.append(json.dumps(line, separators=(",", ":")))
    old.write_text("\n".join(out) + "\n", encoding="utf-8")
    run = load_replay(str(old))
    assert not run.series and len(run.starts_s) == 3
    app = ReplayApp(run)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert NOT_RECORDED in text_of(app.query_one(ThroughputPanel))
        await pilot.press("right")
        await settle(pilot)
        ttft = app.query_one("#hist-left", HistogramPanel)
        assert f"p50 {fmt_ms(step_lines()[1]['ttft_ms']['p50'])}" in text_of(ttft)


def test_a_damaged_record_is_one_line_naming_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    lines = FIXTURE.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[2])["type"] == "step"
    step = json.loads(lines[2])
    step["hists"]["ttft_ms"] = "not-a-histogram"
    lines[2] = json.dumps(step, separators=(",", ":"))
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(["replay", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"ramp: {bad} line 3: a damaged step line") and "\n" not in err
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text(lines[0] + "\n{oops\n" + lines[2] + "\n", encoding="utf-8")
    with pytest.raises(AnalysisError, match=r"garbage.jsonl line 2: not JSON"):
        load_replay(str(garbage))
    assert main(["replay", str(tmp_path / "missing.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err


def replay_here(monkeypatch: pytest.MonkeyPatch) -> ReplayApp:
    monkeypatch.chdir(FIXTURE.parent)  # the header names the record as given: the same in every snapshot
    return ReplayApp(load_replay(FIXTURE.name))


def pressing(*keys: str) -> Any:
    async def run_before(pilot: Pilot[None]) -> None:
        await pilot.press(*keys)
        pilot.app.clear_notifications()  # a toast's fade is timing: left out of the picture
        await settle(pilot)

    return run_before


def test_replay_120x36(snap_compare: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    app = replay_here(monkeypatch)
    assert snap_compare(app, terminal_size=(120, 36), run_before=pressing("right"))


async def test_the_server_panel_shows_the_step_looked_at_and_its_gpu() -> None:
    """Issue 21: step 1 selected showed the last step's server TTFT, and "GPU0 mem n/a (no GPU source)" for
    a record with GPU figures (the header's conditions hold the GPU's size, each step line its use)."""
    lines = step_lines()
    header = json.loads(FIXTURE.read_text(encoding="utf-8").splitlines()[0])
    total_mib = header["server_conditions"]["gpu_mem_total_mib"]
    app = Watched(str(FIXTURE))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        server = app.query_one(ServerPanel)
        for position in (0, 1):
            if position:
                await pilot.press("right")
                await settle(pilot)
            shown = text_of(server)
            own = lines[position]["server"]
            assert f"step {position + 1} server TTFT p95 {fmt_ms(own['server_ttft_p95_ms'])}" in shown, shown
            assert "step 3 server" not in shown
            assert f"{fmt_gib(own['gpu_mem_used_max_mib'])}/{fmt_gib(total_mib)} GiB" in shown, shown
            assert "no GPU source" not in shown
