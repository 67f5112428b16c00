"""Server and GPU state beside the client's numbers: GPU memory and utilisation per GPU, KV-cache usage
and headroom (the cache in sequences of this profile, against the level), running / waiting requests and
preemptions with their last minutes as sparklines, prefix-cache hit rate, the server's own TTFT and token
rates. On a short panel the least needed rows give way (the sources when all are ok, the token rates, the
prefix cache), then the sparklines fold into one requests row, and only then the TTFT pairs go.

A value the sources did not provide is "n/a" with the failing source's reason, never a zero; each
failing source has a row with its reason; a run with no telemetry at all says so. The server's TTFT sits
beside the client's only over one set of requests: a finished step's window.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from rich.style import Style
from rich.text import Text

from loadgen import measures
from loadgen.format import fmt_count, fmt_duration, fmt_gauge, fmt_gib, fmt_ms, fmt_pct, fmt_si, na
from loadgen.snapshot import KVHeadroom, ServerPoint, ServerTelemetry, Snapshot, StepSummary
from tui.format import source_reasons
from tui.line import Piece, fit_line, piece
from tui.panel import SnapshotPanel
from tui.plot import resample, spark_glyphs, sparkline
from tui.view import ViewState

LABEL_W = 14
VALUE_W = 7  # the number before a history row's sparkline
# How long a row stays on a short panel: the lowest go first (GPU, KV and requests always stay).
KEEP_ALWAYS, KEEP_HEADROOM, KEEP_PAIR, KEEP_HISTORY, KEEP_PREFIX, KEEP_RATES, KEEP_SOURCES = (
    9,
    8,
    6,
    5,
    4,
    3,
    1,
)


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
    keeps: list[int] = field(default_factory=list)  # each line's KEEP_*: on a short panel the lowest go first
    keep: int = KEEP_ALWAYS  # the KEEP_* of the rows added now

    def style(self, name: str) -> Style:
        return _s(self.styles, name)

    @property
    def dim(self) -> Style:
        return self.style("dim")

    @property
    def strong(self) -> Style:
        return self.style("strong")

    def row(self, label: str, *parts: Part) -> None:
        line = Text.assemble(
            (f"{label:<{LABEL_W - 1}} ", self.dim), *parts, no_wrap=True, overflow="ellipsis"
        )
        line.truncate(self.width, overflow="ellipsis")
        self.add(line)

    def fit(self, label: str, *pieces: Piece) -> None:
        """A row whose less important pieces give way on a narrow panel."""
        self.add(fit_line([piece((f"{label:<{LABEL_W - 1}} ", self.dim)), *pieces], self.width))

    def add(self, line: Text) -> None:
        self.lines.append(line)
        self.keeps.append(self.keep)

    def needed(self, keep: int) -> int:
        """How many rows stay once every row kept less than ``keep`` has given way."""
        return sum(1 for k in self.keeps if k >= keep)

    def within(self, height: int) -> list[Text]:
        """The rows that fit ``height``: the lowest KEEP_* dropped first, the last of equals first."""
        kept = list(range(len(self.lines)))
        while len(kept) > max(1, height):
            lowest = min(self.keeps[i] for i in kept)
            if lowest >= KEEP_ALWAYS:
                break
            kept.remove(max(i for i in kept if self.keeps[i] == lowest))
        return [self.lines[i] for i in kept]

    def value(self, number: str, missing: bool, reason: str) -> Part:
        return (na(reason), self.dim) if missing else (number, self.strong)


def gpu_rows(rows: ServerRows, server: ServerTelemetry, reason: str, bar_w: int) -> None:
    dim, strong = rows.dim, rows.strong
    if not server.gpus:
        rows.row("GPU", (na(reason), dim))
    for gpu in server.gpus:
        name = gpu.name.removeprefix("NVIDIA ").strip()
        label = f"GPU{gpu.index} {name}".strip()
        if gpu.mem_used_mib is not None and gpu.mem_total_mib:
            frac = gpu.mem_used_mib / gpu.mem_total_mib
            mem: list[Part] = [
                (meter(frac, bar_w), meter_style(frac, rows.styles)),
                (f" {fmt_gib(gpu.mem_used_mib)}/{fmt_gib(gpu.mem_total_mib)} GiB", strong),
            ]
        elif gpu.mem_used_mib is not None:  # its size not known (a record's step line has only its use)
            mem = [("mem ", dim), (f"{fmt_gib(gpu.mem_used_mib)} GiB used", strong)]
        else:
            mem = [("mem ", dim), (na(reason), dim)]
        util = fmt_pct(gpu.util_pct / 100, 0) if gpu.util_pct is not None else "n/a"
        power = f" {gpu.power_w:.0f} W" if gpu.power_w is not None else ""
        parts = [*mem, ("  util ", dim), (util, strong), (power, "")]
        if len(label) <= LABEL_W - 1:
            rows.row(label, *parts)
        elif len(label) + 1 + sum(len(text) for text, _ in parts) <= rows.width:
            rows.add(Text.assemble((f"{label} ", dim), *parts, no_wrap=True))  # a wide panel: the whole name
        else:  # "GPU0 H200 (si…": cut, and say so
            rows.row(label[: LABEL_W - 2] + "…", *parts)


def kv_rows(rows: ServerRows, server: ServerTelemetry, reason: str, bar_w: int, level: int | None) -> None:
    """KV-cache usage (of its capacity, when the server states it) and the headroom in sequences."""
    dim, strong = rows.dim, rows.strong
    room = server.kv_headroom
    size = ("", dim) if room is None else (f" of {fmt_si(room.capacity_tokens)} tok", dim)
    if server.kv_cache_usage is not None:
        frac = server.kv_cache_usage
        rows.row(
            "KV cache",
            (meter(frac, bar_w), meter_style(frac, rows.styles)),
            (f" {fmt_pct(frac)}", strong),
            size,
        )
    else:
        rows.row("KV cache", (na(reason), dim), size)
    rows.keep = KEEP_HEADROOM
    headroom_row(rows, room, level)
    rows.keep = KEEP_ALWAYS


def headroom_row(rows: ServerRows, room: KVHeadroom | None, level: int | None) -> None:
    """'~1.40k seqs at 750 tok · ~640 at p95 1.63k', warned when the level is above the first."""
    dim, strong = rows.dim, rows.strong
    if room is None or room.seqs_at_mean is None or room.context_mean is None:
        if room is not None:
            rows.row(
                "KV headroom",
                (f"{fmt_si(room.capacity_tokens)} tokens", strong),
                ("  (no profile context)", dim),
            )
        return
    over = level is not None and level > room.seqs_at_mean
    pieces = [
        piece((f"~{fmt_count(room.seqs_at_mean)} seqs", rows.style("bad") if over else strong)),
        piece((f" at {fmt_si(room.context_mean, 2)} tok", dim)),
    ]
    if room.seqs_at_p95 is not None and room.context_p95 is not None:
        pieces.append(
            piece(
                ("  p95 ", dim),
                (f"~{fmt_count(room.seqs_at_p95)}", strong),
                (f" at {fmt_si(room.context_p95, 2)}", dim),
                keep=2,
            )
        )
    if over:
        pieces.insert(0, piece((f"level {fmt_count(level)} > ", rows.style("bad")), keep=3))
    rows.fit("KV headroom", *pieces)


def history_cells(
    points: Sequence[ServerPoint],
    values: Sequence[float | None],
    width: int,
    basic: bool,
    top: float | None = None,
) -> str:
    """A sparkline of ``values`` (one per point) over the points' time span, ``width`` cells; ``top`` (the
    full cell) shares one scale between rows, so one waiting request beside 64 running draws low."""
    known = [(p.t_s, v) for p, v in zip(points, values, strict=True) if v is not None]
    if width <= 0 or not known:
        return ""
    t0 = min(t for t, _ in known)
    cols = resample([t for t, _ in known], [v for _, v in known], t0, 0.0, width)
    if top is None:
        return sparkline(cols, basic=basic)
    glyphs = spark_glyphs(basic)
    cells = []
    for value in cols:
        if value is None:
            cells.append(" ")
        else:
            level = int(value / top * (len(glyphs) - 1) + 0.5) if top > 0 else 0
            cells.append(glyphs[min(len(glyphs) - 1, level)])
    return "".join(cells)


def history_rows(rows: ServerRows, server: ServerTelemetry, reason: str, basic: bool) -> None:
    """Running and waiting, each with its last minutes as a sparkline on one shared scale; the span is named
    on the first row."""
    dim, strong = rows.dim, rows.strong
    points = server.history
    span = f"  last {fmt_duration(-points[0].t_s)}" if len(points) > 1 else ""
    spark_w = max(0, rows.width - LABEL_W - VALUE_W - 1 - len(span))
    top = max((v for p in points for v in (p.running, p.waiting) if v is not None), default=0.0)
    for label, now, values, tail in (
        ("running", server.running, [p.running for p in points], span),
        ("waiting", server.waiting, [p.waiting for p in points], ""),
    ):
        if now is None:
            rows.row(label, (na(reason), dim))
            continue
        cells = history_cells(points, values, spark_w, basic, top)
        rows.row(label, (f"{fmt_gauge(now):>{VALUE_W}} ", strong), (cells, rows.style("spark")), (tail, dim))


def requests_row(rows: ServerRows, server: ServerTelemetry, reason: str) -> None:
    """Running and waiting on one row, without history: the short panel's form."""
    rows.row(
        "requests",
        ("running ", rows.dim),
        rows.value(fmt_gauge(server.running), server.running is None, ""),
        ("  waiting ", rows.dim),
        rows.value(fmt_gauge(server.waiting), server.waiting is None, ""),
        (f"  ({reason})" if server.running is None and server.waiting is None else "", rows.dim),
    )


