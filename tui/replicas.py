"""Several replicas as one target: each replica's share of the last N seconds (requests, output tok/s,
TTFT p50/p95, errors, KV-cache usage), and a warning for each replica that served nothing — over the last
N seconds, and in the last finished step (what its record line flags).

Hidden with a target of one server: the console's layout is then what it always was. ``render_replicas``
is a pure function of the snapshot; the panel only decides when to draw it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.style import Style
from rich.text import Text
from textual.containers import Horizontal

from loadgen.format import fmt_count, fmt_ms_short, fmt_pct, fmt_si
from loadgen.metrics.replicas import idle_replicas
from loadgen.snapshot import ReplicaStats, Snapshot
from loadgen.types import REPLICA_POLICY
from tui.panel import SnapshotPanel
from tui.view import ViewState

# (heading, width): the columns after the replica's name, when the panel is wide enough for them all
COLUMNS = (("req", 7), ("tok/s", 7), ("TTFT p50/p95", 13), ("err", 6), ("KV", 7))
NAME_W = 2
TABLE_W = NAME_W + sum(w for _, w in COLUMNS)


def _ttft(r: ReplicaStats) -> str:
    if r.ttft_ms_p50 is None or r.ttft_ms_p95 is None:
        return "n/a"
    return f"{fmt_ms_short(r.ttft_ms_p50)}/{fmt_ms_short(r.ttft_ms_p95)}"


def _cells(r: ReplicaStats) -> tuple[str, ...]:
    tok_s = fmt_si(r.out_tok_s) if r.out_tok_s is not None else "n/a"
    kv = fmt_pct(r.kv_usage, 0) if r.kv_usage is not None else "n/a"
    return (fmt_count(r.requests), tok_s, _ttft(r), fmt_count(r.errors), kv)


def _table(replicas: Sequence[ReplicaStats], width: int, dim: Style, strong: Style, bad: Style) -> list[Text]:
    """One row a replica (its URL after the figures when there is room), or two on a narrow panel."""
    if width < TABLE_W:
        return _stacked(replicas, dim, strong, bad)
    lines = [Text(" " * NAME_W + "".join(f"{h:>{w}}" for h, w in COLUMNS), style=dim)]
    url_w = width - TABLE_W - 2
    for r in replicas:
        line = Text(f"{r.name:<{NAME_W}}", style=strong)
        alarm = (r.ok == 0, False, False, r.errors > 0, False)  # served nothing; failed requests
        for text, (_, w), flagged in zip(_cells(r), COLUMNS, alarm, strict=True):
            line.append(f"{text:>{w}}", style=bad if flagged else "")
        if url_w >= 12 and r.url:
            line.append("  " + r.url.removeprefix("http://"), style=dim)
        lines.append(line)
    return lines


def _stacked(replicas: Sequence[ReplicaStats], dim: Style, strong: Style, bad: Style) -> list[Text]:
    lines = []
    for r in replicas:
        req, tok_s, ttft, errors, kv = _cells(r)
        lines.append(
            Text.assemble(
                (f"{r.name:<{NAME_W}}", strong),
                ("req ", dim),
                (req, bad if r.ok == 0 else ""),
                ("  tok/s ", dim),
                tok_s,
                ("  err ", dim),
                (errors, bad if r.errors else ""),
            )
        )
        lines.append(Text.assemble(" " * NAME_W, ("TTFT ", dim), ttft, ("  KV ", dim), kv))
    return lines


def render_replicas(snapshot: Snapshot, width: int, styles: Mapping[str, Style] | None = None) -> Text:
    """The replica table and its warnings, each line cut at ``width``."""
    styles = styles or {}
    dim, strong = styles.get("dim", Style(dim=True)), styles.get("strong", Style(bold=True))
    bad = styles.get("bad", Style(color="red", bold=True))
    replicas: Sequence[ReplicaStats] = snapshot.replicas
    lines = _table(replicas, width, dim, strong, bad)
    for line in lines:
        line.truncate(width, overflow="ellipsis")
    # The warnings wrap rather than lose their end: they are the point of the panel.
    if replicas and any(r.requests for r in replicas):
        for note in idle_replicas(replicas):
            lines.append(Text(f"⚠ {note} in the last {snapshot.rolling_s:g} s", style=bad))
    last = snapshot.steps[-1] if snapshot.steps else None
    if last is not None:
        for note in last.idle_replicas:
            lines.append(Text(f"⚠ step {last.index + 1}: {note}", style=bad))
    return Text("\n").join(lines)


class ReplicasPanel(SnapshotPanel):
    """The per-replica table; shown only when the target has several replicas."""

    DEFAULT_CSS = """
    ReplicasPanel { display: none; }
    .replicas--dim { color: $text-muted; }
    .replicas--strong { text-style: bold; }
    .replicas--bad { color: $error; text-style: bold; }
    """
    COMPONENT_CLASSES = {"replicas--dim", "replicas--strong", "replicas--bad"}

    def on_mount(self) -> None:
        # In a row of the grid it is as wide as the server panel beside it (the app's CSS gives every panel
        # 1fr, over any default of ours); in a tab it takes the width, below the server panel.
        if isinstance(self.parent, Horizontal):
            self.styles.width = "2fr"
        super().on_mount()

    def inputs(self, snapshot: Snapshot, view: ViewState) -> object:
        return (snapshot.replicas, snapshot.steps[-1:] if snapshot.steps else ())

    def update_titles(self, snapshot: Snapshot, view: ViewState) -> None:
        self.display = bool(snapshot.replicas)
        self.border_title = f"Replicas · {len(snapshot.replicas)}"
        self.border_subtitle = f"{REPLICA_POLICY} · last {snapshot.rolling_s:g} s"

    def draw(self, snapshot: Snapshot, view: ViewState, width: int, height: int) -> Text:
        styles = {name.removeprefix("replicas--"): self.style_of(name) for name in self.COMPONENT_CLASSES}
        return render_replicas(snapshot, width, styles)
