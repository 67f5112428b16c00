"""The operator's commands to the engine, as the console's actions: level and rate steps, typed values,
pause, next step, auto-ramp, mode switch and marks.

``EngineActions`` is the part of the app that talks to the engine: it holds the engine and the newest
snapshot the engine pushed (written by the engine's thread, an atomic attribute write), and turns each key
into one command value (``loadgen.run.protocol``) given to ``engine.send``. ``STEERING_ACTIONS`` names the
actions that steer: ``tui.replay`` refuses exactly those keys. ``RampApp`` (tui.app) adds drawing, views,
details and quitting on top.
"""

from __future__ import annotations

from collections.abc import Callable

from textual import events
from textual.app import App
from textual.message import Message

from loadgen.config import Mode
from loadgen.format import fmt_rate
from loadgen.run.config import RunConfig
from loadgen.run.engine import EngineControl, ensure_resource_tracker
from loadgen.run.protocol import (
    ChangeLevel,
    ControlCommand,
    Mark,
    NextStep,
    Pause,
    Resume,
    ResumeSearch,
    SetAuto,
    SetLevel,
    SetMode,
    SetRate,
    StartSearch,
    StopSearch,
)
from loadgen.snapshot import Snapshot
from tui import keytrace
from tui.dialogs import ValueInput
from tui.prompt import Answer, LinePrompt, Question
from tui.steering import (
    default_range,
    level_delta,
    next_level,
    next_rate,
    parse_level,
    parse_range,
    parse_rate,
)

# The actions below that send the engine a command: a console bound to them steers the run.
STEERING_ACTIONS = frozenset(
    {
        "level",
        "type_level",
        "type_cap",
        "toggle_pause",
        "next_step",
        "toggle_auto",
        "toggle_mode",
        "mark",
        "find_max",
        "stop_search",
    }
)


class Steered(Message):
    """Posted from the engine's thread when a snapshot changes what the operator steers: the app draws it as
    it arrives, not at its next redraw tick (a key's effect on screen in milliseconds, not up to a tick)."""


def steered(snapshot: Snapshot) -> tuple[object, ...]:
    """What the steering keys change (a plan's own step changes too)."""
    s = snapshot
    return (s.state, s.paused, s.mode, s.level, s.rate_rps, s.auto_ramp, s.step_index, s.phase, s.next_load)


def send(engine: EngineControl, cmd: ControlCommand) -> None:
    """Give the engine one of the operator's commands (stamped in a key trace, ``tui.keytrace``)."""
    keytrace.stamp("send", type(cmd).__name__)
    engine.send(cmd)


def prepare_subprocesses() -> None:
    """Start multiprocessing's resource tracker now, before the app runs, the engine's way (deaf to SIGHUP).

    While a Textual app runs, ``sys.stderr`` is a capture object whose ``fileno()`` is -1; the resource
    tracker, launched lazily by the first spawned worker, passes stderr's descriptor to its child and
    fails with "bad value(s) in fds_to_keep". Once running, later spawns do not touch stderr. Started here
    with the default SIGHUP disposition, a hang-up (a dropped SSH session) would kill it with the terminal
    while ramp still finishes its record, and ``Engine.start``'s own deaf start would find it running.
    """
    ensure_resource_tracker()


