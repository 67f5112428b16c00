"""The errors panel: warnings found before the load (``Snapshot.warnings``), values that fell outside a
histogram (``WindowStats.out_of_range``), error counts by kind over this step and the run
(``WindowStats.errors``), the latest messages (``Snapshot.recent_errors``), a launched server's last lines.

The panel cuts long lines to its width; ``error_details`` gives the same, uncut, for the errors detail
view (``e``), with the latest full message of each kind (``Snapshot.latest_errors``)."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping

from rich import box
from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.style import Style
from rich.table import Table
from rich.text import Text

from loadgen.format import fmt_count, fmt_pct
from loadgen.snapshot import Snapshot
from tui.format import ellipsize, error_label, metric_title
from tui.line import fit_line, piece
from tui.panel import SnapshotPanel
from tui.step_report import PLAIN, Look
from tui.view import ViewState


def _s(styles: Mapping[str, Style], name: str) -> Style:
    return styles.get(name, Style.null())


LINES = Text("\n", no_wrap=True, overflow="ellipsis")  # joins the panel's lines: none of them wraps


def render_errors(
    snapshot: Snapshot, width: int, height: int, *, styles: Mapping[str, Style] | None = None
) -> Text:
    styles = styles or {}
    dim, bad = _s(styles, "dim"), _s(styles, "bad")
    run = snapshot.windows.get("run")
    step = snapshot.windows.get("step")
    run_errors = dict(run.errors) if run is not None else {}
    step_errors = dict(step.errors) if step is not None else {}
    log = _server_log(snapshot, width, height, dim)
    # Found before the load started (a profile that overflows the server's context): always on top.
    found = list(snapshot.warnings)
    if run is not None and run.out_of_range:
        found.append(out_of_range_text(run.out_of_range))
    # Wrapped by hand: the panel's other lines are cut at its width, a warning is read whole.
    warnings = [
        Text(line, style=_s(styles, "warn"))
        for text in found
        for line in textwrap.wrap("⚠ " + text, max(10, width), subsequent_indent="  ")
    ]
    if not run_errors and not snapshot.recent_errors:
        head = warnings or [Text("no errors", style=_s(styles, "good"))]
        return LINES.join([*head, *log][: max(1, height)])
    lines: list[Text] = list(warnings)
    total = sum(run_errors.values())
    rate = run.success_rate if run is not None else None
    share = f" ({fmt_pct(1 - rate)})" if rate is not None else ""
    lines.append(
        fit_line(
            [
                piece(("run ", dim), (fmt_count(total), bad)),
                piece((share, dim), keep=1),
                piece(("  ·  step ", dim), (fmt_count(sum(step_errors.values())), ""), keep=2),
            ],
            width,
        )
    )
    lines += kind_lines(run_errors, step_errors, width, bad, dim)
    if snapshot.recent_errors:
        lines.append(Text("latest", style=dim))
        room = max(1, height - len(lines))
        for message in snapshot.recent_errors[-room:][::-1]:
            lines.append(Text("  " + ellipsize(message, width - 2), no_wrap=True, overflow="ellipsis"))
    if log:
        lines = lines[: max(1, height - len(log))] + log
    return LINES.join(lines[: max(1, height)])


def kind_lines(
    run_errors: Mapping[str, int], step_errors: Mapping[str, int], width: int, bad: Style, dim: Style
) -> list[Text]:
    """One line a kind, most first: its run count and this step's, fitted like the panel's other lines
    (the step's count gives way, never torn onto the next line)."""
    kinds = sorted(run_errors.items(), key=lambda item: -item[1])
    label_w = max((len(error_label(kind)) for kind, _ in kinds), default=0)
    count_w = max((len(fmt_count(count)) for _, count in kinds), default=0)
    return [
        fit_line(
            [
                piece((f"  {error_label(kind):<{label_w}}  ", ""), (f"{fmt_count(count):>{count_w}}", bad)),
                piece((f"  step {fmt_count(step_errors.get(kind, 0))}", dim), keep=1),
            ],
            width,
        )
        for kind, count in kinds
    ]


def out_of_range_text(counts: Mapping[str, int]) -> str:
    """'out of histogram range (not in the percentiles): e2e latency 1, TTFT 3'."""
    parts = [f"{metric_title(metric)} {fmt_count(count)}" for metric, count in counts.items()]
    return "out of histogram range (not in the percentiles): " + ", ".join(parts)


def _server_log(snapshot: Snapshot, width: int, height: int, dim: Style) -> list[Text]:
    """The launched server's last lines, under the errors (at most half the panel)."""
    if not snapshot.server_log:
        return []
    room = max(1, height // 2 - 1)
    tail = [Text("server log", style=dim)]
    for line in snapshot.server_log[-room:]:
        tail.append(Text("  " + ellipsize(line.rstrip(), width - 2), no_wrap=True, overflow="ellipsis"))
    return tail


class ErrorsPanel(SnapshotPanel):
    COMPONENT_CLASSES = {"errors--dim", "errors--bad", "errors--good", "errors--warn"}

    def inputs(self, snapshot: Snapshot, view: ViewState) -> object:
        run = snapshot.windows.get("run")
        step = snapshot.windows.get("step")
        return (
            dict(run.errors) if run else None,
            dict(step.errors) if step else None,
            snapshot.recent_errors,
            snapshot.warnings,
            dict(run.out_of_range) if run else None,
            run.ok if run and run.errors else None,
            snapshot.server_log,
            snapshot.latest_errors,
        )

    def update_titles(self, snapshot: Snapshot, view: ViewState) -> None:
        run = snapshot.windows.get("run")
        count = run.error_count if run is not None else 0
        self.border_title = f"Errors · {fmt_count(count)}" if count else "Errors"
        self.border_subtitle = "e: full text"

    def draw(self, snapshot: Snapshot, view: ViewState, width: int, height: int) -> Text:
        styles = {name.removeprefix("errors--"): self.style_of(name) for name in self.COMPONENT_CLASSES}
        return render_errors(snapshot, width, height, styles=styles)


def error_details(snapshot: Snapshot, look: Look = PLAIN) -> RenderableType:
    """Everything the panels cut, in full (the errors detail view, ``e``): warnings, counts by kind with the
    latest full message of each kind, the client's health reason, the latest messages, failing telemetry
    sources, a launched server's log."""
    run = snapshot.windows.get("run")
    step = snapshot.windows.get("step")
    run_errors = dict(run.errors) if run is not None else {}
    step_errors = dict(step.errors) if step is not None else {}
    parts: list[RenderableType] = [Text("⚠ " + text, style=look.warn) for text in snapshot.warnings]
    if run is not None and run.out_of_range:
        parts.append(Text("⚠ " + out_of_range_text(run.out_of_range), style=look.warn))
    kinds = sorted(set(run_errors) | set(snapshot.latest_errors), key=lambda kind: -run_errors.get(kind, 0))
    if kinds:
        table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, show_edge=False, expand=True)
        table.add_column("kind", no_wrap=True)
        table.add_column("run", justify="right", no_wrap=True)
        table.add_column("step", justify="right", no_wrap=True)
        table.add_column("latest message", ratio=1, overflow="fold")
        for kind in kinds:
            table.add_row(
                error_label(kind),
                Text(fmt_count(run_errors.get(kind, 0)), style=look.bad if run_errors.get(kind) else ""),
                fmt_count(step_errors.get(kind, 0)),
                Text(snapshot.latest_errors.get(kind, "–")),  # a server's words: data, never markup
            )
        parts.append(table)
    elif not parts:
        parts.append(Text("no errors", style=look.good))
    health = snapshot.health
    client = (
        (f"{'client-bound' if health.client_bound else 'not bound'}: {health.reason}",)
        if health.reason
        else ()
    )
    sections = (
        ("client", client),
        ("latest messages", snapshot.recent_errors[::-1]),
        ("telemetry sources", failing_sources(snapshot)),
        ("server log", snapshot.server_log),
    )
    for title, lines in sections:
        if lines:
            parts.append(Text("\n" + title, style=look.heading))
            # Indented as a block, so that a wrapped message stays under its first line.
            parts += [Padding(Text(line.rstrip(), overflow="fold"), (0, 0, 0, 2)) for line in lines]
    return Group(*parts)


def failing_sources(snapshot: Snapshot) -> tuple[str, ...]:
    sources = snapshot.server.sources if snapshot.server is not None else {}
    return tuple(f"{name}: {state}" for name, state in sources.items() if state != "ok")
