"""The errors panel: warnings found before the load (``Snapshot.warnings``), values that fell outside a
histogram (``WindowStats.out_of_range``), error counts by kind over this step and the run
(``WindowStats.errors``), the latest messages (``Snapshot.recent_errors``), a launched server's last lines."""

from __future__ import annotations

from collections.abc import Mapping

from rich.style import Style
from rich.text import Text

from loadgen.format import fmt_count, fmt_pct
from loadgen.snapshot import Snapshot
from tui.format import ellipsize, error_label, metric_title
from tui.panel import SnapshotPanel
from tui.view import ViewState


def _s(styles: Mapping[str, Style], name: str) -> Style:
    return styles.get(name, Style.null())


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
    warnings = [Text("⚠ " + text, style=_s(styles, "warn")) for text in snapshot.warnings]
    if run is not None and run.out_of_range:
        warnings.append(Text("⚠ " + out_of_range_text(run.out_of_range), style=_s(styles, "warn")))
    if not run_errors and not snapshot.recent_errors:
        head = warnings or [Text("no errors", style=_s(styles, "good"))]
        return Text("\n").join([*head, *log][: max(1, height)])
    lines: list[Text] = list(warnings)
    total = sum(run_errors.values())
    rate = run.success_rate if run is not None else None
    share = f" ({fmt_pct(1 - rate)} of requests)" if rate is not None else ""
    lines.append(
        Text.assemble(
            ("run ", dim),
            (fmt_count(total), bad),
            (share, dim),
            ("  ·  step ", dim),
            (fmt_count(sum(step_errors.values())), ""),
        )
    )
    for kind, count in sorted(run_errors.items(), key=lambda item: -item[1]):
        lines.append(
            Text.assemble(
                (f"  {error_label(kind):<14}", ""),
                (f"{fmt_count(count):>7}", bad),
                (f"  step {fmt_count(step_errors.get(kind, 0))}", dim),
                no_wrap=True,
                overflow="ellipsis",
            )
        )
    if snapshot.recent_errors:
        lines.append(Text("latest", style=dim))
        room = max(1, height - len(lines))
        for message in snapshot.recent_errors[-room:][::-1]:
            lines.append(Text("  " + ellipsize(message, width - 2), no_wrap=True, overflow="ellipsis"))
    if log:
        lines = lines[: max(1, height - len(log))] + log
    return Text("\n").join(lines[: max(1, height)])


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
        )

    def update_titles(self, snapshot: Snapshot, view: ViewState) -> None:
        run = snapshot.windows.get("run")
        count = run.error_count if run is not None else 0
        self.border_title = f"Errors · {fmt_count(count)}" if count else "Errors"

    def draw(self, snapshot: Snapshot, view: ViewState, width: int, height: int) -> Text:
        styles = {name.removeprefix("errors--"): self.style_of(name) for name in self.COMPONENT_CLASSES}
        return render_errors(snapshot, width, height, styles=styles)
