"""Text from outside is data, never markup (issue 21): a server's error bodies, a dataset's or profile's
names, a tag, a mark, a launched server's log. Rich rejects ``[/]`` and ``[/INST]`` (the Llama-2 chat tag a
server may quote back) with a MarkupError, reads ``[bold]`` as a style and Textual reads ``[@click=...]`` as
an action: each must reach the screen as the characters it is, in every panel, detail view and title, live
and in ``ramp replay``, at every size."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from textual.pilot import Pilot
from tui_fakes import FakeEngine, judged_steps, make_snapshot, server_telemetry

from loadgen.analysis.replay import load_replay
from loadgen.snapshot import ClientHealth, ReplicaStats, Snapshot
from tui.app import RampApp
from tui.replay import ReplayApp
from tui.screenshot import svg_text as screen_chars

REPLAY_FIXTURE = Path(__file__).parents[1] / "fixtures" / "replay" / "run.jsonl"

# Each one breaks a different way when read as markup.
HOSTILE = ("[/]", "[/INST]", "[bold red]loud", "[@click=app.quit]bye[/]", "[link=x]", "\\[esc]")
BODY = " ".join(HOSTILE)


def tag(name: str) -> str:
    """A short string that markup would eat (``[i]`` becomes a style) followed by one it rejects."""
    return f"[i]{name}[/INST]"


FIELDS = ("model", "url", "profile", "runtime", "error", "latest", "warning", "mark", "log", "reason")


def hostile_snapshot() -> Snapshot:
    """Every string field of a snapshot that comes from a server, a dataset, a profile, a tag or a mark."""
    hostile_steps = tuple(
        replace(
            s,
            marks=(f"mark {BODY}",),
            bound_reason=f"bound {BODY}" if s.client_bound else "",
            latest_errors={"http_status": f"HTTP 400 {BODY}"},
            idle_replicas=(f"replica {BODY}",),
            ratelimit={"remaining-tokens": BODY},
        )
        for s in judged_steps()
    )
    server = replace(
        server_telemetry(),
        runtime=tag("runtime"),
        sources={"vllm /metrics": f"HTTP 500 {BODY}", f"src {HOSTILE[1]}": "ok"},
    )
    return make_snapshot(
        model=tag("model"),
        url=f"http://127.0.0.1:8000/{tag('url')}",
        profile=tag("profile"),
        runtime_version=HOSTILE[1],
        arrival="poisson",
        steps=hostile_steps,
        recent_errors=(f"{tag('error')} {BODY}", f"stream cut {HOSTILE[1]}"),
        latest_errors={"http_status": f"{tag('latest')} {BODY}", "stream_cut": f"cut {HOSTILE[0]}"},
        warnings=(f"{tag('warning')} {BODY}",),
        server=server,
        marks=((75.0, tag("mark")),),
        message=f"failed {BODY}",
        server_log=(f"{tag('log')} {BODY}",),
        notices=((1, f"notice {BODY}"),),
        health=ClientHealth(
            loop_lag_ms_p99=48.0, cpu_pct=(99.0,), client_bound=True, reason=f"{tag('reason')} {BODY}"
        ),
        replicas=(ReplicaStats(name="A", url=f"http://a/{HOSTILE[1]}", requests=3, ok=3),),
        record_path=f"runs/{HOSTILE[1]}.jsonl",
    )


def svg_text(app: RampApp | ReplayApp) -> str:
    """The screen's characters, row by row."""
    return screen_chars(app.export_screenshot())


async def open_everything(pilot: Pilot) -> list[str]:
    """Draw the console, each tab, the step and errors views and help; return each screen's SVG text."""
    app = pilot.app
    assert isinstance(app, RampApp)
    app.redraw(force=True)
    await pilot.pause()
    seen = [svg_text(app)]
    for key in ("1", "2", "3", "4", "5", "6", "d", "escape", "e", "escape", "question_mark", "escape"):
        await pilot.press(key)
        await pilot.pause()
        seen.append(svg_text(app))
    return seen


# What each size must show as characters: the errors view (e) shows the error texts whole everywhere; the
# headers and every panel at once only where they are not cut to fit
IN_ERRORS_VIEW = ("error", "latest", "warning", "log", "reason")


@pytest.mark.parametrize(
    ("size", "fields"), [((80, 24), IN_ERRORS_VIEW), ((120, 36), IN_ERRORS_VIEW), ((160, 48), FIELDS)]
)
async def test_hostile_text_is_drawn_as_characters_in_every_panel(
    size: tuple[int, int], fields: tuple[str, ...]
) -> None:
    app = RampApp(refresh_hz=4.0)
    app.attach(FakeEngine(hostile_snapshot(), on_snapshot=app.snapshot_callback))
    async with app.run_test(size=size) as pilot:
        seen = await open_everything(pilot)
        assert app.is_running  # a MarkupError would have ended the app
        everything = "\n".join(seen)
        # the characters themselves, not a style, a link or an action
        missing = [name for name in fields if f"[i]{name}" not in everything]
        assert not missing, missing


async def test_hostile_text_reaches_the_errors_view_whole() -> None:
    app = RampApp(refresh_hz=4.0)
    app.attach(FakeEngine(hostile_snapshot(), on_snapshot=app.snapshot_callback))
    async with app.run_test(size=(160, 48)) as pilot:
        app.redraw(force=True)
        await pilot.pause()
        await pilot.press("e")
        await pilot.pause()
        shown = svg_text(app)
        for text in HOSTILE:
            assert text in shown, (text, shown)


async def test_hostile_text_in_a_replayed_record(tmp_path: Path) -> None:
    """`ramp replay` of a record whose error messages, model and profile hold markup: the errors view opens
    (it died with a MarkupError) and shows the characters."""
    record = tmp_path / "hostile.jsonl"
    lines = [json.loads(raw) for raw in REPLAY_FIXTURE.read_text(encoding="utf-8").splitlines()]
    for line in lines:
        if line["type"] == "header":
            line["model"], line["profile"] = tag("model"), tag("profile")
        if line["type"] == "step":
            line["latest_errors"] = {"http_status": f"{tag('latest')} {BODY}"}
    record.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    app = ReplayApp(load_replay(str(record)))
    async with app.run_test(size=(160, 48)) as pilot:
        app.redraw(force=True)
        await pilot.pause()
        first = svg_text(app)
        await pilot.press("e")
        await pilot.pause()
        shown = svg_text(app)
        assert app.is_running
        assert "[i]profile[/INST]" in first  # (a model name is shown after its last "/")
        assert "[i]latest[/INST]" in shown and "[@click=app.quit]bye[/]" in shown
