"""Server and GPU state beside the client's numbers: GPU memory and utilisation per GPU, KV-cache usage,
running / waiting requests, preemptions, prefix-cache hit rate, the server's own TTFT and token rates.

A value the sources did not provide is "n/a" with the failing source's reason, never a zero; each
failing source has a row with its reason; a run with no telemetry at all says so. The server's TTFT sits
beside the client's only over one set of requests: a finished step's window.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from rich.style import Style
from rich.text import Text

from loadgen.format import fmt_count, fmt_gauge, fmt_gib, fmt_ms, fmt_pct, fmt_si, na
from loadgen.snapshot import ServerTelemetry, Snapshot, StepSummary
from tui.format import source_reasons
from tui.line import Piece, fit_line, piece
from tui.panel import SnapshotPanel
from tui.view import ViewState

LABEL_W = 14


def _s(styles: Mapping[str, Style], name: str) -> Style:
    return styles.get(name, Style.null())


def meter(fraction: float, width: int) -> str:
    """'████░░░░' for a 0..1 fraction."""
    width = max(1, width)
    filled = round(min(1.0, max(0.0, fraction)) * width)
    return "█" * filled + "░" * (width - filled)


def meter_style(fraction: float, styles: Mapping[str, Style]) -> Style:
    if fraction >= 0.95:
        return _s(styles, "bad")
    if fraction >= 0.8:
        return _s(styles, "warn")
    return _s(styles, "good")


Part = tuple[str, Style | str]


@dataclass(slots=True)
class ServerRows:
    """The rows being built: a label column, then styled parts, each row cut at the panel's width."""

    width: int
    styles: Mapping[str, Style]
    lines: list[Text] = field(default_factory=list)

    def style(self, name: str) -> Style:
        return _s(self.styles, name)

    @property
    def dim(self) -> Style:
        return self.style("dim")

    @property
    def strong(self) -> Style:
        return self.style("strong")

    def row(self, label: str, *parts: Part) -> None:
        line = Text.assemble((f"{label:<{LABEL_W}}", self.dim), *parts, no_wrap=True, overflow="ellipsis")
        line.truncate(self.width, overflow="ellipsis")
        self.lines.append(line)

    def fit(self, label: str, *pieces: Piece) -> None:
        """A row whose less important pieces give way on a narrow panel."""
        self.lines.append(fit_line([piece((f"{label:<{LABEL_W}}", self.dim)), *pieces], self.width))

    def value(self, number: str, missing: bool, reason: str) -> Part:
        return (na(reason), self.dim) if missing else (number, self.strong)


def gpu_rows(rows: ServerRows, server: ServerTelemetry, reason: str, bar_w: int) -> None:
    dim, strong = rows.dim, rows.strong
    if not server.gpus:
        rows.row("GPU", (na(reason), dim))
    for gpu in server.gpus:
        name = gpu.name.removeprefix("NVIDIA ").strip()
        label = f"GPU{gpu.index} {name}".strip()
        if len(label) > LABEL_W - 1:  # "GPU0 H200 (si…": cut, and say so
            label = label[: LABEL_W - 2] + "…"
        if gpu.mem_used_mib is not None and gpu.mem_total_mib:
            frac = gpu.mem_used_mib / gpu.mem_total_mib
            mem: list[Part] = [
                (meter(frac, bar_w), meter_style(frac, rows.styles)),
                (f" {fmt_gib(gpu.mem_used_mib)}/{fmt_gib(gpu.mem_total_mib)} GiB", strong),
            ]
        else:
            mem = [("mem ", dim), (na(reason), dim)]
        util = fmt_pct(gpu.util_pct / 100, 0) if gpu.util_pct is not None else "n/a"
        power = f" {gpu.power_w:.0f} W" if gpu.power_w is not None else ""
        rows.row(label, *mem, ("  util ", dim), (util, strong), (power, ""))


def scheduler_rows(rows: ServerRows, server: ServerTelemetry, reason: str, bar_w: int) -> None:
    """KV cache, running/waiting, preemptions, prefix cache and speculative decoding."""
    dim, strong = rows.dim, rows.strong
    if server.kv_cache_usage is not None:
        frac = server.kv_cache_usage
        rows.row(
            "KV cache", (meter(frac, bar_w), meter_style(frac, rows.styles)), (f" {fmt_pct(frac)}", strong)
        )
    else:
        rows.row("KV cache", (na(reason), dim))
    rows.row(
        "requests",
        ("running ", dim),
        rows.value(fmt_gauge(server.running), server.running is None, ""),
        ("  waiting ", dim),
        rows.value(fmt_gauge(server.waiting), server.waiting is None, ""),
        (f"  ({reason})" if server.running is None and server.waiting is None else "", dim),
    )
    if server.preemptions_per_s is None and server.preemptions_total is None:
        rows.row("preemptions", (na(reason), dim))
    else:
        total = (
            f" (total {fmt_count(int(server.preemptions_total))})"
            if server.preemptions_total is not None
            else ""
        )
        bad = bool(server.preemptions_per_s)
        rows.row(
            "preemptions",
            (f"{fmt_si(server.preemptions_per_s)}/s", rows.style("bad") if bad else strong),
            (total, dim),
        )
    rows.row(
        "prefix cache",
        rows.value(
            f"hit {fmt_pct(server.prefix_cache_hit_rate)}",
            server.prefix_cache_hit_rate is None,
            reason,
        ),
    )
    if server.spec_acceptance is not None:
        rows.row("spec decode", ("accept ", dim), (fmt_pct(server.spec_acceptance), strong))


