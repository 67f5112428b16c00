"""The control panel: what the engine is asked to do and whether it keeps up.

Line 1: target level or asked/achieved arrival rate, in flight, queued, schedule lag.
Line 2: what the chosen window measured (out tok/s, prefill tok/s, req/s, ok, errors).
Line 3: client health (event-loop lag, worker CPU) and a loud warning when the client is the bottleneck.
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.style import Style
from rich.text import Text

from loadgen.format import fmt_count, fmt_ms, fmt_pct, fmt_rate, fmt_si
from loadgen.snapshot import Snapshot, WindowStats
from tui.format import window_label
from tui.panel import SnapshotPanel
from tui.view import ViewState


def _s(styles: Mapping[str, Style], name: str) -> Style:
    return styles.get(name, Style.null())


def _line(parts: list[tuple[str, Style | str]], width: int) -> Text:
    line = Text.assemble(*parts, no_wrap=True, overflow="ellipsis")
    line.truncate(width, overflow="ellipsis")
    return line


def steering_line(snapshot: Snapshot, width: int, styles: Mapping[str, Style]) -> Text:
    dim, strong = _s(styles, "dim"), _s(styles, "strong")
    parts: list[tuple[str, Style | str]]
    if snapshot.mode == "closed":
        parts = [("level ", dim), (str(snapshot.level), strong)]
    else:
        parts = [
            ("λ asked ", dim),
            (fmt_rate(snapshot.rate_rps), strong),
            ("  achieved ", dim),
            (fmt_rate(snapshot.achieved_rps), strong),
            ("  cap ", dim),
            (str(snapshot.level) if snapshot.level else "none", ""),
        ]
    parts += [
        ("  ·  in flight ", dim),
        (fmt_count(snapshot.in_flight), strong),
        ("  queued ", dim),
        (fmt_count(snapshot.queued), _s(styles, "warn") if snapshot.queued else ""),
    ]
    rolling = snapshot.windows.get("rolling")
    lag = rolling.pct("lag_ms") if rolling is not None else None
    parts += [("  ·  schedule lag p50/p99 ", dim)]
    if lag is None or lag.count == 0:
        parts.append(("n/a", dim))
    else:
        parts.append((f"{fmt_ms(lag.p50)} / {fmt_ms(lag.p99)}", ""))
    return _line(parts, width)


def window_line(stats: WindowStats | None, label: str, width: int, styles: Mapping[str, Style]) -> Text:
    dim, strong = _s(styles, "dim"), _s(styles, "strong")
    if stats is None:
        return _line([(f"{label}: no data yet", dim)], width)
    errors = stats.error_count
    rate = stats.success_rate
    error_text = f"{fmt_count(errors)}"
    if errors and rate is not None:
        error_text += f" ({fmt_pct(1 - rate)})"
    parts: list[tuple[str, Style | str]] = [
        (f"{label}: ", dim),
        ("out ", dim),
        (f"{fmt_si(stats.out_tok_s)} tok/s", strong),
        ("  prefill ", dim),
        (fmt_si(stats.prefill_tok_s), ""),
        ("  ", ""),
        (fmt_rate(stats.req_s), ""),
        ("  ·  ok ", dim),
        (fmt_count(stats.ok), ""),
        ("  err ", dim),
        (error_text, _s(styles, "bad") if errors else ""),
    ]
    if stats.approx_tokens:
        parts += [("  ·  ", dim), (f"~{fmt_count(stats.approx_tokens)} approx tokens", _s(styles, "warn"))]
    return _line(parts, width)


def health_line(snapshot: Snapshot, width: int, styles: Mapping[str, Style]) -> Text:
    dim = _s(styles, "dim")
    health = snapshot.health
    cpu = " ".join(f"{c:.0f}%" for c in health.cpu_pct) if health.cpu_pct else "n/a"
    if health.client_bound:
        reason = health.reason or "the load generator cannot keep up"
        return _line(
            [
                (" ⚠ CLIENT-BOUND ", _s(styles, "alarm")),
                ("  ", ""),
                (reason, _s(styles, "bad")),
                ("  ·  loop lag p99 ", dim),
                (fmt_ms(health.loop_lag_ms_p99), ""),
                ("  cpu ", dim),
                (cpu, ""),
            ],
            width,
        )
    parts: list[tuple[str, Style | str]] = [
        ("client: loop lag p99 ", dim),
        (fmt_ms(health.loop_lag_ms_p99), ""),
        (" max ", dim),
        (fmt_ms(health.loop_lag_ms_max), ""),
        ("  ·  worker cpu ", dim),
        (cpu, ""),
        ("  ·  ", dim),
        ("healthy", _s(styles, "good")),
    ]
    if health.reason:
        parts += [("  ·  ", dim), (health.reason, _s(styles, "warn"))]
    return _line(parts, width)


class ControlPanel(SnapshotPanel):
    COMPONENT_CLASSES = {
        "control--dim",
        "control--strong",
        "control--good",
        "control--warn",
        "control--bad",
        "control--alarm",
    }

    def draw(self, snapshot: Snapshot, view: ViewState, width: int, height: int) -> Text:
        styles = {name.removeprefix("control--"): self.style_of(name) for name in self.COMPONENT_CLASSES}
        label = window_label(view.window, snapshot.rolling_s)
        lines = [
            steering_line(snapshot, width, styles),
            window_line(snapshot.windows.get(view.window), label, width, styles),
            health_line(snapshot, width, styles),
        ]
        return Text("\n").join(lines[: max(1, height)])
