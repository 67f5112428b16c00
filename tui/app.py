"""The live ramp console: a Textual app that renders engine Snapshots and sends the engine commands.

Wiring (the CLI does this)::

    app = RampApp(refresh_hz=4.0)
    engine = Engine(config, on_snapshot=app.snapshot_callback)
    app.attach(engine)
    app.run()          # on mount the app calls engine.start() (start_engine=True)

``run_console(config, refresh_hz=...)`` does exactly that and returns the ``RunOutcome``. Given the run's
``config``, the app offers once to clamp requests that cannot fit the server's context (``tui.fit``): yes
stops this run (its record keeps what it measured) and starts the same run with ``fit_context`` into a new
record, on an engine from ``engine_factory`` (by default a real ``Engine``); no says so in the errors panel.
``RampApp(engine)`` also works when the engine was built first; without a callback the app polls
``engine.latest()`` on its timer instead.

Snapshots arrive on the engine's thread: ``snapshot_callback`` only stores the newest one (an atomic
attribute write). A timer started in ``on_ready`` at ``refresh_hz`` redraws from it, so the redraw rate is
fixed however fast snapshots come, and nothing is redrawn when the snapshot (and the view) did not change;
a snapshot that changes what the operator steers (level, pause, mode, step...) is drawn as it arrives (the
engine publishes one as soon as it applies a command) in the header and the control lines, so a key's effect
is on screen without a tick's wait; the other panels take it at the next tick (``redraw_steered``).
The engine is typed as ``loadgen.run.engine.EngineControl``: anything with those methods will do.

Quitting a live run asks first; then ``engine.stop()`` and ``engine.wait(timeout)`` run in a thread
worker, and the app exits from its own message loop once that worker has finished (never from inside the
worker), or after ``QUIT_TIMEOUT_S`` if the engine does not answer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from textual.app import App
from textual.binding import Binding
from textual.theme import BUILTIN_THEMES
from textual.timer import Timer
from textual.worker import Worker, WorkerState

from loadgen.run.config import RunConfig, RunOutcome
from loadgen.run.engine import Engine, EngineControl
from loadgen.run.signals import StopSignals
from loadgen.snapshot import Snapshot
from tui import keytrace
from tui.actions import EngineActions, Steered
from tui.baseline import open_baseline
from tui.commands import RampCommands
from tui.console import ConsoleScreen
from tui.detail import DetailScreen, ErrorsDetail, StepDetail
from tui.dialogs import ConfirmQuit, FitContext, HelpScreen, key_label
from tui.fit import DECLINED, fit_question, fitted_config, unclamped_warning
from tui.format import metric_title, snapshot_phase, window_label
from tui.histogram_panel import why_empty
from tui.screenshot import save_note, screenshot_name
from tui.status import LIVE_STATES, waiting_for_a_key
from tui.steps import Pricer
from tui.view import ViewState

QUIT_TIMEOUT_S = 2.0
SHUTDOWN_GROUP = "shutdown"  # the thread worker that stops the engine
RESTART_GROUP = "restart"  # the thread worker that stops a run the console starts again (fit context)
SCREENSHOT_GROUP = "screenshot"  # the thread workers that write a screenshot's files (s)
RESTART_WAIT_S = 10.0  # the old run's record gets its end line before the new run starts

EngineFactory = Callable[[RunConfig], EngineControl]


# In 16 colours (TERM=linux, a bare screen) the default theme's orange warning and accent both fall on the
# palette's bright red, the SLO-breach red: p95, sparklines and footer keys read as alarms. This theme puts
# them on yellow and cyan there.
SIXTEEN_COLOUR_THEME = dataclasses.replace(
    BUILTIN_THEMES["textual-dark"], name="ramp-16-colour", warning="#e5e510", accent="#29b8db"
)


def sixteen_colours(color_system: str | None, headless: bool = False) -> bool:
    """Whether the terminal draws 16 colours or fewer: TERM=linux (the Linux console), or a terminal Rich
    drives in 16 colours. A headless app (tests, screenshots) has no terminal: only TERM=linux counts."""
    sixteen = not headless and color_system in ("standard", "windows")
    return os.environ.get("TERM") == "linux" or sixteen


class RampApp(EngineActions):
    CSS_PATH = "ramp.tcss"
    COMMANDS = App.COMMANDS | {RampCommands}
    BINDINGS = [
        Binding("q", "quit", "Quit", show=False, id="quit"),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True, id="quit_ctrl_c"),
        Binding("question_mark,f1", "help", "Help", key_display="?", show=False, id="help"),
    ]

    def __init__(
        self,
        engine: EngineControl | None = None,
        *,
        refresh_hz: float = 4.0,
        title: str = "ramp",
        start_engine: bool = True,
        basic_glyphs: bool | None = None,
        config: RunConfig | None = None,
        engine_factory: EngineFactory | None = None,
    ) -> None:
        super().__init__(engine)
        self.config = config  # the run's; None: the console never restarts it (no fit-context offer)
        self.engine_factory = engine_factory
        self.refresh_hz = refresh_hz
        self.title = title
        self.start_engine = start_engine
        # The Linux console font lacks the eighth blocks: fall back to half blocks there.
        self.basic_glyphs = os.environ.get("TERM") == "linux" if basic_glyphs is None else basic_glyphs
        self.register_theme(SIXTEEN_COLOUR_THEME)
        self.view = ViewState()
        self.shown_snapshot: Snapshot | None = None
        self._drawn: tuple[int, ViewState] | None = None
        self._redraw_timer: Timer | None = None
        self._quitting = False
        self._announced_end = False
        self._last_notice = -1  # the id of the latest engine notice toasted
        self._fit_offered = False
        self._fit_declined = False
        self._restart_to: RunConfig | None = None  # while the old run stops
        self._replaced: Snapshot | None = None  # the old run's last snapshot, never drawn again

    # ---- wiring --------------------------------------------------------------------------------
    def get_default_screen(self) -> ConsoleScreen:
        # --baseline: read once, as the console starts
        return ConsoleScreen(open_baseline(self.config), Pricer.of(self.config))

    def on_mount(self) -> None:
        if sixteen_colours(self.console.color_system, self.is_headless):
            self.theme = SIXTEEN_COLOUR_THEME.name
        if self.engine is not None and self.start_engine:
            self.engine.start()  # returns at once: the engine runs in its own thread and processes

    def on_ready(self) -> None:
        self.set_refresh_hz(self.refresh_hz)
        self.redraw()

    def set_refresh_hz(self, hz: float) -> None:
        self.refresh_hz = max(0.2, min(30.0, hz))
        if self._redraw_timer is not None:
            self._redraw_timer.stop()
        self._redraw_timer = self.set_interval(1 / self.refresh_hz, self.redraw, name="redraw")

    def on_steered(self, message: Steered) -> None:
        keytrace.stamp("steered")
        self.redraw_steered()
        self.traced("shown")

    def redraw(self, force: bool = False) -> None:
        snapshot = self.latest_snapshot
        if snapshot is None or snapshot is self._replaced or self._restart_to is not None:
            return
        if self._fit_declined:
            snapshot = dataclasses.replace(snapshot, warnings=(DECLINED, *snapshot.warnings))  # read first
        key = (snapshot.seq, self.view)
        if key == self._drawn and not force:
            return
        self._drawn = key
        self.shown_snapshot = snapshot
        console = self.screen_stack[0] if self.screen_stack else None
        # Behind a detail or help screen the panels wait (dimmed, under the modal): their drawing would
        # delay its keys under load. They catch up as it closes (``ConsoleScreen.on_screen_resume``).
        covered = isinstance(self.screen, (DetailScreen, HelpScreen))
        if isinstance(console, ConsoleScreen) and not covered:
            console.show(snapshot, self.view)
        if isinstance(self.screen, DetailScreen):
            self.screen.refresh_from(snapshot)
        self.toast_notices(snapshot)
        self.announce_end(snapshot)
        self.offer_fit_context(snapshot)

    def redraw_steered(self) -> None:
        """A snapshot that changes what the keys steer, drawn as it arrives in the header and the control
        lines only: the other panels (charts, tables, a few ms each) take it at the next tick, so that a
        key's effect is never behind a whole repaint. The tick still draws this snapshot everywhere."""
        snapshot = self.latest_snapshot
        if snapshot is None or snapshot is self._replaced or self._restart_to is not None:
            return
        if self._drawn is not None and self._drawn[0] >= snapshot.seq:
            return  # the tick drew it (or a newer one) already
        if self._fit_declined:
            snapshot = dataclasses.replace(snapshot, warnings=(DECLINED, *snapshot.warnings))
        console = self.screen_stack[0] if self.screen_stack else None
        if isinstance(console, ConsoleScreen):
            console.show(snapshot, self.view, steered_only=True)
        self.toast_notices(snapshot)
        self.announce_end(snapshot)

    def toast_notices(self, snapshot: Snapshot) -> None:
        """Each of the engine's notices (what it chose for the operator) once, as a toast."""
        for notice_id, text in snapshot.notices:
            if notice_id > self._last_notice:
                self._last_notice = notice_id
                self.notify(text, markup=False)

    def announce_end(self, snapshot: Snapshot) -> None:
        """Say once that the run ended; in the console a finished plan waits for a key, and says so."""
        if snapshot.state in LIVE_STATES:
            self._announced_end = False  # a finished plan that a key restarted may finish again
            return
        if self._announced_end:
            return
        self._announced_end = True
        if waiting_for_a_key(snapshot):
            self.notify("plan finished: press ↑ or l to start a step, q to quit", markup=False)
            return
        detail = f": {snapshot.message}" if snapshot.message else ""
        self.notify(
            f"run {snapshot.state}{detail} — q to quit",
            severity="error" if snapshot.state == "failed" else "information",
            markup=False,
        )

    # ---- the context offer (tui.fit) ------------------------------------------------------------
    def build_engine(self, config: RunConfig) -> EngineControl:
        if self.engine_factory is not None:
            return self.engine_factory(config)
        return Engine(config, on_snapshot=self.snapshot_callback)

    def offer_fit_context(self, snapshot: Snapshot) -> None:
        """Once, on the console itself (not over another dialog), while the run is live."""
        warning = unclamped_warning(snapshot)
        if warning is None or self._fit_offered or self.config is None or self.config.fit_context:
            return
        if snapshot.state not in LIVE_STATES or not isinstance(self.screen, ConsoleScreen):
            return
        self._fit_offered = True
        fitted = fitted_config(self.config)
        self.push_screen(FitContext(fit_question(warning), fitted.out), self._on_fit_answer)

    def _on_fit_answer(self, clamp: bool | None) -> None:
        if not clamp:
            self._fit_declined = True
            self.redraw(force=True)
            return
        if self.engine is None or self.config is None or self._quitting:
            return
        self._restart_to = fitted_config(self.config)  # a path free now, not when the dialog opened
        self.notify(f"restarting with requests clamped to fit: record {self._restart_to.out}", markup=False)
        engine = self.engine
        self.run_worker(
            lambda: self._stop_for_restart(engine), thread=True, group=RESTART_GROUP, exit_on_error=False
        )

    @staticmethod
    def _stop_for_restart(engine: EngineControl) -> None:
        engine.stop()
        engine.wait(timeout=RESTART_WAIT_S)

    def start_restarted(self) -> None:
        """On the app's loop once the old run stopped: the new run on a new engine, drawn from scratch."""
        config, self._restart_to = self._restart_to, None
        if config is None or self._quitting:
            return
        self._replaced = self.latest_snapshot
        self.config = config
        self._last_notice, self._announced_end, self._drawn = -1, False, None
        engine = self.build_engine(config)
        self.attach(engine)
        engine.start()

    def set_view(self, view: ViewState) -> None:
        self.view = view
        self.redraw()
        self.traced("shown")

    # ---- view -----------------------------------------------------------------------------------
    def action_cycle_metric(self, side: str) -> None:
        self.set_view(self.view.cycle_left() if side == "left" else self.view.cycle_right())
        metric = self.view.left_metric if side == "left" else self.view.right_metric
        why = why_empty(self.shown_snapshot, self.view.window, metric)
        said = f"{side} histogram: {metric_title(metric)}" + (f" — {why}" if why else "")
        self.notify(said, timeout=4 if why else 1.5, markup=False)

    def action_cycle_window(self) -> None:
        self.set_view(self.view.cycle_window())
        shown = self.shown_snapshot
        rolling_s = shown.rolling_s if shown is not None else 10.0
        phase = snapshot_phase(shown.phase, shown.warming_up) if shown is not None else "measure"
        self.notify(f"window: {window_label(self.view.window, rolling_s, phase)}", timeout=1.5)

    def action_cycle_curve(self) -> None:
        self.set_view(self.view.cycle_curve_x())

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        """Save the screen into ``path``, by default the record's folder (else the cwd): the SVG with its
        spaces fixed, a text capture and a PNG beside it (``tui.screenshot``), written off the UI thread."""
        if path is None:
            record = self.shown_snapshot.record_path if self.shown_snapshot is not None else None
            path = str(Path(record).parent if record else Path.cwd())
        svg, svg_path = self.export_screenshot(), Path(path) / (filename or screenshot_name(self.title))
        self.run_worker(
            lambda: self.call_from_thread(self.notify, save_note(svg, svg_path), markup=False),
            thread=True,
            group=SCREENSHOT_GROUP,
            exit_on_error=False,
        )

    def action_step_detail(self) -> None:
        if isinstance(self.screen, DetailScreen):
            self.screen.dismiss(None)
        self.push_screen(StepDetail())
        self.traced("shown")  # RAMP_KEY_TRACE: the modal pushed; "painted" once it is on screen

    def action_error_detail(self) -> None:
        if isinstance(self.screen, DetailScreen):
            self.screen.dismiss(None)
        self.push_screen(ErrorsDetail())
        self.traced("shown")

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            self.screen.dismiss(None)
            return
        keys: list[tuple[str, str]] = []
        console = self.screen_stack[0] if self.screen_stack else None
        # the console's own keys (a replay's screen has other ones)
        for binding in (type(console) if isinstance(console, ConsoleScreen) else ConsoleScreen).BINDINGS:
            if (
                isinstance(binding, Binding)
                and binding.description
                and not (binding.id or "").startswith("tab_")
            ):
                keys.append((key_label(binding.key), binding.description))
        keys.append(("1-6", "Show a tab (small terminals)"))
        keys.append(("ctrl+c", "Quit"))
        keys.append(("ctrl+p", "Command palette"))
        self.push_screen(HelpScreen(keys))

    # ---- quitting -------------------------------------------------------------------------------
    def run_is_live(self) -> bool:
        if self.engine is None:
            return False
        snapshot = self.latest_snapshot
        if snapshot is None:
            return not self.engine.done
        return snapshot.state in LIVE_STATES

    async def action_quit(self) -> None:
        if self._quitting:
            self.exit()  # a second quit while stopping: leave now
            return
        if self.run_is_live() and not isinstance(self.screen, ConfirmQuit):
            self.push_screen(ConfirmQuit(), self._on_quit_answer)
            return
        self.shutdown()

    def _on_quit_answer(self, confirmed: bool | None) -> None:
        if confirmed:
            self.shutdown()

    def shutdown(self) -> None:
        """Stop the engine off the UI thread and exit; never wait longer than ``QUIT_TIMEOUT_S``."""
        self._quitting = True
        if self.engine is None:
            self.exit()
            return
        engine = self.engine
        self.run_worker(
            lambda: self._stop_engine(engine),
            thread=True,
            exclusive=True,
            group=SHUTDOWN_GROUP,
            exit_on_error=False,
        )
        self.set_timer(QUIT_TIMEOUT_S, self.exit)

    @staticmethod
    def _stop_engine(engine: EngineControl) -> None:
        """In a thread worker: stop the engine and wait for it (bounded). It never touches the app: the
        app exits once this worker's end reaches its own message loop (``on_worker_state_changed``)."""
        engine.stop()
        engine.wait(timeout=QUIT_TIMEOUT_S * 0.9)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state not in (WorkerState.SUCCESS, WorkerState.ERROR, WorkerState.CANCELLED):
            return
        if event.worker.group == SHUTDOWN_GROUP:
            self.exit()
        elif event.worker.group == RESTART_GROUP:
            self.start_restarted()