def preemption_row(
    rows: ServerRows, server: ServerTelemetry, reason: str, basic: bool, history: bool
) -> None:
    dim, strong = rows.dim, rows.strong
    if server.preemptions_per_s is None and server.preemptions_total is None:
        rows.row("preemptions", (na(reason), dim))
        return
    total = (
        f" (total {fmt_count(int(server.preemptions_total))})" if server.preemptions_total is not None else ""
    )
    bad = bool(server.preemptions_per_s)
    rate = (f"{fmt_si(server.preemptions_per_s)}/s", rows.style("bad") if bad else strong)
    if not history or not server.history:
        rows.row("preemptions", rate, (total, dim))
        return
    spark_w = max(0, rows.width - LABEL_W - VALUE_W - 1 - len(total))
    cells = history_cells(server.history, [p.preemptions for p in server.history], spark_w, basic)
    rows.row(
        "preemptions",
        (f"{fmt_si(server.preemptions_per_s) + '/s':>{VALUE_W}} ", rate[1]),
        (cells, rows.style("spark")),
        (total, dim),
    )


def scheduler_rows(
    rows: ServerRows,
    server: ServerTelemetry,
    reason: str,
    bar_w: int,
    *,
    level: int | None,
    history: bool,
    basic: bool,
) -> None:
    """KV cache and headroom, running/waiting (with history), preemptions, prefix cache and speculative
    decoding."""
    dim, strong = rows.dim, rows.strong
    kv_rows(rows, server, reason, bar_w, level)
    if history and server.history:
        history_rows(rows, server, reason, basic)
    else:
        requests_row(rows, server, reason)
    preemption_row(rows, server, reason, basic, history)
    rows.keep = KEEP_PREFIX
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
    rows.keep = KEEP_ALWAYS


