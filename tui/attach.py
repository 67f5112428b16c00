"""``ramp attach TARGET``: a read-only console on a running ramp, fed by its shared snapshots.

The same app, screen layout and panels as the operator's (``RampApp``, ``ConsoleScreen``'s dashboard), fed
by a ``RemoteRun`` (``loadgen.observe.remote``: the run's ``/snapshot`` on its ``--metrics-port``, polled)
instead of an engine, so it draws the same numbers from the same snapshots. Any number of them at once:
each is a reader of the share, which has no command to receive. The steering keys (the live console's own,
``tui.replay.steering_keys``) and the palette's steering entries only say "read-only: attached to …" (one
override, ``AttachApp.steering_engine``); q quits this console, never the run.

The link is watched twice a second: a ramp that cannot be reached (its run ended and it exited, or the
network dropped) is said once, as a toast; while a live run stays unreachable its panels grey, the status
line counts "LOST 0:20" (what was last seen, never RUNNING · MEASURING as if still so) and after
``tui.status.MAY_HAVE_ENDED_S`` says where the run's record is; the poll goes on. A peer that
is no ramp (garbage, too big, another format) ends the console, and ``ramp attach`` prints why.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Footer, Static

from loadgen.exits import EXIT_OK, EXIT_UNREACHABLE, UsageError
from loadgen.observe.remote import AttachError, RemoteRun, first_contact, snapshot_url
from loadgen.run.engine import EngineControl
from loadgen.snapshot import Snapshot
from tui.actions import STEERING_ACTIONS
from tui.app import RampApp
from tui.console import ConsoleScreen
from tui.replay import action_name, read_only_bindings
from tui.status import LIVE_STATES

ATTACHED, LOST, ENDED = "ATTACHED", "ATTACHED · LOST", "ATTACHED · ENDED"
LINK_CHECK_S = 0.5


def read_only(shown: str) -> str:
    return f"read-only: attached to {shown}"


def attach_bindings() -> list[BindingType]:
    """The console's keys that only change the view, and its steering keys bound to "read-only"."""
    kept = [
        binding
        for binding in ConsoleScreen.BINDINGS
        if isinstance(binding, Binding)
        and action_name(binding.action) not in STEERING_ACTIONS
        and binding.id != "quit_console"
    ]
    return [
        Binding("q", "app.quit", "Detach", id="quit_console"),  # this console only: the run goes on
        *kept,
        *read_only_bindings("attach_ro"),
    ]


class AttachScreen(ConsoleScreen):
    """The console's screen without its steering keys in the footer (they stay bound, to say why not)."""

    inherit_bindings = False
    BINDINGS = attach_bindings()


