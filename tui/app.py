"""The live ramp console: a Textual app that renders engine Snapshots and sends the engine commands.

Wiring (the CLI does this)::

    app = RampApp(refresh_hz=4.0)
    engine = Engine(config, on_snapshot=app.snapshot_callback)
    app.attach(engine)
    app.run()          # on mount the app calls engine.start() (start_engine=True)

``run_console(config, refresh_hz=...)`` does exactly that and returns the ``RunOutcome``.
``RampApp(engine)`` also works when the engine was built first; without a callback the app polls
``engine.latest()`` on its timer instead.

Snapshots arrive on the engine's thread: ``snapshot_callback`` only stores the newest one (an atomic
attribute write). A timer started in ``on_ready`` at ``refresh_hz`` redraws from it, so the redraw rate is
fixed however fast snapshots come, and nothing is redrawn when the snapshot (and the view) did not change.
The engine is typed as ``loadgen.run.engine.EngineControl``: anything with those methods will do.

Quitting a live run asks first; then ``engine.stop()`` and ``engine.wait(timeout)`` run in a thread
worker, and the app exits from its own message loop once that worker has finished (never from inside the
worker), or after ``QUIT_TIMEOUT_S`` if the engine does not answer.
"""

from __future__ import annotations

import os
from pathlib import Path

from textual.app import App
from textual.binding import Binding
from textual.timer import Timer
from textual.worker import Worker, WorkerState

from loadgen.config import Mode, RunConfig, RunOutcome
from loadgen.format import fmt_rate
from loadgen.run.engine import EngineControl
from loadgen.snapshot import Snapshot
from tui.commands import RampCommands
from tui.console import ConsoleScreen
from tui.dialogs import ConfirmQuit, HelpScreen, ValueInput, key_label
from tui.format import metric_title, window_label
from tui.status import LIVE_STATES
from tui.steering import level_delta, next_level, next_rate, parse_level, parse_rate
from tui.view import ViewState

QUIT_TIMEOUT_S = 2.0
SHUTDOWN_GROUP = "shutdown"  # the thread worker that stops the engine


def prepare_subprocesses() -> None:
    """Start multiprocessing's resource tracker now, before the app runs.

    While a Textual app runs, ``sys.stderr`` is a capture object whose ``fileno()`` is -1; the resource
    tracker, launched lazily by the first spawned worker, passes stderr's descriptor to its child and
    fails with "bad value(s) in fds_to_keep". Once running, later spawns do not touch stderr.
    """
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()