def paired_step(steps: Sequence[StepSummary], selected: int | None = None) -> StepSummary | None:
    """The latest finished step whose record has the server's TTFT over that step's own window; in a
    replay the step looked at (``selected``), or none when its record has no server TTFT."""
    if selected is not None:
        steps = steps[selected : selected + 1]
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
    rows.keep = KEEP_PAIR
    if server.server_ttft_ms_p50 is not None or server.server_ttft_ms_p95 is not None:
        rows.fit(
            "server TTFT",
            piece(("p95 ", dim), (fmt_ms(server.server_ttft_ms_p95), strong)),
            piece(("  p50 ", dim), (fmt_ms(server.server_ttft_ms_p50), strong), keep=1),
            piece(("  · server's window", dim)),
        )
    step = paired_step(client.steps, client.selected) if client is not None else None
    rows.keep = KEEP_ALWAYS
    if step is None:
        return
    rows.keep = KEEP_PAIR
    pct = step.stats.pct(measures.TTFT_MS)
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
    rows.keep = KEEP_ALWAYS


def rate_and_source_rows(rows: ServerRows, server: ServerTelemetry) -> None:
    dim, strong = rows.dim, rows.strong
    rows.keep = KEEP_RATES
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
        all_ok = all(state == "ok" for state in server.sources.values())
        rows.keep = KEEP_SOURCES if all_ok else KEEP_ALWAYS
        rows.row("sources", *parts)
        # Each failing source on a row of its own, with its reason (a failing --gpu-cmd says why).
        for name, state in server.sources.items():
            if state != "ok":
                label = name if len(name) < LABEL_W else name[: LABEL_W - 2] + "…"
                rows.row(label, ("n/a: ", dim), (state, rows.style("warn")))
    rows.keep = KEEP_ALWAYS


