"""``ramp attach``: a read-only console fed by a running ramp's shared snapshots (``/snapshot`` on the
``--metrics-port`` server, ``loadgen.observe.share``), driven with Textual's Pilot.

Two faces on one engine: the operator's console and an attach console, side by side in one event loop, the
attach one reading the engine's snapshots over HTTP from the real exporter server (on a free port of
127.0.0.1). After the operator steers, both show the same numbers, panel by panel. The attach console's
steering keys and palette entries change nothing in the engine; q quits it and leaves the run alone. A
peer that turns into garbage ends it with a message; one that cannot be reached is said, and so is one
that answers again.
"""

from __future__ import annotations

import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import httpx
import pytest
from textual.pilot import Pilot
from textual.screen import ModalScreen
from tui_fakes import FakeEngine, make_snapshot, text_of

from loadgen.cli.commands import main
from loadgen.exits import EXIT_UNREACHABLE
from loadgen.format import fmt_si
from loadgen.observe.exporter import MetricsServer, serve, with_exporter
from loadgen.observe.remote import RemoteRun, snapshot_url
from loadgen.observe.share import encode
from loadgen.profile import load_profile
from loadgen.run.config import RunConfig
from loadgen.run.protocol import ControlCommand
from loadgen.snapshot import Snapshot
from loadgen.types import Target
from tui.app import RampApp
from tui.attach import ATTACHED, ENDED, LOST, AttachApp, read_only
from tui.commands import steering_entries
from tui.control import ControlPanel
from tui.curve import CurvePanel
from tui.errors import ErrorsPanel
from tui.histogram_panel import HistogramPanel
from tui.panel import SnapshotPanel
from tui.replay import steering_keys
from tui.server import ServerPanel
from tui.status import StatusBar
from tui.steps import StepsPanel
from tui.throughput import ThroughputPanel

PANELS: tuple[type[SnapshotPanel], ...] = (
    StatusBar,
    ControlPanel,
    HistogramPanel,
    ThroughputPanel,
    ServerPanel,
    StepsPanel,
    CurvePanel,
    ErrorsPanel,
)
WAIT_S = 10.0  # a loaded 2-core machine: the poll is 4 Hz


class Watched(AttachApp):
    """The attach console, keeping what it told its viewer (its toasts)."""

    def __init__(self, source: RemoteRun) -> None:
        super().__init__(source)
        self.said: list[str] = []

    def notify(self, message: str, **kwargs: Any) -> None:
        self.said.append(message)
        super().notify(message, **kwargs)


@pytest.fixture
def share() -> Iterator[MetricsServer]:
    server = serve("127.0.0.1", 0)
    yield server
    server.close()


def screen_text(app: RampApp) -> dict[str, str]:
    """Every panel's text by panel (and id); the status line without the attach badge (and the spaces
    around it)."""
    texts = {}
    for kind in PANELS:
        for panel in app.query(kind):
            text = text_of(panel)
            if kind is StatusBar:
                text = " ".join(text.replace(ATTACHED, "").split())
            texts[f"{kind.__name__}#{panel.id}"] = text
    return texts


async def until(pilot: Pilot[None], done: Callable[[], bool], what: str) -> None:
    """Poll ``done`` (a real HTTP poll is behind it), bounded by WAIT_S."""
    deadline = time.monotonic() + WAIT_S
    while not done():
        assert time.monotonic() < deadline, f"no {what} within {WAIT_S:g} s"
        await pilot.pause(0.05)


def seq_of(app: RampApp) -> int:
    return app.shown_snapshot.seq if app.shown_snapshot is not None else -1


async def test_two_faces_on_one_engine_show_the_same_numbers(share: MetricsServer) -> None:
    operator = RampApp(refresh_hz=8.0)

    def publish(snapshot: Snapshot) -> None:  # the engine's two sinks: the console and the exporter
        operator.snapshot_callback(snapshot)
        share.collector.feed(snapshot)

    hostile = "[bold red]loud[/] [/INST] [@click=app.quit]bye[/]"  # a server's words: data, never markup
    engine = FakeEngine(make_snapshot(model=hostile, recent_errors=(hostile,)), on_snapshot=publish)
    operator.attach(engine)
    attached = Watched(RemoteRun(snapshot_url(share.url)))
    another = Watched(RemoteRun(snapshot_url(share.url)))  # any number of them read the one run
    async with (
        operator.run_test(size=(120, 36)) as op,
        attached.run_test(size=(120, 36)) as at,
        another.run_test(size=(120, 36)) as other,
    ):
        await op.press("up", "up", "n")  # the operator steers: level 64 → 66, the next step
        now = engine.snapshot.seq
        await until(
            op, lambda: seq_of(attached) == seq_of(another) == now == seq_of(operator), "same snapshot"
        )
        for app, pilot in ((operator, op), (attached, at), (another, other)):
            app.redraw(force=True)
            await pilot.pause()
        ours, theirs = screen_text(operator), screen_text(attached)
        assert len(ours) == len(PANELS) + 1  # the two histograms
        assert theirs == ours and screen_text(another) == ours
        snap = engine.snapshot
        assert snap.level == 66 and snap.step_index == 5
        status, control = theirs["StatusBar#status"], theirs["ControlPanel#control"]
        assert "closed loop 66" in status and "step 6/8" in status
        assert "[bold red]loud[/]" in theirs["ErrorsPanel#errors-panel"]  # as characters, not markup
        assert "level 66" in control and f"in flight {snap.in_flight}" in control
        step_tok_s = snap.windows["step"].out_tok_s
        assert step_tok_s is not None and f"out {fmt_si(step_tok_s)} tok/s" in control
        assert "ATTACHED" in text_of(attached.query_one(StatusBar))
        assert "ATTACHED" not in text_of(operator.query_one(StatusBar))
        await at.press("q")
        await at.pause()
        assert not attached.is_running and engine.names().count("stop") == 0
        assert operator.is_running and another.is_running


