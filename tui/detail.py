"""Detail views over the console: every figure of one step (``d``) and the full text of errors (``e``).

Modal screens, so that no steering key reaches the engine while one is open; each redraws from the
snapshot the app shows (``refresh_from``, called by the app on every redraw) and scrolls when its text is
longer than the terminal. In the step view ← and → move between the finished steps and b jumps to the best.
"""

from __future__ import annotations

import io

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


class DetailScreen(ModalScreen[None]):
    """A scrolling report over the latest snapshot; escape (or the key that opened it) closes it."""

    BINDINGS = [Binding("escape,q", "close", "Close", id="close_detail")]
    COMPONENT_CLASSES = {"detail--heading", "detail--good", "detail--bad", "detail--warn", "detail--dim"}
    TITLE = ""

    def __init__(self) -> None:
        super().__init__()
        self.report: RenderableType = Text("")

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog detail"):
            yield Label(self.TITLE, classes="dialog-title", id="detail-title")
            yield Static(id="detail-body")
            yield Static("escape closes · ↑ ↓ pgup pgdn scroll", classes="dialog-help", id="detail-keys")

    def on_mount(self) -> None:
        host = self.app
        if isinstance(host, PanelHost) and host.shown_snapshot is not None:
            self.refresh_from(host.shown_snapshot)

    def look(self) -> Look:
        get = self.get_component_rich_style
        return Look(
            heading=get("detail--heading", partial=True),
            good=get("detail--good", partial=True),
            bad=get("detail--bad", partial=True),
            warn=get("detail--warn", partial=True),
            dim=get("detail--dim", partial=True),
        )

    def refresh_from(self, snapshot: Snapshot) -> None:
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
        self.refresh_from(self.snapshot)

    def action_best(self) -> None:
        if self.snapshot is None:
            return
        best = starred(self.snapshot.steps, self.snapshot.best_step)
        if best is None:
            self.notify("no best step under the SLO yet", timeout=2)
            return
        self.position = best
        self.refresh_from(self.snapshot)


class ErrorsDetail(DetailScreen):
    """Warnings, error counts by kind with the latest full message of each, the latest messages, failing
    telemetry sources and a launched server's log, uncut."""

    BINDINGS = [Binding("escape,q,e", "close", "Close", id="close_errors_detail")]
    TITLE = "Errors in full"

    def build(self, snapshot: Snapshot) -> tuple[str, RenderableType]:
        baseline = baseline_of(self.app)  # its conditions check is among the warnings
        shown = snapshot if baseline is None else baseline.annotate(snapshot)
        return self.TITLE, error_details(shown, self.look())
