"""The console's footer, rebuilt only when the keys it shows change.

Textual's ``Footer`` rebuilds every key it shows (~30 ms on an idle core, five times that on a loaded one)
each time its screen's bindings are refreshed: as a modal (``d``, ``e``, the help) covers the console and
again as it closes, though the console's keys are the same before and after. Here a refresh while the
console is covered is left for later, and one that brings the keys the footer already shows is skipped.
"""

from __future__ import annotations

from textual.screen import Screen
from textual.widgets import Footer

__all__ = ["ConsoleFooter"]


class ConsoleFooter(Footer):
    """A ``Footer`` that recomposes only when what it would show differs from what it shows."""

    def __init__(self, *, compact: bool = False, show_command_palette: bool = True) -> None:
        super().__init__(compact=compact, show_command_palette=show_command_palette)
        self.composed_keys: object = None  # what the keys were last built from (``shown_keys``)

    def shown_keys(self) -> object:
        """Everything the keys are built from: each active binding as shown, and the palette's key."""
        bindings = tuple(
            (key, binding.action, binding.description, binding.show, enabled, tooltip)
            for key, (_node, binding, enabled, tooltip) in self.screen.active_bindings.items()
        )
        return bindings, self.show_command_palette, self.compact

    def bindings_changed(self, screen: Screen[object]) -> None:
        if self.is_attached and screen is self.screen:
            if not screen.is_current:
                return  # covered by a modal, drawn by nobody: its resume refreshes the bindings again
            keys = self.shown_keys()
            if keys == self.composed_keys:
                return
            self.composed_keys = keys  # the recompose that follows builds these
        super().bindings_changed(screen)
