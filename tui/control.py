"""The control panel: what the engine is asked to do and whether it keeps up.

Line 1: target level or asked/achieved arrival rate, in flight, queued, schedule lag.
Line 2: what the chosen window measured (out tok/s, prefill tok/s, req/s, ok, errors).
Line 3: the engine's verdict on the client (live, and the finished steps it judged client-bound), the
figures it stands on and the engine's own thresholds; a loud warning when the client is the bottleneck.
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.style import Style
from rich.text import Text

from loadgen import measures
from loadgen.format import fmt_count, fmt_first_wait, fmt_ms, fmt_num_trimmed, fmt_pct, fmt_rate, fmt_si
from loadgen.run.health import CLIENT_BOUND_CPU_PCT, CLIENT_BOUND_LAG_MS
from loadgen.snapshot import ClientHealth, Snapshot, WindowStats
from tui.format import snapshot_phase, window_label
from tui.line import fit_line, piece
from tui.margins import live_text
from tui.panel import SnapshotPanel
from tui.status import bound_steps, bound_steps_text
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
            ("  sent ", dim),  # requests started per second; "done" (completions) is the window line's
            (per_s(snapshot.achieved_rps), strong),
            ("  cap ", dim),
            (str(snapshot.level) if snapshot.level else "none", ""),
        ]
    parts += [
        ("  ·  in flight ", dim),
        (fmt_count(snapshot.in_flight), strong),
        ("  queued ", dim),
        (fmt_count(snapshot.queued), _s(styles, "warn") if snapshot.queued else ""),
    ]
    if snapshot.backing_off:  # streams waiting after a refusal (429/503, a refused connection)
        parts += [("  ·  ", dim), (f"BACKING OFF {fmt_count(snapshot.backing_off)}", _s(styles, "warn"))]
    stuck = fmt_first_wait(snapshot.waiting_first, snapshot.first_wait_s)
    if stuck:  # a server that answers nothing yet: said where its figures read n/a
        parts += [("  ·  ", dim), (stuck, _s(styles, "warn"))]
    rolling = snapshot.windows.get("rolling")
    lag = rolling.pct(measures.LAG_MS) if rolling is not None else None
    parts += [("  ·  schedule lag p50/p99 ", dim)]
    if lag is None or lag.count == 0:
        parts.append(("n/a", dim))
    else:
        parts.append((f"{fmt_ms(lag.p50)} / {fmt_ms(lag.p99)}", ""))
    return _line(parts, width)


def per_s(rate: float | None) -> str:
    """'12.0/s', '0.99/s': a rate whose unit (requests) its label already says."""
    if rate is None:
        return fmt_rate(rate)
    return f"{fmt_si(rate, 2 if abs(rate) < 1 else 3)}/s"


def window_line(
    stats: WindowStats | None,
    label: str,
    width: int,
    styles: Mapping[str, Style],
    *,
    open_loop: bool = False,
    step_live: bool = True,
    margins: str = "",
) -> Text:
    """What the window measured; in open loop its request rate reads "done 0.99/s" (completions, beside
    the steering line's "sent"); "req/s warming" only while a running step's window is young
    (``step_live``), never once it closes, the plan finished or the run ended."""
    dim, strong = _s(styles, "dim"), _s(styles, "strong")
    if stats is None:
        return _line([(f"{label}: no data yet", dim)], width)
    errors = stats.error_count
    rate = stats.success_rate
    error_text = f"{fmt_count(errors)}"
    if errors and rate is not None:
        error_text += f" ({fmt_pct(1 - rate)})"
    pieces = [
        piece((f"{label}: ", dim), ("out ", dim), (f"{fmt_si(stats.out_tok_s)} tok/s", strong)),
        piece(("  prefill ", dim), (fmt_si(stats.prefill_tok_s), ""), keep=1),
        piece(("  ", ""), *rate_parts(stats, dim, open_loop=open_loop, step_live=step_live), keep=2),
        piece(("  ·  ok ", dim), (fmt_count(stats.ok), ""), ("  err ", dim)),
        piece((error_text, _s(styles, "bad") if errors else "")),
    ]
    if margins:  # the measuring step's margins so far (tui.margins.live_text), where the line has room
        pieces.append(piece(("  ·  ", dim), (margins, ""), keep=1))
    if stats.approx_tokens:
        pieces.append(
            piece(("  ·  ", dim), (f"~{fmt_count(stats.approx_tokens)} approx tokens", _s(styles, "warn")))
        )
    return fit_line(pieces, width)


def rate_parts(
    stats: WindowStats, dim: Style, *, open_loop: bool, step_live: bool
) -> list[tuple[str, Style | str]]:
    warming = step_live and rate_warming(stats)
    if open_loop:
        return [("done ", dim), ("warming", dim) if warming else (per_s(stats.req_s), "")]
    return [("req/s warming", dim)] if warming else [(fmt_rate(stats.req_s), "")]


WARMING_E2E = 2.0  # a step's req/s reads true once its window is this many typical requests long


def rate_warming(stats: WindowStats) -> bool:
    """This step's req/s counts completions over the window so far: until the window is a couple of
    typical requests long (e2e p50), the requests it started have not finished and the rate under-reads
    (69 -> 88 against a true 94.1). "warming" is shown until then."""
    if stats.window != "step":
        return False
    e2e = stats.pct(measures.E2E_MS)
    if e2e.count == 0 or e2e.p50 is None:
        return True
    return stats.duration_s < WARMING_E2E * e2e.p50 / 1000.0


def spikes(health: ClientHealth) -> list[str]:
    """Figures of the latest reports past the engine's own thresholds while the engine, judging the last
    few seconds, does not call the client bound: said as spikes, never as healthy."""
    out = []
    if health.loop_lag_ms_p99 is not None and health.loop_lag_ms_p99 > CLIENT_BOUND_LAG_MS:
        out.append(
            f"loop lag p99 {fmt_ms(health.loop_lag_ms_p99)} > {fmt_num_trimmed(CLIENT_BOUND_LAG_MS)} ms"
        )
    busiest = max(health.cpu_pct, default=0.0)
    if busiest > CLIENT_BOUND_CPU_PCT:
        out.append(f"worker cpu {busiest:.0f}% > {fmt_num_trimmed(CLIENT_BOUND_CPU_PCT)}%")
    return out


def split_reason(reason: str) -> tuple[str, str, str]:
    """'load worker waited for a CPU 35% of the time (loop lag ... max 21 ms): other processes hold this
    machine's cores; run ramp on another host' -> the head, its parenthesised figures (' (...)') and the
    advice ('other ...'), so that a narrow line drops the figures and keeps what to do."""
    head, colon, advice = reason.rpartition(": ")
    if not colon:
        head, advice = reason, ""
    open_at, close_at = head.find(" ("), head.rfind(")")
    if 0 <= open_at < close_at:
        return head[:open_at] + head[close_at + 1 :], head[open_at : close_at + 1], advice
    return head, "", advice


def health_line(snapshot: Snapshot, width: int, styles: Mapping[str, Style]) -> Text:
    """The engine's verdict on the client (``ClientHealth.client_bound``, the rule the record's steps are
    judged by), the figures it stands on, the engine's thresholds, and the finished steps it flagged."""
    dim, warn = _s(styles, "dim"), _s(styles, "warn")
    health = snapshot.health
    cpu = " ".join(f"{c:.0f}%" for c in health.cpu_pct) if health.cpu_pct else "n/a"
    flagged = bound_steps(snapshot)
    flags = piece((" · ", dim), ("⚠ " + bound_steps_text(flagged), warn), keep=6) if flagged else None
    lag = piece(
        ("  ·  loop lag p99 ", dim),
        (fmt_ms(health.loop_lag_ms_p99), ""),
        (" max ", dim),
        (fmt_ms(health.loop_lag_ms_max), ""),
        keep=3,
    )
    rule = (
        f"bound: lag p99 > {fmt_num_trimmed(CLIENT_BOUND_LAG_MS)} ms or cpu > "
        f"{fmt_num_trimmed(CLIENT_BOUND_CPU_PCT)}%"
    )
    if health.client_bound:
        head, detail, advice = split_reason(health.reason or "the load generator cannot keep up")
        bad = _s(styles, "bad")
        # the figures give way first, then what was seen; what to do stays
        pieces = [
            piece((" ⚠ CLIENT-BOUND ", _s(styles, "alarm")), (" ", "")),
            piece((" " + head, bad), keep=5),
            piece((detail, bad), keep=4),
            piece((":" if advice else "", bad), keep=5),
            piece((f" {advice}" if advice else "", bad)),
            lag,
            piece(("  cpu ", dim), (cpu, ""), keep=2),
        ]
    else:
        spiked = spikes(health)
        verdict = (
            piece(("client not bound · spike: ", dim), ("; ".join(spiked), warn))
            if spiked
            else piece(("client ", dim), ("healthy", _s(styles, "good")))
        )
        pieces = [verdict, *([] if spiked else [lag]), piece(("  ·  worker cpu ", dim), (cpu, ""), keep=2)]
        if health.reason:
            pieces.append(piece(("  ·  ", dim), (health.reason, warn), keep=4))
        pieces.append(piece(("  ·  ", dim), (rule, dim), keep=1))
    if flags is not None:  # after the verdict and, when bound, its advice
        pieces.insert(5 if health.client_bound else 1, flags)
    return fit_line(pieces, width)


class ControlPanel(SnapshotPanel):
    STEERED = True
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
        label = window_label(
            view.window, snapshot.rolling_s, snapshot_phase(snapshot.phase, snapshot.warming_up)
        )
        lines = [
            steering_line(snapshot, width, styles),
            window_line(
                snapshot.windows.get(view.window),
                label,
                width,
                styles,
                open_loop=snapshot.mode == "open",
                step_live=snapshot.state == "running"
                and snapshot_phase(snapshot.phase, snapshot.warming_up) in ("warmup", "measure"),
                margins=live_text(snapshot) if view.window == "step" else "",
            ),
            health_line(snapshot, width, styles),
        ]
        return Text("\n").join(lines[: max(1, height)])