async def test_steering_in_an_attach_console_changes_nothing(share: MetricsServer) -> None:
    engine = FakeEngine(make_snapshot(), on_snapshot=share.collector.feed)
    engine.publish()
    before = engine.snapshot
    attached = Watched(RemoteRun(snapshot_url(share.url)))
    sent: list[ControlCommand] = []
    attached.source.send = sent.append  # type: ignore[method-assign]
    refused = read_only(attached.source.label)
    keys = steering_keys()
    assert {"up", "down", "space", "p", "n", "a", "o", "k", "l", "pageup"} <= set(keys)
    async with attached.run_test(size=(120, 36)) as at:
        await until(at, lambda: attached.shown_snapshot is not None, "first snapshot")
        for key in keys:
            await at.press(key)
        entries = steering_entries(attached)
        for _, _, run in entries:
            run()
        await at.pause()
        assert attached.said.count(refused) == len(keys) + len(entries)
        assert not isinstance(attached.screen, ModalScreen)  # no level or mark dialog opened
        await at.press("q")  # no "stop the run?": this console stops nothing
        await at.pause()
        assert not attached.is_running
    assert sent == [] and engine.commands == [] and engine.snapshot is before
    assert "stop" not in engine.names()
    assert attached.shown_snapshot is not None and attached.shown_snapshot.level == before.level


class Peer:
    """A fake ramp behind httpx's MockTransport: answers each poll from ``replies`` in turn (the last one
    again and again); an exception in it is raised, as the transport would."""

    def __init__(self, *replies: httpx.Response | Exception) -> None:
        self.replies = list(replies)
        self.polls = 0

    def handle(self, request: httpx.Request) -> httpx.Response:
        reply = self.replies[min(self.polls, len(self.replies) - 1)]
        self.polls += 1
        if isinstance(reply, Exception):
            raise reply
        return reply

    def source(self) -> RemoteRun:
        return RemoteRun(
            "http://peer:9464/snapshot",
            client_factory=lambda: httpx.AsyncClient(transport=httpx.MockTransport(self.handle)),
            every_s=0.02,
            retry_s=0.02,
        )


def ok(snapshot: Snapshot) -> httpx.Response:
    return httpx.Response(200, content=encode(snapshot, ()))


async def test_a_peer_that_turns_to_garbage_ends_the_console_with_why() -> None:
    peer = Peer(
        ok(make_snapshot()), ok(make_snapshot(seq=2)), httpx.Response(200, content=b"\x00\xffgarbage")
    )
    app = Watched(peer.source())
    async with app.run_test(size=(80, 24)) as at:
        await until(at, lambda: not app.is_running, "exit")
    assert "sent no JSON" in app.failure and "http://peer:9464/snapshot" in app.failure
    assert app.shown_snapshot is not None and app.shown_snapshot.seq == 2


async def test_a_dropped_link_is_said_and_so_is_its_return() -> None:
    down = httpx.ConnectError("[Errno 111] Connection refused")
    peer = Peer(ok(make_snapshot()), *[down] * 60, ok(make_snapshot(seq=9)))  # down for ~1.2 s
    app = Watched(peer.source())
    async with app.run_test(size=(80, 24)) as at:
        await until(at, lambda: app.view.badge == LOST, "lost badge")
        assert any(text.startswith("connection lost: ") for text in app.said)
        await until(at, lambda: seq_of(app) == 9 and app.view.badge == ATTACHED, "reconnection")
        assert "reconnected to http://peer:9464" in app.said and app.is_running