class AttachApp(RampApp):
    """The console on a ``RemoteRun``: draws another ramp's run, never steers it."""

    CSS_PATH = str(Path(__file__).with_name("ramp.tcss"))

    def __init__(self, source: RemoteRun, *, basic_glyphs: bool | None = None) -> None:
        # No engine given to the base: it would start multiprocessing's tracker, for a console with no workers
        super().__init__(None, refresh_hz=4.0, title="ramp attach", basic_glyphs=basic_glyphs)
        self.engine = self.source = source
        source.on_snapshot = self.snapshot_callback
        self.sub_title = source.label
        self.view = replace(self.view, badge=ATTACHED)
        self.failure = ""  # why attaching ended: what answered was not a ramp's snapshot
        self._link_said = ""
        self.lost_since: float | None = None  # monotonic, when a live run's ramp stopped answering

    def get_default_screen(self) -> AttachScreen:
        return AttachScreen()

    def on_unmount(self) -> None:
        """The poll ends with the console, however it ends (the remote run goes on): a poll thread left
        behind kept polling in the process that ran the console (the test suite's TUI tests ran 5-10x slower
        after one)."""
        self.source.stop()

    def on_ready(self) -> None:
        super().on_ready()
        self.set_interval(LINK_CHECK_S, self.watch_link, name="link")
        self.notify(f"{read_only(self.source.label)} · q detaches (the run goes on)", markup=False)

    # ---- the link ---------------------------------------------------------------------------------------
    def watch_link(self) -> None:
        """Say once when the ramp cannot be reached, and when it answers again; exit on a peer that is no
        ramp (``ramp attach`` prints ``failure``)."""
        source = self.source
        if source.fatal:
            self.failure = source.fatal
            source.stop()
            self.exit(return_code=EXIT_UNREACHABLE)
            return
        problem = source.problem
        if problem == self._link_said:
            self.count_lost()
            return
        self._link_said = problem
        if not problem:
            self.lost_since = None
            self.screen.set_class(False, "-lost")
            self.set_view(replace(self.view, badge=ATTACHED, lost_s=None))
            self.notify(f"reconnected to {source.label}", markup=False)
            return
        last = self.latest_snapshot
        if last is not None and last.state not in LIVE_STATES:
            self.set_view(replace(self.view, badge=ENDED))
            self.notify(
                f"the run {last.state} and its ramp is gone ({problem}): the last picture stays — q to quit",
                timeout=30,
                markup=False,
            )
            return
        if self.lost_since is None:  # another reason for the same loss keeps its count
            self.lost_since = time.monotonic()
        self.screen.set_class(True, "-lost")  # the panels grey: their numbers are no longer live
        self.set_view(replace(self.view, badge=LOST, lost_s=time.monotonic() - self.lost_since))
        self.notify(
            f"connection lost: {problem} — retrying, q to quit", severity="error", timeout=30, markup=False
        )

    def count_lost(self) -> None:
        """While lost: the status line's "LOST 0:20" counts (a redraw once a second, not every check)."""
        if self.lost_since is None:
            return
        lost_s = time.monotonic() - self.lost_since
        if self.view.lost_s is None or int(lost_s) != int(self.view.lost_s):
            self.set_view(replace(self.view, lost_s=lost_s))

    def announce_end(self, snapshot: Snapshot) -> None:
        """Once, when the run stops being live: what happened to it (its operator's keys decide what next)."""
        if snapshot.state in LIVE_STATES:
            self._announced_end = False
            return
        if self._announced_end:
            return
        self._announced_end = True
        detail = f": {snapshot.message}" if snapshot.message else ""
        self.notify(
            f"the run {snapshot.state}{detail} (attached, read-only) — q to quit",
            severity="error" if snapshot.state == "failed" else "information",
            markup=False,
        )

    def run_is_live(self) -> bool:
        return False  # q leaves at once: there is nothing of this console's to stop

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        """Into the current folder: the run's record folder is on the operator's machine."""
        super().action_screenshot(filename, path if path is not None else str(Path.cwd()))

    # ---- steering: read-only ----------------------------------------------------------------------------
    def action_read_only(self) -> None:
        self.notify(read_only(self.source.label), severity="warning", timeout=2, markup=False)

    def steering_engine(self) -> EngineControl | None:
        """Every steering action (``tui.actions.STEERING_ACTIONS``), from a key or the palette, ends here."""
        self.action_read_only()
        return None


class Notice(App[None]):
    """One message, and q to close: what a browser tab shows of a command that does not run there."""

    BINDINGS = [Binding("q,escape,enter", "quit", "Close", id="notice_close")]
    CSS = "Static { padding: 1 2; }"

    def __init__(self, message: str) -> None:
        super().__init__()
        self.message = message

    def compose(self) -> ComposeResult:
        yield Static(Text(self.message))
        yield Footer()


def show_notice(message: str) -> None:
    """Show ``message`` until q (under textual-serve: in the browser tab that asked)."""
    Notice(message).run()


def attach_main(target: str, refused: str | None = None) -> int:
    """``ramp attach TARGET``: one line and exit 3 when nothing there shares a ramp's snapshots; a usage
    error when the console cannot be drawn here (``refused``: why not, ``loadgen.cli.headless``)."""
    url = snapshot_url(target)  # UsageError (exit 2) on a TARGET that names no port
    try:
        first = first_contact(url)
    except AttachError as exc:
        print(f"ramp attach: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    if refused is not None:
        raise UsageError(
            f"ramp attach draws a console, and {refused}: run it in a terminal or under textual-serve"
        )
    app = AttachApp(RemoteRun(url, first))
    app.run()
    app.source.stop()
    if app.failure:
        print(f"ramp attach: {app.failure}", file=sys.stderr)
        return EXIT_UNREACHABLE
    return EXIT_OK
