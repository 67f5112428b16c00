"""Detail views over the console: every figure of one step (``d``) and the full text of errors (``e``).

Modal screens, so that no steering key reaches the engine while one is open; each redraws from the
snapshot the app shows (``refresh_from``, called by the app on every redraw) and scrolls when its text is
longer than the terminal. In the step view ← and → move between the finished steps and b jumps to the best.

Under load (a loaded machine, many streams) building a report takes a while: the screen is pushed with a
placeholder and filled after its first paint, so that d and e answer at once; the step view rebuilds only
when what it shows changed (a finished step never does), the errors view at most every ``REBUILD_S``.
"""

from __future__ import annotations

import io
import time

from rich.console import Console, Group, RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from loadgen.snapshot import Snapshot
from tui.console import baseline_of
from tui.errors import error_details
from tui.panel import PanelHost
from tui.step_report import Look, step_report
from tui.steps import starred

REBUILD_S = 1.0  # the errors view's figures move with every snapshot: redrawn at most this often


class DetailScreen(ModalScreen[None]):
    """A scrolling report over the latest snapshot; escape (or the key that opened it) closes it."""

    BINDINGS = [Binding("escape,q", "close", "Close", id="close_detail")]
    COMPONENT_CLASSES = {"detail--heading", "detail--good", "detail--bad", "detail--warn", "detail--dim"}
    TITLE = ""

    def __init__(self) -> None:
        super().__init__()
        self.report: RenderableType = Text("")
        self.built: object = None  # what the report was built from (``content_key``)
        self.built_at = 0.0

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog detail"):
            yield Label(self.TITLE, classes="dialog-title", id="detail-title")
            yield Static(Text("…"), id="detail-body")  # filled after the first paint (``on_mount``)
            yield Static("escape closes · ↑ ↓ pgup pgdn scroll", classes="dialog-help", id="detail-keys")

    def on_mount(self) -> None:
        self.call_after_refresh(self.fill)

    def fill(self) -> None:
        host = self.app
        if isinstance(host, PanelHost) and host.shown_snapshot is not None and self.is_attached:
            self.refresh_from(host.shown_snapshot, force=True)

    def content_key(self, snapshot: Snapshot) -> object:
        """What the report is built from: the same key, no rebuild. None: rebuilt at most every REBUILD_S."""
        return None

    def look(self) -> Look:
        get = self.get_component_rich_style
        return Look(
            heading=get("detail--heading", partial=True),
            good=get("detail--good", partial=True),
            bad=get("detail--bad", partial=True),
            warn=get("detail--warn", partial=True),
            dim=get("detail--dim", partial=True),
        )

    def refresh_from(self, snapshot: Snapshot, force: bool = False) -> None:
        if not self.query("#detail-body"):
            return  # pushed but not composed yet, or being taken down (a redraw can fall in between)
        key = self.content_key(snapshot)
        now = time.monotonic()
        if not force and self.built_at:
            if key is not None and key == self.built:
                return
            if key is None and now - self.built_at < REBUILD_S:
                return
        self.built, self.built_at = key, now
        title, self.report = self.build(snapshot)
        self.query_one("#detail-title", Label).update(Text(title))  # names from a record: data
        self.query_one("#detail-body", Static).update(self.report)

    def build(self, snapshot: Snapshot) -> tuple[str, RenderableType]:
        raise NotImplementedError

    def plain(self) -> str:
        """The report as plain text, laid out at the width it has on screen."""
        body = self.query_one("#detail-body", Static)
        width = body.content_region.width or 100
        console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
        console.print(self.report)
        return console.export_text()

    def action_close(self) -> None:
        self.dismiss(None)


class StepDetail(DetailScreen):
    """One finished step (the latest by default); ← → move between steps, b shows the best one."""

    BINDINGS = [
        Binding("escape,q,d", "close", "Close", id="close_step_detail"),
        # priority: the scrolling container would take ← → for itself
        Binding("left,h", "move(-1)", "Previous step", priority=True, id="previous_step"),
        Binding("right,l", "move(1)", "Next step", priority=True, id="next_step_detail"),
        Binding("b", "best", "Best step", id="best_step_detail"),
    ]
    TITLE = "Step details"

    def __init__(self, position: int | None = None) -> None:
        super().__init__()
        self.position = position  # into Snapshot.steps; None follows the latest
        self.snapshot: Snapshot | None = None

    def content_key(self, snapshot: Snapshot) -> object:
        # finished steps never change: new ones, the best, the SLO and the step looked at do
        errors = tuple(sorted(snapshot.latest_errors.items()))  # a step's kinds name the run's latest message
        return (self.position, len(snapshot.steps), snapshot.best_step, snapshot.slo, errors)

    def build(self, snapshot: Snapshot) -> tuple[str, RenderableType]:
        self.snapshot = snapshot
        steps = snapshot.steps
        if not steps:
            return "Step details", Text("no finished step yet: a step's figures are here once it has closed")
        at = len(steps) - 1 if self.position is None else min(self.position, len(steps) - 1)
        best = starred(steps, snapshot.best_step)
        title = f"Step details · {at + 1} of {len(steps)} finished · ← → other steps · b best · esc closes"
        report = step_report(
            steps[at], snapshot.slo, snapshot.latest_errors, best=at == best, look=self.look()
        )
        baseline = baseline_of(self.app)  # --baseline: this step against it, in words
        if baseline is not None:
            lines = [Text(line) for line in baseline.detail(steps, at, snapshot.slo)]
            report = Group(report, Text(""), *lines)
        return title, report

    def action_move(self, by: int) -> None:
        if self.snapshot is None or not self.snapshot.steps:
            return
        last = len(self.snapshot.steps) - 1
        current = last if self.position is None else self.position
        self.position = max(0, min(last, current + by))
        self.refresh_from(self.snapshot, force=True)

    def action_best(self) -> None:
        if self.snapshot is None:
            return
        best = starred(self.snapshot.steps, self.snapshot.best_step)
        if best is None:
            self.notify("no best step under the SLO yet", timeout=2)
            return
        self.position = best
        self.refresh_from(self.snapshot, force=True)


class ErrorsDetail(DetailScreen):
    """Warnings, error counts by kind with the latest full message of each, the latest messages, failing
    telemetry sources and a launched server's log, uncut."""

    BINDINGS = [Binding("escape,q,e", "close", "Close", id="close_errors_detail")]
    TITLE = "Errors in full"

    def build(self, snapshot: Snapshot) -> tuple[str, RenderableType]:
        baseline = baseline_of(self.app)  # its conditions check is among the warnings
        shown = snapshot if baseline is None else baseline.annotate(snapshot)
        return self.TITLE, error_details(shown, self.look())