def paired_step(steps: Sequence[StepSummary]) -> StepSummary | None:
    """The latest finished step whose record has the server's TTFT over that step's own window."""
    for step in reversed(steps):
        if (
            step.server.get("server_ttft_p95_ms") is not None
            or step.server.get("server_ttft_p50_ms") is not None
        ):
            return step
    return None


def ttft_rows(rows: ServerRows, server: ServerTelemetry, client: Snapshot | None) -> None:
    """The server's TTFT over its own (rolling) window, labelled as its own; beside the client's only for
    a finished step, over that step's window, where the step's record has the server's figure.

    Live, the server's histograms and the client's step cover different requests (the server counts what
    it answered in its window, the client what it sent in its own), so a live pair would compare apples
    with pears: it is never shown.
    """
    dim, strong = rows.dim, rows.strong
    if server.server_ttft_ms_p50 is not None or server.server_ttft_ms_p95 is not None:
        rows.fit(
            "server TTFT",
            piece(("p95 ", dim), (fmt_ms(server.server_ttft_ms_p95), strong)),
            piece(("  p50 ", dim), (fmt_ms(server.server_ttft_ms_p50), strong), keep=1),
            piece(("  · server's window", dim)),
        )
    step = paired_step(client.steps) if client is not None else None
    if step is None:
        return
    pct = step.stats.pct("ttft_ms")
    number = step.index + 1
    for who, p95, p50 in (
        ("server", step.server.get("server_ttft_p95_ms"), step.server.get("server_ttft_p50_ms")),
        ("client", pct.p95, pct.p50),
    ):
        rows.fit(
            f"step {number} {who}",
            piece(("TTFT p95 ", dim), (fmt_ms(p95), strong)),
            piece(("  p50 ", dim), (fmt_ms(p50), strong), keep=1),
        )


def rate_and_source_rows(rows: ServerRows, server: ServerTelemetry) -> None:
    dim, strong = rows.dim, rows.strong
    if server.gen_tok_s is not None or server.prompt_tok_s is not None:
        rows.row(
            "server tok/s",
            ("gen ", dim),
            (fmt_si(server.gen_tok_s), strong),
            ("  prompt ", dim),
            (fmt_si(server.prompt_tok_s), strong),
        )
    if server.sources:
        parts: list[Part] = []
        for name, state in server.sources.items():
            if parts:
                parts.append(("  ", ""))
            ok = state == "ok"
            # A failing source's reason is on a row of its own below: never a bare "n/a" here.
            state_text = "ok" if ok else "failing ↓"
            parts.append((f"{name} {state_text}", rows.style("good") if ok else rows.style("warn")))
        rows.row("sources", *parts)
        # Each failing source on a row of its own, with its reason (a failing --gpu-cmd says why).
        for name, state in server.sources.items():
            if state != "ok":
                label = name if len(name) < LABEL_W else name[: LABEL_W - 2] + "…"
                rows.row(label, ("n/a: ", dim), (state, rows.style("warn")))


def render_server(
    server: ServerTelemetry | None,
    width: int,
    *,
    styles: Mapping[str, Style] | None = None,
    client: Snapshot | None = None,
) -> Text:
    """The server/GPU rows; with ``client``, its last finished step's TTFT beside the server's over that
    step's window, so the gap between the two (network, HTTP, templating, the client itself) reads at a
    glance over one set of requests."""
    rows = ServerRows(width, styles or {})
    if server is None:
        return Text("no telemetry source", style=rows.dim)
    server_reason = source_reasons(server.sources, gpu=False) or "not reported"
    gpu_reason = source_reasons(server.sources, gpu=True) or "no GPU source"
    bar_w = max(4, min(16, width - LABEL_W - 34))
    gpu_rows(rows, server, gpu_reason, bar_w)
    scheduler_rows(rows, server, server_reason, bar_w)
    ttft_rows(rows, server, client)
    rate_and_source_rows(rows, server)
    return Text("\n").join(rows.lines)


class ServerPanel(SnapshotPanel):
    COMPONENT_CLASSES = {"server--dim", "server--strong", "server--good", "server--warn", "server--bad"}

    def inputs(self, snapshot: Snapshot, view: ViewState) -> object:
        return (snapshot.server, snapshot.steps)

    def update_titles(self, snapshot: Snapshot, view: ViewState) -> None:
        runtime = snapshot.server.runtime if snapshot.server is not None else None
        self.border_title = f"Server · {runtime}" if runtime else "Server & GPU"

    def draw(self, snapshot: Snapshot, view: ViewState, width: int, height: int) -> Text:
        styles = {name.removeprefix("server--"): self.style_of(name) for name in self.COMPONENT_CLASSES}
        return render_server(snapshot.server, width, styles=styles, client=snapshot)
