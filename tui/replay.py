"""``ramp replay RECORD``: the console opened on a finished record, read-only.

The same app, screen layout and panels as live (``RampApp``, ``ConsoleScreen``'s dashboard), fed by a
``RecordSource`` instead of an engine: it answers ``EngineControl`` with the ``Snapshot`` of the run looked
at on one step (``loadgen.analysis.replay.snapshot_at``) — that step's histograms (decoded from the stored
HDR), its row marked in the steps table and its point on the curve, the whole run's timeline, marks and
errors. ← → (or [ ]) move between steps, home / end go to the first and last, b to the best; w switches
between the step's window and the whole run's. The steering keys only say "replay: read-only": one
override (``ReplayApp.steering_engine``) refuses every steering action, and the keys bound to them are
the live console's own (``steering_keys``).
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from textual.binding import Binding

from loadgen.analysis.replay import ReplayRun, load_replay, snapshot_at
from loadgen.analysis.runs import AnalysisError
from loadgen.exits import EXIT_OK, EXIT_USAGE
from loadgen.run.config import RunOutcome
from loadgen.run.engine import EngineControl
from loadgen.run.protocol import ControlCommand
from loadgen.snapshot import Snapshot
from tui.actions import STEERING_ACTIONS
from tui.app import RampApp
from tui.console import TABS, ConsoleScreen
from tui.detail import DetailScreen, StepDetail
from tui.steps import starred

READ_ONLY = "replay: read-only (a finished record: nothing to steer)"
STEPS = Binding.Group("Step", compact=True)
NAMED_READ_ONLY = ("up", "down", "l", "space")  # the steering keys the help names; the rest say so too


def steering_keys() -> list[str]:
    """Every key the live console steers with (its bindings to ``STEERING_ACTIONS``), in its order: the
    replay binds each to "read-only", so a new steering key needs nothing here."""
    keys: list[str] = []
    for binding in ConsoleScreen.BINDINGS:
        if isinstance(binding, Binding) and action_name(binding.action) in STEERING_ACTIONS:
            keys += binding.key.split(",")
    return keys


def read_only_bindings(id: str) -> list[Binding]:
    """The console's steering keys bound to "read-only" (``app.read_only``): those the help names, under
    "Steering: read-only" (binding ``id``), and the others with no description (``id_more``), so the help
    lists them once."""
    return [
        Binding(",".join(NAMED_READ_ONLY), "app.read_only", "Steering: read-only", show=False, id=id),
        Binding(
            ",".join(key for key in steering_keys() if key not in NAMED_READ_ONLY),
            "app.read_only",
            "",
            show=False,
            id=f"{id}_more",
        ),
    ]


def action_name(action: str) -> str:
    """``app.level('up')`` → ``level``."""
    return action.removeprefix("app.").split("(", 1)[0]


class RecordSource:
    """``EngineControl`` over a finished record: ``latest()`` is the snapshot of the step looked at; the
    run is over (``done``), so there is nothing to start, stop or steer."""

    def __init__(self, run: ReplayRun, position: int = 0) -> None:
        self.run = run
        self.position = 0
        self.snapshot = snapshot_at(run, 0)
        self.select(position)

    def select(self, position: int) -> int:
        """Look at step ``position`` (clamped to the record's steps); returns where it went."""
        self.position = max(0, min(len(self.run.steps) - 1, position))
        self.snapshot = snapshot_at(self.run, self.position)
        return self.position

    def start(self) -> None:
        pass

    def stop(self, cancel: bool = True) -> None:
        pass

    def interrupt(self, signum: int) -> None:
        pass

    def wait(self, timeout: float | None = None) -> RunOutcome | None:
        run = self.run
        return RunOutcome(run.state, run.steps, run.best_step, run.path, run.message)

    def latest(self) -> Snapshot | None:
        return self.snapshot

    @property
    def done(self) -> bool:
        return True

    def send(self, cmd: ControlCommand) -> None:
        """A record cannot be steered: ``ReplayApp.steering_engine`` refuses before a command is built."""


class ReplayScreen(ConsoleScreen):
    """The console's screen with the step keys in the footer instead of the steering ones (which stay
    bound, hidden, to say the replay is read-only)."""

    inherit_bindings = False
    BINDINGS = [
        Binding("q", "app.quit", "Quit", id="quit_console"),
        Binding("question_mark,f1", "app.help", "Help", key_display="?", id="help_console"),
        # priority: the tabs (small terminals) would take ← → for themselves
        Binding(
            "left,left_square_bracket",
            "app.step(-1)",
            "Step -1",
            key_display="←",
            group=STEPS,
            priority=True,
            id="replay_previous",
        ),
        Binding(
            "right,right_square_bracket",
            "app.step(1)",
            "Step +1",
            key_display="→",
            group=STEPS,
            priority=True,
            id="replay_next",
        ),
        Binding("home", "app.step_to('first')", "First step", show=False, id="replay_first"),
        Binding("end", "app.step_to('last')", "Last step", show=False, id="replay_last"),
        Binding("b", "app.step_to('best')", "Best step", id="replay_best"),
        Binding("m", "app.cycle_metric('left')", "Metric", id="cycle_metric_left"),
        Binding("M", "app.cycle_metric('right')", "Right metric", show=False, id="cycle_metric_right"),
        Binding("w", "app.cycle_window", "Window", id="cycle_window"),
        Binding("d", "app.step_detail", "Step details", show=False, id="step_detail"),
        Binding("e", "app.error_detail", "Error details", show=False, id="error_detail"),
        Binding("s", "app.screenshot", "Screenshot", show=False, id="screenshot"),
        *read_only_bindings("replay_read_only"),
        *(
            Binding(str(number), f"show_tab('{tab}')", f"{tab.title()} tab", show=False, id=f"tab_{tab}")
            for number, tab in enumerate(TABS, start=1)
        ),
    ]


class ReplayApp(RampApp):
    """The console on a ``RecordSource``: moves between its steps, never steers."""

    CSS_PATH = str(Path(__file__).with_name("ramp.tcss"))  # absolute: a subclass elsewhere finds it too

    def __init__(self, run: ReplayRun, *, basic_glyphs: bool | None = None) -> None:
        source = RecordSource(run)
        super().__init__(source, refresh_hz=4.0, title="ramp replay", basic_glyphs=basic_glyphs)
        self.source = source
        self.sub_title = run.path

    def get_default_screen(self) -> ReplayScreen:
        return ReplayScreen()

    def on_ready(self) -> None:
        super().on_ready()
        self.notify(f"{READ_ONLY.split(' (')[0]} · ← → other steps · b best · w whole run", markup=False)

    def announce_end(self, snapshot: Snapshot) -> None:
        """A record is over from the start: no "run finished" toast (``on_ready`` says what this is)."""

    def run_is_live(self) -> bool:
        return False  # quit at once: nothing to stop

    # ---- moving between steps ----------------------------------------------------------------------
    def look_at(self, position: int) -> None:
        self.source.select(position)
        self.redraw()
        if isinstance(self.screen, StepDetail):
            self.screen.position = self.source.position
            self.screen.refresh_from(self.source.snapshot)

    def action_step(self, by: int) -> None:
        self.look_at(self.source.position + by)

    def action_step_to(self, where: str) -> None:
        run = self.source.run
        if where == "best":
            best = starred(run.steps, run.best_step)
            if best is None:
                self.notify("no step met the SLO in this record", timeout=2)
                return
            self.look_at(best)
        else:
            self.look_at(0 if where == "first" else len(run.steps) - 1)

    def action_step_detail(self) -> None:
        if isinstance(self.screen, DetailScreen):
            self.screen.dismiss(None)
        detail = StepDetail(position=self.source.position)

        def follow(_: None) -> None:  # the console stays on the step the details were moved to (← →)
            if detail.position is not None:
                self.look_at(detail.position)

        self.push_screen(detail, follow)

    def action_cycle_window(self) -> None:
        """The step looked at, or the whole run: a record keeps no "last N s"."""
        self.set_view(replace(self.view, window="run" if self.view.window == "step" else "step"))
        self.notify(
            "window: " + ("whole run (every step)" if self.view.window == "run" else "this step"), timeout=1.5
        )

    # ---- steering: read-only -----------------------------------------------------------------------
    def action_read_only(self) -> None:
        self.notify(READ_ONLY, severity="warning", timeout=2, markup=False)

    def steering_engine(self) -> EngineControl | None:
        """Every steering action (``tui.actions.STEERING_ACTIONS``), from a key or the palette, ends here."""
        self.action_read_only()
        return None


# The replay screens the docs and screenshots/ show, drawn from a record alone (no run, no clock): the same
# record gives the same screens, so a test can hold the committed screenshots' text to today's code
# (name, terminal size, keys pressed after opening)
REPLAY_SCREENS: tuple[tuple[str, tuple[int, int], tuple[str, ...]], ...] = (
    ("replay-120x36", (120, 36), ("right",)),
    ("replay-80x24", (80, 24), ("right",)),
    ("replay-80x24-steps", (80, 24), ("right", "4")),
    ("replay-80x24-step-detail", (80, 24), ("right", "d")),
)


async def replay_screens(path: str, shown_as: str = "run.jsonl") -> list[tuple[str, str]]:
    """Each of ``REPLAY_SCREENS`` of the record at ``path`` (named ``shown_as`` in its header), as (name,
    SVG): toasts cleared (their fade is timing), every panel drawn from the step looked at."""
    run = replace(load_replay(path), path=shown_as)
    shots: list[tuple[str, str]] = []
    for name, size, keys in REPLAY_SCREENS:
        app = ReplayApp(run, basic_glyphs=False)
        async with app.run_test(size=size) as pilot:
            await pilot.press(*keys)
            await pilot.pause()
            app.clear_notifications()
            app.redraw(force=True)
            await pilot.pause()
            shots.append((name, app.export_screenshot()))
    return shots


def replay_main(path: str) -> int:
    """``ramp replay RECORD``: a bad record is one line naming the file and line, exit 2."""
    try:
        run = load_replay(path)
    except AnalysisError as exc:
        print(f"ramp: {exc}", file=sys.stderr)
        return EXIT_USAGE
    ReplayApp(run).run()
    return EXIT_OK