async def test_a_run_that_ended_and_went_away_keeps_its_last_picture() -> None:
    finished = replace(make_snapshot(), state="finished", phase="idle")
    peer = Peer(ok(finished), httpx.ConnectError("[Errno 111] Connection refused"))
    app = Watched(peer.source())
    async with app.run_test(size=(80, 24)) as at:
        await until(at, lambda: app.view.badge == ENDED, "ended badge")
        assert any(text.startswith("the run finished (attached, read-only)") for text in app.said)
        assert any("its ramp is gone" in text for text in app.said) and app.is_running
        status = text_of(app.query_one(StatusBar))
        assert "FINISHED" in status and ENDED in status and "press ↑" not in status


async def test_a_lost_live_run_looks_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 30: 20 s after the run was killed the header still read green RUNNING · MEASURING · "0:01 left"
    · client ok over undimmed panels. Lost, the panels grey, the line counts "LOST 0:0N" and names no live
    state, and after a while it says where the run's record is (the wait shortened here)."""
    monkeypatch.setattr("tui.status.MAY_HAVE_ENDED_S", 2.0)
    peer = Peer(ok(make_snapshot()), httpx.ConnectError("[Errno 111] Connection refused"))
    app = Watched(peer.source())
    async with app.run_test(size=(120, 30)) as at:
        await until(at, lambda: app.view.badge == LOST, "lost badge")
        await at.pause(0.1)
        status = text_of(app.query_one(StatusBar))
        assert "LOST 0:0" in status and "last seen running, measuring" in status, status
        for live in ("RUNNING", "MEASURING", " left", "client ok"):
            assert live not in status, status
        assert app.query_one(HistogramPanel).styles.opacity < 1.0
        assert app.query_one(StatusBar).styles.opacity == 1.0
        await until(at, lambda: "may have ended" in text_of(app.query_one(StatusBar)), "may have ended")
        status = text_of(app.query_one(StatusBar))
        assert "the run may have ended; its record is runs/ramp-demo.jsonl" in status, status
        assert "LOST 0:02" in status or "LOST 0:03" in status or "LOST 0:04" in status, status


class NotHTTP(socketserver.BaseRequestHandler):
    """Something else on the port: an SSH server's greeting, then the connection closed."""

    def handle(self) -> None:
        self.request.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")


def test_ramp_attach_to_something_else_is_one_line_and_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    with socketserver.TCPServer(("127.0.0.1", 0), NotHTTP) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            code = main(["attach", f"127.0.0.1:{server.server_address[1]}"])
        finally:
            server.shutdown()
    err = capsys.readouterr().err
    assert code == EXIT_UNREACHABLE and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("ramp attach: cannot attach: broken HTTP reply from http://127.0.0.1:")


def test_the_run_s_share_keeps_its_secrets_and_answers_304_between_snapshots(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Wired as ``--metrics-port`` wires it (``with_exporter``): the run's own key and URL password are
    masked in ``/snapshot``; a poll with the snapshot's ETag is a 304 without a body."""
    monkeypatch.setenv("RAMP_ATTACH_TEST_KEY", "sk-attach-secret-4242")
    target = Target(url="http://ops:pw-in-url-77@127.0.0.1:9/v1", api_key_env="RAMP_ATTACH_TEST_KEY")
    config = RunConfig(target=target, profile=load_profile("chat"), warmup_s=0.0)
    config, metrics = with_exporter(config, "127.0.0.1", 0, lambda text: None)
    assert metrics is not None and config.snapshot_sink is not None
    try:
        leaky = make_snapshot(recent_errors=("401: key sk-attach-secret-4242 for ops:pw-in-url-77 refused",))
        config.snapshot_sink(leaky)
        url = snapshot_url(metrics.url)
        first = httpx.get(url, timeout=5)
        assert first.status_code == 200 and first.headers["content-type"] == "application/json"
        assert "sk-attach-secret-4242" not in first.text and "pw-in-url-77" not in first.text
        assert "401: key *** for ops:*** refused" in first.text
        again = httpx.get(url, headers={"If-None-Match": first.headers["etag"]}, timeout=5)
        assert again.status_code == 304 and again.content == b""
        config.snapshot_sink(replace(leaky, seq=2))
        assert httpx.get(url, headers={"If-None-Match": first.headers["etag"]}, timeout=5).status_code == 200
    finally:
        metrics.close()


async def test_the_poll_thread_ends_with_the_console() -> None:
    """A console that ends, however it ends, stops its poll: the thread that polled for it was left behind,
    polling on (four of them after this module, and every later console in the process ran 5-10x slower)."""
    peer = Peer(ok(make_snapshot()), httpx.ConnectError("[Errno 111] Connection refused"))
    source = peer.source()
    app = Watched(source)
    async with app.run_test(size=(80, 24)) as at:
        await until(at, lambda: app.view.badge == LOST, "lost badge")
    source.wait(timeout=5)  # the thread, joined: bounded
    assert not [t for t in threading.enumerate() if t.name == "ramp-attach"]  # this module's six too