def render_server(
    server: ServerTelemetry | None,
    width: int,
    *,
    styles: Mapping[str, Style] | None = None,
    client: Snapshot | None = None,
    height: int | None = None,
    basic: bool = False,
) -> Text:
    """The server/GPU rows; with ``client``, its last finished step's TTFT beside the server's over that
    step's window, so the gap between the two (network, HTTP, templating, the client itself) reads at a
    glance over one set of requests, and its level against the KV headroom. With ``height``, the rows that
    fit it: the sources (when all are ok), token rates and prefix cache go first, then the history
    sparklines fold into one requests row, then the TTFT pairs go."""
    if server is None:
        return Text("no telemetry source", style=(styles or {}).get("dim", Style.null()))
    rows = server_rows(server, width, styles or {}, client, history=True, basic=basic)
    if height is not None and rows.needed(KEEP_HISTORY) > height:
        rows = server_rows(server, width, styles or {}, client, history=False, basic=basic)
    return Text("\n").join(rows.within(height) if height is not None else rows.lines)


def server_rows(
    server: ServerTelemetry,
    width: int,
    styles: Mapping[str, Style],
    client: Snapshot | None,
    *,
    history: bool,
    basic: bool,
) -> ServerRows:
    rows = ServerRows(width, styles)
    server_reason = source_reasons(server.sources, gpu=False) or "not reported"
    gpu_reason = source_reasons(server.sources, gpu=True) or "no GPU source"
    bar_w = max(4, min(16, width - LABEL_W - 34))
    level = client.level if client is not None and client.mode == "closed" else None
    gpu_rows(rows, server, gpu_reason, bar_w)
    scheduler_rows(rows, server, server_reason, bar_w, level=level, history=history, basic=basic)
    ttft_rows(rows, server, client)
    rate_and_source_rows(rows, server)
    return rows


class ServerPanel(SnapshotPanel):
    COMPONENT_CLASSES = {
        "server--dim",
        "server--strong",
        "server--good",
        "server--warn",
        "server--bad",
        "server--spark",
    }

    def inputs(self, snapshot: Snapshot, view: ViewState) -> object:
        return (snapshot.server, snapshot.steps, snapshot.level, snapshot.mode)

    def update_titles(self, snapshot: Snapshot, view: ViewState) -> None:
        runtime = snapshot.server.runtime if snapshot.server is not None else None
        # the runtime's name is the server's word: a Text, never read as markup
        self.border_title = Text(f"Server · {runtime}") if runtime else "Server & GPU"

    def draw(self, snapshot: Snapshot, view: ViewState, width: int, height: int) -> Text:
        styles = {name.removeprefix("server--"): self.style_of(name) for name in self.COMPONENT_CLASSES}
        return render_server(
            snapshot.server, width, styles=styles, client=snapshot, height=height, basic=self.basic_glyphs
        )
