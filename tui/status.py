"""The status line: what is being tested (target, model, runtime, profile, record) and where the run is
(state, the step's phase, mode, step and countdown, elapsed, auto-ramp, and the engine's verdict on the
client: live, and for every finished step judged client-bound)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace

from rich.style import Style
from rich.text import Text

from loadgen.format import fmt_count, fmt_duration
from loadgen.snapshot import Snapshot
from tui.format import mode_label, snapshot_phase, step_label
from tui.knee import search_parts
from tui.line import Piece, fit_line, piece
from tui.panel import SnapshotPanel
from tui.view import ViewState

LIVE_STATES = ("starting", "running", "paused")
DOT = " · "


def _s(styles: Mapping[str, Style], name: str) -> Style:
    return styles.get(name, Style.null())


PHASE_BADGES = {
    "warmup": ("WARM-UP", "warm-up"),
    "measure": ("MEASURING", "measuring"),
    "idle": ("IDLE", "dim"),
}
IDLE_HINT = "idle: press ↑ or l to start a step"
# ramp replay: the step looked at ("step 2/3") outlasts the run's message and the client verdict on a
# narrow line (they are the same for every step; the step is what ← → change)
REPLAY_STEP_KEEP = 9
# An attached console that has not reached a live run's ramp for this long says the run may have ended.
MAY_HAVE_ENDED_S = 15.0


def lost_line(snapshot: Snapshot, width: int, styles: Mapping[str, Style], lost_s: float) -> Text:
    """An attached console's second line once the link to a live run is lost: how long, what was last
    seen (never as if it were still so), and after ``MAY_HAVE_ENDED_S`` where the run's record is."""
    dim = _s(styles, "dim")
    last = snapshot_phase(snapshot.phase, snapshot.warming_up) if snapshot.state == "running" else ""
    shown = PHASE_BADGES.get(last, (last.upper(), ""))[0].lower() if last and last != "idle" else ""
    seen = f"last seen {snapshot.state}" + (f", {shown}" if shown else "")
    pieces = [
        piece((f" LOST {fmt_duration(lost_s)} ", _s(styles, "alarm"))),
        piece((" ", ""), (seen, dim), keep=5),
        piece(
            (DOT, dim),
            (mode_label(snapshot.mode, snapshot.level, snapshot.rate_rps, snapshot.arrival), dim),
            keep=3,
        ),
        piece((f"{DOT}at ", dim), (fmt_duration(snapshot.elapsed_s), dim), keep=1),
    ]
    if lost_s >= MAY_HAVE_ENDED_S:
        record = snapshot.record_path or "on the machine that ran it"
        pieces.append(
            piece((DOT, dim), (f"the run may have ended; its record is {record}", _s(styles, "warn")), keep=6)
        )
    return fit_line(pieces, width)


def state_badge(snapshot: Snapshot) -> str:
    return snapshot.state.upper()


def identity_line(snapshot: Snapshot, width: int, styles: Mapping[str, Style]) -> Text:
    line = _identity(snapshot, snapshot.model, styles)
    if line.cell_len > width:
        # Narrow terminal: the model's short name and the record's file name keep more on the line.
        short = replace(snapshot, record_path=os.path.basename(snapshot.record_path or "") or None)
        line = _identity(short, snapshot.model.rsplit("/", 1)[-1], styles)
    line.truncate(width, overflow="ellipsis")
    return line


def _identity(snapshot: Snapshot, model: str, styles: Mapping[str, Style]) -> Text:
    runtime = snapshot.runtime or "runtime n/a"
    if snapshot.runtime and snapshot.runtime_version:
        runtime = f"{snapshot.runtime} {snapshot.runtime_version}"
    line = Text.assemble(
        (snapshot.url, _s(styles, "strong")),
        ("  ", ""),
        (model, _s(styles, "strong")),
        ("  ·  ", _s(styles, "dim")),
        (runtime, ""),
        ("  ·  profile ", _s(styles, "dim")),
        (snapshot.profile, ""),
        ("  ·  record ", _s(styles, "dim")),
        (snapshot.record_path or "none", ""),
        no_wrap=True,
        overflow="ellipsis",
    )
    return line


def phase_badge(snapshot: Snapshot) -> tuple[str, str] | None:
    """Where a running step stands, as (text, style): WARM-UP, MEASURING, CLOSING (N left), SETTLING
    (N surplus). None when the state badge says it all (paused, stopped...)."""
    if snapshot.state != "running":
        return None
    phase = snapshot_phase(snapshot.phase, snapshot.warming_up)
    if phase == "closing":
        return f"CLOSING ({fmt_count(snapshot.closing_left)} left)", "closing"
    if phase == "settling":
        return f"SETTLING ({fmt_count(snapshot.surplus)} surplus)", "settling"
    return PHASE_BADGES.get(phase, (phase.upper(), "dim"))


def waiting_for_a_key(snapshot: Snapshot) -> bool:
    """A finished plan in the console: the run stays live at load 0 until a load key starts a step."""
    return snapshot.state == "finished" and snapshot.phase == "idle"


def bound_steps(snapshot: Snapshot) -> list[int]:
    """The numbers (1-based, as everywhere on screen) of the finished steps judged client-bound."""
    return [step.index + 1 for step in snapshot.steps if step.client_bound]


