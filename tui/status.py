"""The status line: what is being tested (target, model, runtime, profile, record) and where the run is
(state, mode, auto-ramp, step and countdown, elapsed, warm-up)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace

from rich.style import Style
from rich.text import Text

from loadgen.format import fmt_duration
from loadgen.snapshot import Snapshot
from tui.format import mode_label, step_label
from tui.panel import SnapshotPanel
from tui.view import ViewState

LIVE_STATES = ("starting", "running", "paused")


def _s(styles: Mapping[str, Style], name: str) -> Style:
    return styles.get(name, Style.null())


def state_badge(snapshot: Snapshot) -> str:
    if snapshot.state == "running" and snapshot.warming_up:
        return "WARM-UP"
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


def progress_line(snapshot: Snapshot, width: int, styles: Mapping[str, Style]) -> Text:
    badge = state_badge(snapshot)
    badge_style = styles.get(badge.lower(), _s(styles, "dim"))
    parts: list[tuple[str, Style | str]] = [
        (f" {badge} ", badge_style),
        ("  ", ""),
        (
            mode_label(snapshot.mode, snapshot.level, snapshot.rate_rps, snapshot.arrival),
            _s(styles, "strong"),
        ),
        ("  ·  ", _s(styles, "dim")),
        (step_label(snapshot.step_index, snapshot.step_count, snapshot.step_remaining_s), ""),
        ("  ·  elapsed ", _s(styles, "dim")),
        (fmt_duration(snapshot.elapsed_s), ""),
        ("  ·  auto ", _s(styles, "dim")),
        ("on" if snapshot.auto_ramp else "off", ""),
    ]
    if snapshot.message:
        parts += [("  ·  ", _s(styles, "dim")), (snapshot.message, _s(styles, "failed"))]
    line = Text.assemble(*parts, no_wrap=True, overflow="ellipsis")
    line.truncate(width, overflow="ellipsis")
    return line


class StatusBar(SnapshotPanel):
    """Two lines at the top of the screen."""

    COMPONENT_CLASSES = {
        "status--strong",
        "status--dim",
        "status--starting",
        "status--running",
        "status--warm-up",
        "status--paused",
        "status--finished",
        "status--stopped",
        "status--failed",
    }

    def inputs(self, snapshot: Snapshot, view: ViewState) -> object:
        # The clock ticks every snapshot, so the status line changes with each one; key on the seq.
        return snapshot.seq

    def draw(self, snapshot: Snapshot, view: ViewState, width: int, height: int) -> Text:
        styles = {name.removeprefix("status--"): self.style_of(name) for name in self.COMPONENT_CLASSES}
        return Text("\n").join(
            [identity_line(snapshot, width, styles), progress_line(snapshot, width, styles)]
        )
