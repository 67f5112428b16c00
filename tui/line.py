"""One line of styled parts that must fit a width: pieces are dropped, least important first, until it does.

The status line and the control panel say more than 80 columns hold; rather than cutting the line's tail
(where a client-bound warning may sit), each piece says how long it is kept and the line keeps the most
important ones, in their order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text

Part = tuple[str, Style | str]
ALWAYS = 99  # a piece that is never dropped (the line is cut at the width instead)


@dataclass(frozen=True, slots=True)
class Piece:
    parts: tuple[Part, ...]
    keep: int = ALWAYS  # pieces with the lowest ``keep`` go first; among equals, the last one

    @property
    def cells(self) -> int:
        return sum(Text(text).cell_len for text, _ in self.parts)


def piece(*parts: Part, keep: int = ALWAYS) -> Piece:
    return Piece(tuple(parts), keep)


def fit_line(pieces: Sequence[Piece], width: int) -> Text:
    kept = [p for p in pieces if p.parts]
    while sum(p.cells for p in kept) > width:
        droppable = [i for i, p in enumerate(kept) if p.keep < ALWAYS]
        if not droppable:
            break
        lowest = min(kept[i].keep for i in droppable)
        del kept[max(i for i in droppable if kept[i].keep == lowest)]
    line = Text.assemble(*(part for p in kept for part in p.parts), no_wrap=True, overflow="ellipsis")
    line.truncate(width, overflow="ellipsis")
    return line
