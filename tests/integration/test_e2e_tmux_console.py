"""Issue 21 on the real `ramp` in tmux: a server's error body with Rich markup in it (``[/]``, ``[/INST]``)
opens in the errors view (e) as the characters it is and the run goes on; and type-ahead (``l32⏎`` sent in
one burst, as a laggy SSH link or a paste delivers it) reaches the level dialog: the level becomes 32, and
the record gets no step cut for nothing."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

from aiohttp import web
from fault_servers import FaultServer, models_ok, stream_ok
from tmux_harness import (
    level_of,
    measured_a_while,
    needs_tmux,
    ok_count,
    quit_run,
    ramp_session,
    step_lines,
)

pytestmark = needs_tmux

BODY = "model said [/INST] then [/] and [bold]x"


def half_refusing() -> FaultServer:
    """Every other completion is a 400 whose message quotes markup back; the rest stream a reply."""
    count = itertools.count()

    async def reply(req: web.Request) -> web.StreamResponse:
        if next(count) % 2:
            return web.json_response({"error": {"message": BODY}}, status=400)
        return await stream_ok(req)

    routes = {
        ("GET", "/v1/models"): models_ok,
        ("POST", "/v1/chat/completions"): reply,
        ("POST", "/v1/completions"): reply,
    }
    return FaultServer(routes).start()


def test_markup_in_an_error_body_opens_in_the_errors_view(tmp_path: Path) -> None:
    record = tmp_path / "hostile.jsonl"
    server = half_refusing()
    try:
        args = ["run", f"{server.url}", "--level", "2", "--out", str(record)]
        with ramp_session(args, width=120, height=36) as pane:
            pane.wait_for(lambda s: "err" in s and (ok_count(s) or 0) >= 2, 60, "errors and answers")
            pane.keys("e")
            shown = pane.wait_for(lambda s: "[/INST]" in s, 15, "the error body in the errors view")
            assert "[/] and [bold]x" in shown  # the characters, not a style
            pane.keys("Escape")
            # still running: the request count keeps moving
            before = ok_count(pane.wait_for(lambda s: ok_count(s) is not None, 10, "the console"))
            assert before is not None
            pane.wait_for(lambda s: (ok_count(s) or 0) > before, 30, "the run to go on")
            quit_run(pane, record)
    finally:
        server.stop()


def measured_ok(screen: str) -> int:
    """The requests done in the step's measured window, read off one line ("this step: … ok N"; warm-up and
    closing say so in brackets):
    a capture may catch a frame half drawn, the header already MEASURING and the count still the warm-up's."""
    m = re.search(r"this step: [^\n]*\bok (\d[\d,]*)", screen)
    return int(m.group(1).replace(",", "")) if m else 0


# Short replies: each wait below is for a request done in a step's window, and chat's (some 250 tokens,
# up to 2,048) held each for seconds
SHORT = "[[bucket]]\ninput = 64\noutput = { min = 16, max = 64 }\n[sampling]\nignore_eos = true\n"


def test_type_ahead_reaches_the_level_dialog(tmp_path: Path) -> None:
    record, profile = tmp_path / "typeahead.jsonl", tmp_path / "short.toml"
    profile.write_text(SHORT)
    args = ["demo", "--level", "3", "--warmup", "1", "--profile", str(profile), "--out", str(record)]
    with ramp_session(args, width=120, height=36) as pane:
        measured_a_while(
            pane, "a step measuring at level 3", lambda s: level_of(s) == 3 and measured_ok(s) >= 1
        )
        pane.keys("l32", "Enter")  # one send-keys call: the burst arrives before the dialog is drawn
        pane.wait_for(
            lambda s: level_of(s) == 32 and measured_ok(s) >= 1,
            60,
            "a step measuring at the typed level 32",
        )
        pane.keys("l", "Enter")  # the value shown, unchanged: the step goes on, no step is cut for it
        pane.wait_for(lambda s: "already at that load" in s, 20, "the notice that nothing changed")
        quit_run(pane, record)
    levels = [line["level"] for line in step_lines(record)]
    assert levels == [3, 32], levels  # the level-3 step cut once, by the change to 32; nothing in between