def let_the_terminal_go() -> None:
    """After a hang-up the terminal is gone: Textual's output (``sys.__stderr__``) goes to /dev/null from
    now on, and a SIGCONT (the kernel sends one with the hang-up) no longer resumes application mode on it.
    Otherwise Textual's writer thread dies of the first write (EIO), its bounded queue fills, and the app's
    last writes block forever on it: ramp, its record finished, never exits."""
    stream = sys.__stderr__
    try:
        if stream is not None:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, stream.fileno())
            os.close(null)
    except (OSError, ValueError):
        pass
    if hasattr(signal, "SIGCONT"):
        signal.signal(signal.SIGCONT, signal.SIG_DFL)


def run_console(config: RunConfig, *, refresh_hz: float = 4.0) -> RunOutcome | None:
    """Run the console on a new engine built from ``config`` and return the ``RunOutcome`` of the engine
    running when the app exited (the restarted one after a fit-context restart; None if it did not
    finish)."""
    app = RampApp(refresh_hz=refresh_hz, config=config)
    app.attach(app.build_engine(config))

    def on_signal(signum: int) -> None:
        # SIGTERM / SIGHUP (a dropped SSH session) stop the console like quitting does: the record is
        # finished, its end event names the signal, and ramp exits 128 + N. Runs in the app's thread.
        if signum == getattr(signal, "SIGHUP", None):
            let_the_terminal_go()
        if app.engine is not None:
            app.engine.interrupt(signum)
        asyncio.get_running_loop().call_soon_threadsafe(app.exit)

    with StopSignals(on_signal):
        app.run()
    engine = app.engine
    if engine is None:
        return None
    engine.stop()  # the app may have exited without asking (the run was over): make sure it is stopped
    return engine.wait(timeout=10.0)
