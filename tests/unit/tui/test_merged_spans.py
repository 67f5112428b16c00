"""A panel hands Textual its drawing with touching equal-styled spans joined (``tui.panel.merge_spans``): a
glyph-by-glyph chart held one span per cell, and converting those cost a 76x16 histogram ~60 ms a repaint
(issue 21 item 10). The joined text must draw the very same cells: each one's character and style."""

from __future__ import annotations

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Span, Text

from loadgen.snapshot import SeriesPoint
from tui.panel import merge_spans
from tui.throughput import render_throughput

STYLES = {
    "bar": Style(color="green"),
    "boundary": Style(color="yellow"),
    "dim": Style(dim=True),
    "strong": Style(bold=True),
    "spark": Style(color="cyan"),
    "mark": Style(color="magenta"),
}


def cells(text: Text, width: int) -> list[tuple[str, Style | None]]:
    console = Console(width=width, color_system="truecolor", force_terminal=True)
    segments = console.render(text, console.options.update(width=width))
    return [
        (char, seg.style)
        for seg in Segment.split_and_crop_lines(segments, width)
        for seg in seg
        for char in seg.text
    ]


def test_a_chart_drawn_glyph_by_glyph_draws_the_same_cells_from_a_tenth_of_the_spans() -> None:
    series = [
        SeriesPoint(
            t_s=float(t),
            out_tok_s=1000.0 + 37.0 * (t % 11),
            prefill_tok_s=50.0 + t,
            req_s=3.0,
            in_flight=8,
            level=8,
        )
        for t in range(120)
    ]
    marks = ((40.0, "restarted the server"), (90.0, "k"))
    drawn = render_throughput(series, (0.0, 30.0, 60.0, 90.0), 92, 14, marks=marks, styles=STYLES)
    merged = merge_spans(drawn)
    assert len(merged.spans) * 10 < len(drawn.spans), (len(drawn.spans), len(merged.spans))
    assert merged.plain == drawn.plain
    assert cells(merged, 92) == cells(drawn, 92)


def test_only_neighbours_in_the_list_are_joined_so_overlapping_styles_keep_their_order() -> None:
    red, bold = Style(color="red"), Style(bold=True)
    # A line-wide bold span between two touching red spans: joining the reds would put the second red under
    # the bold instead of over it; only the last two reds (neighbours) may be joined.
    text = Text(
        "abcdef", spans=[Span(0, 2, red), Span(0, 6, Style(color="blue")), Span(2, 4, red), Span(4, 6, red)]
    )
    merged = merge_spans(text)
    assert merged.spans == [Span(0, 2, red), Span(0, 6, Style(color="blue")), Span(2, 6, red)]
    assert cells(merged, 6) == cells(text, 6)
    assert merge_spans(Text("ab", spans=[Span(0, 1, red), Span(1, 2, bold)])).spans == [
        Span(0, 1, red),
        Span(1, 2, bold),
    ]