class EngineActions(App[None]):
    """The engine, the newest snapshot it pushed, and the actions that send it commands."""

    def __init__(self, engine: EngineControl | None = None) -> None:
        super().__init__()
        self.engine = engine
        self.config: RunConfig | None = None  # the run's (``RampApp`` is given it): the search's range
        if engine is not None:
            prepare_subprocesses()
        self._pushed: Snapshot | None = None  # written by the engine's thread

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key) and keytrace.enabled():
            keytrace.stamp("key", event.key, at=event.time)
            keytrace.stamp("keyin", event.key)
        await super().on_event(event)

    def traced(self, stage: str) -> None:
        """In a key trace: ``stage`` now, and ``painted`` once the screen's next refresh has been written."""
        if keytrace.enabled():
            keytrace.stamp(stage)
            self.call_after_refresh(keytrace.stamp, "painted")

    def attach(self, engine: EngineControl) -> None:
        """Give the app its engine (built after the app so it can take ``snapshot_callback``)."""
        self.engine = engine
        prepare_subprocesses()

    def snapshot_callback(self, snapshot: Snapshot) -> None:
        """Called from the engine's thread: keep only the newest snapshot; the timer draws it, or at once a
        message does when it changes what the operator steers (``Steered``: posting one is thread-safe)."""
        previous, self._pushed = self._pushed, snapshot
        if previous is None or steered(previous) != steered(snapshot):
            keytrace.stamp("arrive", str(snapshot.seq))
            self.post_message(Steered())

    @property
    def latest_snapshot(self) -> Snapshot | None:
        snapshot = self._pushed
        if snapshot is None and self.engine is not None:
            snapshot = self.engine.latest()
        return snapshot

    def steering_engine(self) -> EngineControl | None:
        """The engine a steering action sends its command to, or None (and the operator is told why).
        Every action in ``STEERING_ACTIONS`` asks this first: a console that cannot steer (``tui.replay``)
        refuses them all here, before a dialog opens."""
        if self.engine is None:
            self.notify("no engine attached", severity="warning")
        return self.engine

    def _mode(self) -> Mode:
        snapshot = self.latest_snapshot
        return "open" if snapshot is not None and snapshot.mode == "open" else "closed"

    def action_level(self, step: str) -> None:
        engine = self.steering_engine()
        if engine is None:
            return
        snapshot = self.latest_snapshot
        if self._mode() == "open":
            if snapshot is None or snapshot.rate_rps is None:
                self.notify("no rate known yet", severity="warning")
                return
            send(engine, SetRate(next_rate(snapshot.rate_rps, step)))
            return
        delta = level_delta(step)
        if delta is not None:
            send(engine, ChangeLevel(delta))  # relative: correct even if our snapshot is a frame old
        elif snapshot is not None:
            send(engine, SetLevel(next_level(snapshot.level, step)))

    def ask(
        self,
        title: str,
        answer: Answer,
        *,
        value: str = "",
        placeholder: str = "",
        validate: Callable[[str], object] | None = None,
    ) -> None:
        """A value typed by the operator: in the console's own prompt over its footer (``tui.prompt``: no
        screen pushed, nothing repainted behind it), or in a dialog over any other screen."""
        prompts = self.screen.query(LinePrompt)
        if prompts:
            prompts.first().ask(Question(title, value, placeholder, validate, answer))
            return
        dialog = ValueInput(title, value=value, placeholder=placeholder, validate=validate)
        self.push_screen(dialog, answer)

    def prompt_open(self) -> bool:
        return any(prompt.is_open for prompt in self.screen.query(LinePrompt))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # The prompt takes every key it is given, but a priority binding (l, k) is tried before it is.
        if action in STEERING_ACTIONS and self.prompt_open():
            return False
        return super().check_action(action, parameters)

    def action_type_level(self) -> None:
        if self.steering_engine() is None:
            return
        snapshot = self.latest_snapshot
        if self._mode() == "open":
            current = (
                f"{snapshot.rate_rps:g}" if snapshot is not None and snapshot.rate_rps is not None else ""
            )
            self.ask(
                "Arrival rate (req/s)",
                self._apply_rate,
                value=current,
                placeholder="e.g. 12.5",
                validate=parse_rate,
            )
        else:
            current = str(snapshot.level) if snapshot is not None else ""
            self.ask(
                "Concurrency level",
                self._apply_level,
                value=current,
                placeholder="e.g. 32",
                validate=parse_level,
            )

    def action_type_cap(self) -> None:
        if self.steering_engine() is None:
            return
        self.ask(
            "Concurrency cap (0 = none)", self._apply_level, placeholder="e.g. 256", validate=parse_level
        )

    def _apply_level(self, text: str | None) -> None:
        if text is not None and self.engine is not None:
            send(self.engine, SetLevel(parse_level(text)))

    def _apply_rate(self, text: str | None) -> None:
        if text is not None and self.engine is not None:
            rate = parse_rate(text)
            send(self.engine, SetRate(rate))
            self.notify(f"rate → {fmt_rate(rate)}")

    def action_toggle_pause(self) -> None:
        engine = self.steering_engine()
        if engine is None:
            return
        snapshot = self.latest_snapshot
        if snapshot is not None and snapshot.paused:
            send(engine, Resume())
        else:
            send(engine, Pause())

    def action_next_step(self) -> None:
        engine = self.steering_engine()
        if engine is not None:
            send(engine, NextStep())

    def action_toggle_auto(self) -> None:
        engine = self.steering_engine()
        if engine is None:
            return
        snapshot = self.latest_snapshot
        on = not (snapshot.auto_ramp if snapshot is not None else False)
        send(engine, SetAuto(on))  # the header says auto on/off: no toast (its layout costs the key's paint)

    def action_toggle_mode(self) -> None:
        engine = self.steering_engine()
        if engine is None:
            return
        mode: Mode = "open" if self._mode() == "closed" else "closed"
        send(engine, SetMode(mode))  # the header says the loop, the engine's notice what it chose

    def action_mark(self) -> None:
        if self.steering_engine() is None:
            return
        self.ask("Mark this moment", self._apply_mark, placeholder="a note for the record")

    def _apply_mark(self, note: str | None) -> None:
        if note is not None and self.engine is not None:
            send(self.engine, Mark(note.strip() or "mark"))
            self.notify("marked")

    def action_find_max(self) -> None:
        """f: the SLA search — asks its range and starts it; stops it while it drives (or follows the knee
        it found); resumes it once the operator took over."""
        engine = self.steering_engine()
        if engine is None:
            return
        snapshot = self.latest_snapshot
        view = snapshot.search if snapshot is not None else None
        if view is not None and view.state in ("probing", "following"):
            send(engine, StopSearch())
            return
        if view is not None and view.state == "held":
            send(engine, ResumeSearch())
            return
        config = self.config
        plan = config.plan.levels if config is not None and config.plan is not None else ()
        lo, hi = default_range(config.find_max if config is not None else None, plan)
        unit = "req/s" if self._mode() == "open" else "streams"
        self.ask(
            f"Find max: search range LO:HI ({unit})",
            self._apply_search,
            value=f"{lo:g}:{hi:g}",
            placeholder="e.g. 1:64",
            validate=parse_range,
        )

    def _apply_search(self, text: str | None) -> None:
        if text is not None and self.engine is not None:
            send(self.engine, StartSearch(*parse_range(text)))

    def action_stop_search(self) -> None:
        engine = self.steering_engine()
        if engine is not None:
            send(engine, StopSearch())
