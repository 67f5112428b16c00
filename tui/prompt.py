"""The console's one-line prompt: a level, a rate, a cap or a mark's note typed over the footer, in place.

It replaced a modal dialog for those values (``tui.dialogs.ValueInput``, still used over other screens):
a modal screen is pushed, tints the whole console beneath and, popped, has the console repaint itself, and
Textual's focus change restyles the screen and rebuilds the footer, together 0.7 s on an idle core for
``l 32 ⏎`` and seconds on a loaded one, before the engine even heard of the new level (issue 21 item 10).
The prompt is a widget of the console's own, on a layer over the footer, shown and hidden by visibility
(nothing moves, nothing else repaints) and never focused: while it is open the console hands it every key
(``LinePrompt.key``), so that keys typed in one burst with the one that opened it (``l32⏎`` over a laggy
link or a paste) land in it in order, and no key reaches a binding behind it.

The first character typed replaces the value shown (as a selected field would); backspace deletes the last
character, enter submits (``validate`` raising ValueError keeps it open with the message in red), escape
cancels. What is typed is data, never markup.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from rich.text import Text
from textual import events
from textual.widget import Widget

MAX_CHARS = 200  # a mark's note; the level or rate is a few characters
HELP = "enter to apply · escape to cancel"

Answer = Callable[[str | None], None]


@dataclass
class Question:
    title: str
    value: str
    placeholder: str
    validate: Callable[[str], object] | None
    answer: Answer
    typed: bool = False  # the first character typed replaces the value shown
    error: str = ""


class LinePrompt(Widget):
    """Hidden until ``ask``; then the console routes every key to ``key`` until enter or escape."""

    DEFAULT_CSS = """
    LinePrompt {
        layer: prompt;
        dock: bottom;
        height: 1;
        width: 1fr;
        visibility: hidden;
        background: $boost;
        padding: 0 1;
    }
    LinePrompt > .prompt--title { text-style: bold; }
    LinePrompt > .prompt--value { text-style: bold reverse; }
    LinePrompt > .prompt--dim { color: $text-muted; }
    LinePrompt > .prompt--error { color: $error; text-style: bold; }
    """
    COMPONENT_CLASSES = {"prompt--title", "prompt--value", "prompt--dim", "prompt--error"}

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.question: Question | None = None

    @property
    def is_open(self) -> bool:
        return self.question is not None

    def ask(self, question: Question) -> None:
        """Open with the question's value shown; its ``answer`` gets the text submitted, or None if cancelled."""
        self.question = replace(question, value=question.value[:MAX_CHARS])
        self.styles.visibility = "visible"
        self.refresh()

    @property
    def value(self) -> str:
        return self.question.value if self.question is not None else ""

    def key(self, event: events.Key) -> None:
        """One key while open: it goes nowhere else."""
        event.stop()
        event.prevent_default()
        question = self.question
        if question is None:
            return
        if event.key != "enter":
            question.error = ""
        if event.key == "enter":
            self.submit()
        elif event.key == "escape":
            self.close(None)
        elif event.key in ("backspace", "ctrl+h"):
            question.value = "" if not question.typed else question.value[:-1]
            question.typed = True
        elif event.is_printable and event.character:
            if not question.typed:
                question.value, question.typed = "", True
            question.value = (question.value + event.character)[:MAX_CHARS]
        self.refresh()

    def submit(self) -> None:
        question = self.question
        if question is None:
            return
        if question.validate is not None:
            try:
                question.validate(question.value)
            except ValueError as error:
                question.error = str(error)
                self.refresh()
                return
        self.close(question.value)

    def close(self, text: str | None) -> None:
        question, self.question = self.question, None
        self.styles.visibility = "hidden"
        self.refresh()
        if question is not None:
            question.answer(text)

    def render(self) -> Text:
        question = self.question
        if question is None:
            return Text("")
        style = self.get_component_rich_style
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(f"{question.title}: ", style=style("prompt--title", partial=True))
        if question.value:
            line.append(question.value, style=style("prompt--value", partial=True))
        elif question.placeholder:
            line.append(question.placeholder, style=style("prompt--dim", partial=True))
        line.append("▏  ")
        if question.error:
            line.append(question.error, style=style("prompt--error", partial=True))
        else:
            line.append(HELP, style=style("prompt--dim", partial=True))
        return line