def bound_steps_text(numbers: list[int]) -> str:
    """'step 2 client-bound', 'steps 2, 5 client-bound', '4 steps client-bound'."""
    if len(numbers) == 1:
        return f"step {numbers[0]} client-bound"
    if len(numbers) <= 3:
        return f"steps {', '.join(map(str, numbers))} client-bound"
    return f"{len(numbers)} steps client-bound"


def client_piece(snapshot: Snapshot, styles: Mapping[str, Style]) -> Piece:
    """The engine's own verdict on the client, live and for the finished steps (one rule: the record's)."""
    dot = (DOT, _s(styles, "dim"))
    if snapshot.health.client_bound:
        return piece(dot, (" ⚠ CLIENT-BOUND ", _s(styles, "alarm")))
    flagged = bound_steps(snapshot)
    if flagged:
        return piece(dot, ("⚠ " + bound_steps_text(flagged), _s(styles, "warn")), keep=6)
    return piece(dot, ("client ok", _s(styles, "good")), keep=3)


def next_text(snapshot: Snapshot) -> str:
    """'32' (the level n goes to), '24 req/s' in open loop, 'none' at the plan's end or the ceiling."""
    value = snapshot.next_load
    if value is None:
        return "none"
    return f"{value:g} req/s" if snapshot.mode == "open" else f"{value:g}"


def progress_line(
    snapshot: Snapshot,
    width: int,
    styles: Mapping[str, Style],
    source: str = "",
    lost_s: float | None = None,
) -> Text:
    """The run's second line; ``source``: the view's badge (``ViewState.badge``: ramp attach's); ``lost_s``:
    how long an attached console has not reached the live run (``lost_line``)."""
    if lost_s is not None:
        return lost_line(snapshot, width, styles, lost_s)
    dim = _s(styles, "dim")
    badge = state_badge(snapshot)
    pieces = [piece((f" {badge} ", styles.get(badge.lower(), dim)))]
    if snapshot.selected is not None:  # ramp replay: a finished record, looked at step by step
        pieces.append(piece((" ", ""), (" REPLAY ", _s(styles, "replay"))))
    if source:  # ramp attach: another ramp's run, read-only
        pieces.append(piece((" ", ""), (f" {source} ", _s(styles, "replay"))))
    phase = phase_badge(snapshot)
    if phase is not None:
        pieces.append(piece((" ", ""), (f" {phase[0]} ", _s(styles, phase[1]))))
    elif waiting_for_a_key(snapshot) and not source:  # an attached console's keys start nothing
        pieces.append(piece((" ", ""), (IDLE_HINT, _s(styles, "warn"))))
    mode = mode_label(snapshot.mode, snapshot.level, snapshot.rate_rps, snapshot.arrival)
    pieces += [
        piece((" ", ""), (mode, _s(styles, "strong"))),
        piece(
            (DOT, dim),
            (step_label(snapshot.step_index, snapshot.step_count, None, auto=snapshot.auto_ramp), ""),
            keep=7 if snapshot.selected is None else REPLAY_STEP_KEEP,  # a replay's "step 2/3" is where it is
        ),
    ]
    doing, why = search_parts(snapshot)  # what the search does, kept before the rest; why, where it fits
    if doing:
        pieces += [piece((DOT, dim), (doing, _s(styles, "strong")), keep=8), piece((why, ""), keep=5)]
    counting_down = snapshot_phase(snapshot.phase, snapshot.warming_up) in ("warmup", "measure")
    if snapshot.step_remaining_s is not None and snapshot.step_count is not None and counting_down:
        pieces.append(piece((" · ", dim), (f"{fmt_duration(snapshot.step_remaining_s)} left", ""), keep=4))
    if snapshot.selected is None and snapshot.state in LIVE_STATES:  # where n (and the auto-ramp) go
        pieces.append(piece((f"{DOT}n → ", dim), (next_text(snapshot), ""), keep=2))
    pieces += [
        piece((f"{DOT}elapsed ", dim), (fmt_duration(snapshot.elapsed_s), ""), keep=1),
        *(
            [piece((f"{DOT}auto ", dim), ("on" if snapshot.auto_ramp else "off", ""), keep=2)]
            if snapshot.selected is None
            else []
        ),
        client_piece(snapshot, styles),
    ]
    if snapshot.message:
        pieces.append(piece((DOT, dim), (snapshot.message, _s(styles, "failed")), keep=8))
    return fit_line(pieces, width)


class StatusBar(SnapshotPanel):
    """Two lines at the top of the screen."""

    STEERED = True

    COMPONENT_CLASSES = {
        "status--strong",
        "status--dim",
        "status--starting",
        "status--running",
        "status--warm-up",
        "status--measuring",
        "status--closing",
        "status--settling",
        "status--warn",
        "status--good",
        "status--alarm",
        "status--paused",
        "status--finished",
        "status--stopped",
        "status--failed",
        "status--replay",
    }
    DEFAULT_CSS = """
    StatusBar > .status--replay { background: $accent; color: $text; text-style: bold; }
    """

    def inputs(self, snapshot: Snapshot, view: ViewState) -> object:
        # The clock ticks every snapshot, so the status line changes with each one; key on the seq.
        return snapshot.seq, view.badge, None if view.lost_s is None else int(view.lost_s)

    def draw(self, snapshot: Snapshot, view: ViewState, width: int, height: int) -> Text:
        styles = {name.removeprefix("status--"): self.style_of(name) for name in self.COMPONENT_CLASSES}
        return Text("\n").join(
            [
                identity_line(snapshot, width, styles),
                progress_line(snapshot, width, styles, view.badge, view.lost_s),
            ]
        )
