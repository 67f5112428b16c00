"""The main screen: status line, control panel, the panels (a grid on large terminals, tabs on small
ones) and the footer with the steering keys.

The steering bindings live on this screen, not on the app, so that a modal (typing a level, confirming
quit) never lets an arrow key change the load behind it.

With a baseline (``--baseline``, ``tui.baseline``) the histogram, steps and curve panels draw it, and the
panels see each snapshot with the baseline's conditions check among its warnings (the errors panel lists
them).
"""

from __future__ import annotations

from textual import events
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Container, Horizontal, Vertical
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Footer, TabbedContent, TabPane

from loadgen.snapshot import Snapshot
from tui.baseline import LiveBaseline
from tui.control import ControlPanel
from tui.curve import CurvePanel
from tui.errors import ErrorsPanel
from tui.footer import ConsoleFooter
from tui.histogram_panel import HistogramPanel
from tui.panel import PanelHost, SnapshotPanel
from tui.prompt import LinePrompt
from tui.replicas import ReplicasPanel
from tui.server import ServerPanel
from tui.status import StatusBar
from tui.steps import Pricer, StepsPanel
from tui.throughput import ThroughputPanel
from tui.view import ViewState

# Below either size the panels become tabs.
WIDE_MIN_WIDTH = 120
WIDE_MIN_HEIGHT = 36

LEVEL = Binding.Group("Level", compact=True)

TABS = ("latency", "throughput", "server", "steps", "curve", "errors")


def baseline_of(app: App[object]) -> LiveBaseline | None:
    """The console's baseline, seen from a screen over it (the step detail view)."""
    console = app.screen_stack[0] if app.screen_stack else None
    return console.baseline if isinstance(console, ConsoleScreen) else None


def is_compact(width: int, height: int) -> bool:
    return width < WIDE_MIN_WIDTH or height < WIDE_MIN_HEIGHT


class Dashboard(Container):
    """Holds the panels; recomposes when the terminal crosses the compact/wide boundary."""

    compact: reactive[bool] = reactive(True, recompose=True)

    def __init__(
        self, *, id: str | None = None, baseline: LiveBaseline | None = None, pricer: Pricer | None = None
    ) -> None:
        super().__init__(id=id)
        self.baseline = baseline
        self.pricer = pricer

    async def recompose(self) -> None:
        await super().recompose()
        screen = self.screen
        if self.baseline is not None and isinstance(screen, ConsoleScreen):
            screen.show_again()  # the new panels drew the app's snapshot, which lacks the baseline's warnings

    def compose(self) -> ComposeResult:
        base = self.baseline
        if self.compact:
            with TabbedContent(id="tabs"):
                with TabPane("1 Latency", id="latency"), Horizontal(classes="pair"):
                    yield HistogramPanel("left", id="hist-left", baseline=base)
                    yield HistogramPanel("right", id="hist-right", baseline=base)
                with TabPane("2 Throughput", id="throughput"):
                    yield ThroughputPanel(id="throughput-panel")
                with TabPane("3 Server", id="server"):
                    yield ServerPanel(id="server-panel")
                    yield ReplicasPanel(id="replicas-panel")  # several replicas only (else hidden)
                with TabPane("4 Steps", id="steps"):
                    yield StepsPanel(id="steps-panel", baseline=base, pricer=self.pricer)
                with TabPane("5 Curve", id="curve"):
                    yield CurvePanel(id="curve-panel", baseline=base)
                with TabPane("6 Errors", id="errors"):
                    yield ErrorsPanel(id="errors-panel")
        else:
            with Vertical(id="grid"):
                with Horizontal(id="row-latency", classes="pair"):
                    yield HistogramPanel("left", id="hist-left", baseline=base)
                    yield HistogramPanel("right", id="hist-right", baseline=base)
                with Horizontal(id="row-middle"):
                    yield ThroughputPanel(id="throughput-panel")
                    yield ServerPanel(id="server-panel")
                    yield ReplicasPanel(id="replicas-panel")  # several replicas only (else hidden)
                with Horizontal(id="row-steps"):
                    yield StepsPanel(id="steps-panel", baseline=base, pricer=self.pricer)
                    yield CurvePanel(id="curve-panel", baseline=base)
                    yield ErrorsPanel(id="errors-panel")


# Under this many columns the footer's keys run under its docked "^p palette" (a stray "palettei" at 60x20):
# it is left out there (? help names ctrl+p)
PALETTE_IN_FOOTER_W = 80