class RampApp(App[None]):
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
    ) -> None:
        super().__init__()
        self.engine = engine
        if engine is not None:
            prepare_subprocesses()
        self.refresh_hz = refresh_hz
        self.title = title
        self.start_engine = start_engine
        # The Linux console font lacks the eighth blocks: fall back to half blocks there.
        self.basic_glyphs = os.environ.get("TERM") == "linux" if basic_glyphs is None else basic_glyphs
        self.view = ViewState()
        self.shown_snapshot: Snapshot | None = None
        self._pushed: Snapshot | None = None  # written by the engine's thread
        self._drawn: tuple[int, ViewState] | None = None
        self._redraw_timer: Timer | None = None
        self._quitting = False
        self._announced_end = False

    # ---- wiring --------------------------------------------------------------------------------
    def attach(self, engine: EngineControl) -> None:
        """Give the app its engine (built after the app so it can take ``snapshot_callback``)."""
        self.engine = engine
        prepare_subprocesses()

    def snapshot_callback(self, snapshot: Snapshot) -> None:
        """Called from the engine's thread: keep only the newest snapshot; the timer draws it."""
        self._pushed = snapshot

    def get_default_screen(self) -> ConsoleScreen:
        return ConsoleScreen()

    def on_mount(self) -> None:
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

    @property
    def latest_snapshot(self) -> Snapshot | None:
        snapshot = self._pushed
        if snapshot is None and self.engine is not None:
            snapshot = self.engine.latest()
        return snapshot

    def redraw(self, force: bool = False) -> None:
        snapshot = self.latest_snapshot
        if snapshot is None:
            return
        key = (snapshot.seq, self.view)
        if key == self._drawn and not force:
            return
        self._drawn = key
        self.shown_snapshot = snapshot
        console = self.screen_stack[0] if self.screen_stack else None
        if isinstance(console, ConsoleScreen):
            console.show(snapshot, self.view)
        if snapshot.state not in LIVE_STATES and not self._announced_end:
            self._announced_end = True
            detail = f": {snapshot.message}" if snapshot.message else ""
            self.notify(
                f"run {snapshot.state}{detail} — q to quit",
                severity="error" if snapshot.state == "failed" else "information",
            )

    def set_view(self, view: ViewState) -> None:
        self.view = view
        self.redraw()

    # ---- engine commands ------------------------------------------------------------------------
    def _engine_or_warn(self) -> EngineControl | None:
        if self.engine is None:
            self.notify("no engine attached", severity="warning")
        return self.engine

    def _mode(self) -> Mode:
        snapshot = self.latest_snapshot
        return "open" if snapshot is not None and snapshot.mode == "open" else "closed"

    def action_level(self, step: str) -> None:
        engine = self._engine_or_warn()
        if engine is None:
            return
        snapshot = self.latest_snapshot
        if self._mode() == "open":
            if snapshot is None or snapshot.rate_rps is None:
                self.notify("no rate known yet", severity="warning")
                return
            engine.set_rate(next_rate(snapshot.rate_rps, step))
            return
        delta = level_delta(step)
        if delta is not None:
            engine.change_level(delta)  # relative: correct even if our snapshot is a frame old
        elif snapshot is not None:
            engine.set_level(next_level(snapshot.level, step))

    def action_type_level(self) -> None:
        if self._engine_or_warn() is None:
            return
        snapshot = self.latest_snapshot
        if self._mode() == "open":
            current = (
                f"{snapshot.rate_rps:g}" if snapshot is not None and snapshot.rate_rps is not None else ""
            )
            dialog = ValueInput(
                "Arrival rate (req/s)", value=current, placeholder="e.g. 12.5", validate=parse_rate
            )
            self.push_screen(dialog, self._apply_rate)
        else:
            current = str(snapshot.level) if snapshot is not None else ""
            dialog = ValueInput(
                "Concurrency level", value=current, placeholder="e.g. 32", validate=parse_level
            )
            self.push_screen(dialog, self._apply_level)

    def action_type_cap(self) -> None:
        if self._engine_or_warn() is None:
            return
        dialog = ValueInput("Concurrency cap (0 = none)", placeholder="e.g. 256", validate=parse_level)
        self.push_screen(dialog, self._apply_level)

    def _apply_level(self, text: str | None) -> None:
        if text is not None and self.engine is not None:
            self.engine.set_level(parse_level(text))

    def _apply_rate(self, text: str | None) -> None:
        if text is not None and self.engine is not None:
            rate = parse_rate(text)
            self.engine.set_rate(rate)
            self.notify(f"rate → {fmt_rate(rate)}")

    def action_toggle_pause(self) -> None:
        engine = self._engine_or_warn()
        if engine is None:
            return
        snapshot = self.latest_snapshot
        if snapshot is not None and snapshot.paused:
            engine.resume()
        else:
            engine.pause()

    def action_next_step(self) -> None:
        engine = self._engine_or_warn()
        if engine is not None:
            engine.next_step()

    def action_toggle_auto(self) -> None:
        engine = self._engine_or_warn()
        if engine is None:
            return
        snapshot = self.latest_snapshot
        on = not (snapshot.auto_ramp if snapshot is not None else False)
        engine.set_auto(on)
        self.notify(f"auto-ramp {'on' if on else 'off'}")

    def action_toggle_mode(self) -> None:
        engine = self._engine_or_warn()
        if engine is None:
            return
        mode: Mode = "open" if self._mode() == "closed" else "closed"
        engine.set_mode(mode)
        self.notify(f"switching to {mode} loop")

    def action_mark(self) -> None:
        if self._engine_or_warn() is None:
            return
        self.push_screen(
            ValueInput("Mark this moment", placeholder="a note for the record"), self._apply_mark
        )

    def _apply_mark(self, note: str | None) -> None:
        if note is not None and self.engine is not None:
            self.engine.mark(note.strip() or "mark")
            self.notify("marked")

    # ---- view -----------------------------------------------------------------------------------
    def action_cycle_metric(self, side: str) -> None:
        self.set_view(self.view.cycle_left() if side == "left" else self.view.cycle_right())
        metric = self.view.left_metric if side == "left" else self.view.right_metric
        self.notify(f"{side} histogram: {metric_title(metric)}", timeout=1.5)

    def action_cycle_window(self) -> None:
        self.set_view(self.view.cycle_window())
        rolling_s = self.shown_snapshot.rolling_s if self.shown_snapshot is not None else 10.0
        self.notify(f"window: {window_label(self.view.window, rolling_s)}", timeout=1.5)

    def action_cycle_curve(self) -> None:
        self.set_view(self.view.cycle_curve_x())

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        """Save an SVG of the screen into ``path``, by default the record's folder (else the cwd)."""
        if path is None:
            record = self.shown_snapshot.record_path if self.shown_snapshot is not None else None
            path = str(Path(record).parent if record else Path.cwd())
        saved = self.save_screenshot(filename=filename, path=path)
        self.notify(f"screenshot saved: {saved}")

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            self.screen.dismiss(None)
            return
        keys: list[tuple[str, str]] = []
        for binding in ConsoleScreen.BINDINGS:
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
        if event.worker.group == SHUTDOWN_GROUP and event.state in (
            WorkerState.SUCCESS,
            WorkerState.ERROR,
            WorkerState.CANCELLED,
        ):
            self.exit()


def run_console(config: RunConfig, *, refresh_hz: float = 4.0) -> RunOutcome | None:
    """Run the console on a new engine built from ``config`` and return the engine's ``RunOutcome`` once
    the app has exited (None if the engine did not finish)."""
    from loadgen.run.engine import Engine

    app = RampApp(refresh_hz=refresh_hz)
    engine = Engine(config, on_snapshot=app.snapshot_callback)
    app.attach(engine)
    app.run()
    engine.stop()  # the app may have exited without asking (the run was over): make sure it is stopped
    return engine.wait(timeout=10.0)
