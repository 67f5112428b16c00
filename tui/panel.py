"""The base of every console panel: holds the latest Snapshot and ViewState, redraws only on change.

A panel declares what it depends on (``inputs``); ``show`` is called a few times a second by the app and
refreshes the widget only when those inputs differ from the ones last drawn. Drawing is ``draw``: a pure
function of the snapshot, the view and the panel's size, called by Textual's ``render``.

A drawing made glyph by glyph (bars, histograms, plots) holds one span per cell: Textual converts and styles
each span on every repaint, about 60 ms for a 76x16 histogram of 1,000 spans. ``render`` hands Textual the
same text with each run of touching equal-styled spans as one (``merge_spans``): the same cells, ~10x less
work, so that a repaint does not hold the app's loop (and the keys behind it) for a tenth of a second.
"""

from __future__ import annotations

from typing import ClassVar, Protocol, runtime_checkable

from rich.console import RenderableType
from rich.style import Style
from rich.text import Span, Text
from textual.widget import Widget

from loadgen.snapshot import Snapshot
from tui.view import ViewState


def merge_spans(text: Text) -> Text:
    """``text`` with each span that starts where the one before it in the list ends, in the same style,
    joined to it. Only neighbours in the list are joined, so every cell keeps its styles in their order and
    draws exactly as before."""
    merged: list[Span] = []
    for span in text.spans:
        last = merged[-1] if merged else None
        if last is not None and last.end == span.start and last.style == span.style:
            merged[-1] = Span(last.start, span.end, last.style)
        else:
            merged.append(span)
    if len(merged) == len(text.spans):
        return text
    out = text.copy()
    out.spans = merged
    return out


@runtime_checkable
class PanelHost(Protocol):
    """What a panel reads from the app it is mounted in (``RampApp``)."""

    shown_snapshot: Snapshot | None
    view: ViewState
    basic_glyphs: bool

    def redraw(self, force: bool = False) -> None: ...


class SnapshotPanel(Widget):
    """A widget that renders a part of the latest ``Snapshot``."""

    # Draws what the steering keys change (level, pause, mode, step...) and is cheap to draw: a snapshot that
    # changes those is drawn here as it arrives; the other panels take it at the next refresh tick.
    STEERED: ClassVar[bool] = False

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.snapshot: Snapshot | None = None
        self.view = ViewState()
        self._drawn_inputs: object = object()

    def on_mount(self) -> None:
        # A panel created after a layout switch draws the snapshot already on screen at once.
        host = self.app
        if isinstance(host, PanelHost) and host.shown_snapshot is not None:
            self.show(host.shown_snapshot, host.view)

    def inputs(self, snapshot: Snapshot, view: ViewState) -> object:
        """What this panel's drawing depends on; the default is every new snapshot."""
        return (snapshot.seq, view)

    def show(self, snapshot: Snapshot, view: ViewState) -> None:
        inputs = self.inputs(snapshot, view)
        self.snapshot, self.view = snapshot, view
        if inputs == self._drawn_inputs:
            return
        self._drawn_inputs = inputs
        self.update_titles(snapshot, view)
        self.refresh()

    def update_titles(self, snapshot: Snapshot, view: ViewState) -> None:
        """Set ``border_title`` / ``border_subtitle``; panels override."""

    @property
    def basic_glyphs(self) -> bool:
        host = self.app
        return isinstance(host, PanelHost) and host.basic_glyphs

    def style_of(self, component: str) -> Style:
        return self.get_component_rich_style(component, partial=True)

    def render(self) -> RenderableType:
        if self.snapshot is None:
            return Text("waiting for the engine…", style="dim")
        drawn = self.draw(self.snapshot, self.view, self.size.width, self.size.height)
        return merge_spans(drawn) if isinstance(drawn, Text) else drawn

    def draw(self, snapshot: Snapshot, view: ViewState, width: int, height: int) -> RenderableType:
        raise NotImplementedError