class ConsoleScreen(Screen[None]):
    # Footer order is this list's order: quit and help first so they survive an 80-column footer.
    BINDINGS = [
        Binding("q", "app.quit", "Quit", id="quit_console"),
        Binding("question_mark,f1", "app.help", "Help", key_display="?", id="help_console"),
        Binding("up,plus", "app.level('up')", "Level +1", key_display="↑", group=LEVEL, id="level_up"),
        Binding("down,minus", "app.level('down')", "Level -1", key_display="↓", group=LEVEL, id="level_down"),
        Binding("shift+up", "app.level('up_coarse')", "Level +10", show=False, id="level_up_coarse"),
        Binding("shift+down", "app.level('down_coarse')", "Level -10", show=False, id="level_down_coarse"),
        Binding("pageup", "app.level('double')", "Level x2", show=False, id="level_double"),
        Binding("pagedown", "app.level('half')", "Level ÷2", show=False, id="level_half"),
        # priority: a dialog's key opens it at once, before the keys typed after it are dispatched, so that
        # they reach the dialog (type-ahead: "l32⏎" in one burst)
        Binding("l,equals_sign", "app.type_level", "Set", key_display="l", priority=True, id="type_level"),
        Binding("space,p", "app.toggle_pause", "Pause", key_display="spc", id="pause"),
        Binding("n", "app.next_step", "Next", id="next_step"),
        Binding("a", "app.toggle_auto", "Auto-ramp", show=False, id="auto_ramp"),
        Binding("m", "app.cycle_metric('left')", "Metric", id="cycle_metric_left"),
        Binding("M", "app.cycle_metric('right')", "Right metric", show=False, id="cycle_metric_right"),
        Binding("w", "app.cycle_window", "Window", id="cycle_window"),
        Binding("o", "app.toggle_mode", "Open/closed loop", show=False, id="switch_mode"),
        Binding("k", "app.mark", "Mark", show=False, priority=True, id="mark"),
        # f: find max (the SLA search): asks the range, then stops it or resumes it once you took over
        Binding(
            "f",
            "app.find_max",
            "Find max: start / stop the knee search",
            show=False,
            priority=True,
            id="find_max",
        ),
        # Not in the footer (no room at 80 columns): the steps and errors panels name their keys.
        Binding("d", "app.step_detail", "Step details", show=False, id="step_detail"),
        Binding("e", "app.error_detail", "Error details", show=False, id="error_detail"),
        Binding("s", "app.screenshot", "Screenshot", show=False, id="screenshot"),
        *(
            Binding(str(number), f"show_tab('{tab}')", f"{tab.title()} tab", show=False, id=f"tab_{tab}")
            for number, tab in enumerate(TABS, start=1)
        ),
    ]

    def __init__(self, baseline: LiveBaseline | None = None, pricer: Pricer | None = None) -> None:
        super().__init__()
        self.baseline = baseline
        self.pricer = pricer  # what a step cost, in the steps table: None when the run has no price
        self.shown: tuple[Snapshot, ViewState] | None = None  # the last drawn, for panels made since

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        yield ControlPanel(id="control")
        dashboard = Dashboard(id="dashboard", baseline=self.baseline, pricer=self.pricer)
        dashboard.set_reactive(Dashboard.compact, is_compact(self.app.size.width, self.app.size.height))
        yield dashboard
        yield ConsoleFooter(compact=True, show_command_palette=self.app.size.width >= PALETTE_IN_FOOTER_W)
        yield LinePrompt(id="prompt")  # over the footer while a value is typed (tui.prompt)

    @property
    def prompt(self) -> LinePrompt:
        return self.query_one(LinePrompt)

    def on_key(self, event: events.Key) -> None:
        # While a value is typed every key is the prompt's: none reaches a binding behind it.
        prompt = self.prompt
        if prompt.is_open:
            prompt.key(event)

    def on_resize(self, event: events.Resize) -> None:
        self.query_one(Dashboard).compact = is_compact(event.size.width, event.size.height)
        footer, palette = self.query_one(Footer), event.size.width >= PALETTE_IN_FOOTER_W
        if footer.show_command_palette != palette:  # the reactive repaints; the key goes only on a recompose
            footer.show_command_palette = palette
            footer.refresh(recompose=True)

    def show(self, snapshot: Snapshot, view: ViewState, *, steered_only: bool = False) -> None:
        """Every panel draws ``snapshot``; with ``steered_only`` only the cheap ones that show what the keys
        steer (``SnapshotPanel.STEERED``: the header and the control lines), the rest at the next tick."""
        if self.baseline is not None:
            snapshot = self.baseline.annotate(snapshot)
        if not steered_only:
            self.shown = (snapshot, view)
        for panel in self.query(SnapshotPanel):
            if panel.STEERED or not steered_only:
                panel.show(snapshot, view)

    def on_screen_resume(self) -> None:
        """Back from a modal: the panels, left as they were while it was open, draw the app's latest
        snapshot just after this frame (the screen answers escape first)."""
        app = self.app
        if isinstance(app, PanelHost):
            self.call_after_refresh(app.redraw, True)

    def show_again(self) -> None:
        if self.shown is not None:
            for panel in self.query(SnapshotPanel):
                panel.show(*self.shown)

    def action_show_tab(self, tab: str) -> None:
        tabs = self.query(TabbedContent)
        if tabs:
            tabs.first().active = tab
