"""Modal screens: confirm quitting a live run, clamp requests that cannot fit the context, type a value
(level, rate, mark note), and help."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import zip_longest

from rich.table import Table
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static


class ConfirmQuit(ModalScreen[bool]):
    """Asks before stopping a live run; q or y again confirms."""

    BINDINGS = [
        Binding("y,q,enter", "answer(True)", "Stop and quit", id="confirm_quit"),
        Binding("n,escape", "answer(False)", "Keep running", id="cancel_quit"),
    ]

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label("The run is live. Stop it and quit?", classes="dialog-title")
            yield Static("The current step ends now and the record is closed.", classes="dialog-help")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Stop and quit (y)", variant="error", id="yes")
                yield Button("Keep running (n)", variant="primary", id="no")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)


class FitContext(ModalScreen[bool]):
    """Offers to restart the run with the requests that cannot fit clamped (``tui.fit``); y or n."""

    DEFAULT_CSS = "FitContext { align: center middle; }"
    BINDINGS = [
        Binding("y,enter", "answer(True)", "Clamp and restart", id="fit_yes"),
        Binding("n,escape", "answer(False)", "Keep sending them", id="fit_no"),
    ]

    def __init__(self, question: str, new_record: str | None) -> None:
        super().__init__()
        self.question = question
        self.new_record = new_record

    def compose(self) -> ComposeResult:
        into = f", recording into {self.new_record}" if self.new_record else ""
        with Vertical(classes="dialog"):
            # a Static wraps, a Label would cut it; Text: the record's path is data, never markup
            yield Static(Text(self.question), classes="dialog-title")
            yield Static(
                Text(
                    f"y: this run stops (its record keeps what it measured) and starts again clamped{into}.\n"
                    "n: they are sent as drawn and rejected as errors."
                ),
                classes="dialog-help",
            )
            with Horizontal(classes="dialog-buttons"):
                yield Button("Clamp and restart (y)", variant="primary", id="yes")
                yield Button("Keep going (n)", id="no")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)


class ValueInput(ModalScreen[str | None]):
    """One line of input; ``validate`` raises ValueError with a message shown under the field.

    Keys that arrive before the field has focus (type-ahead: ``l32⏎`` in one burst over a laggy link or a
    paste) reach the screen instead of the field: they are typed into it, in order, replacing the value
    shown, and enter submits what was typed."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="cancel_input")]

    def __init__(
        self,
        title: str,
        *,
        placeholder: str = "",
        value: str = "",
        help_text: str = "",
        validate: Callable[[str], object] | None = None,
    ) -> None:
        super().__init__()
        self.title_text = title
        self.placeholder = placeholder
        self.initial = value
        self.help_text = help_text
        self.validate = validate
        self.typed_ahead = False

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text, classes="dialog-title")
            yield Input(value=self.initial, placeholder=self.placeholder, id="value")
            yield Static(
                self.help_text or "enter to apply · escape to cancel", id="feedback", classes="dialog-help"
            )

    def on_key(self, event: events.Key) -> None:
        field = self.query_one("#value", Input)
        if field.has_focus:
            return
        if event.key == "enter":
            event.stop()
            self.submit(field.value)
        elif event.key == "backspace":
            event.stop()
            field.action_delete_left()
        elif event.is_printable and event.character:
            event.stop()
            if not self.typed_ahead:  # the first key typed replaces the value shown, as on focus
                self.typed_ahead, field.value, field.select_on_focus = True, "", False
            field.insert_text_at_cursor(event.character)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.submit(event.value)

    def submit(self, text: str) -> None:
        if self.validate is not None:
            try:
                self.validate(text)
            except ValueError as error:
                feedback = self.query_one("#feedback", Static)
                feedback.update(Text(str(error), style="bold red"))
                feedback.add_class("error")
                return
        self.dismiss(text)

    def action_cancel(self) -> None:
        self.dismiss(None)


KEY_NAMES = {
    "question_mark": "?",
    "equals_sign": "=",
    "plus": "+",
    "minus": "-",
    "up": "↑",
    "down": "↓",
    "space": "space",
    "pageup": "pgup",
    "pagedown": "pgdn",
    "left": "←",
    "right": "→",
    "left_square_bracket": "[",
    "right_square_bracket": "]",
}


def key_label(keys: str) -> str:
    """'up,plus' -> '↑ +', 'shift+up' -> 'shift+↑' (what the user presses, not Textual's key names)."""
    labels = []
    for key in keys.split(","):
        parts = key.strip().split("+")
        labels.append("+".join(KEY_NAMES.get(part, part) for part in parts))
    return " ".join(labels)


MORE_BELOW = "▼ more below: ↓ / PgDn"


class HelpScreen(ModalScreen[None]):
    """Keys (from the live bindings, so a remapped key shows as remapped) and how to read the panels."""

    BINDINGS = [Binding("escape,q,question_mark,f1", "close", "Close", id="close_help")]

    LEGEND = (
        "Header: RUNNING then the step's phase: WARM-UP (not counted), MEASURING, CLOSING (N left: the window "
        "ended, the load holds until its N requests are done), SETTLING (N surplus: in flight comes down after "
        "a lowering); FINISHED waits for ↑ or l. The client verdict is the engine's (the record's rule).\n"
        "Histograms: log-scale buckets of the window in use; ▲ marks p50 / p95 / p99 (labelled 50 95 99), "
        "┃ and ┊ the SLO threshold, bars past it in red. 'whole run' leaves warm-ups out.\n"
        "Throughput: output tok/s bars, ┊ and numbers mark where each step began, ⚑ your marks (k); prefill "
        "tok/s and req/s below.\n"
        "Server: n/a means the source did not report it; the reason follows. The server's TTFT sits beside "
        "the client's only for a finished step's window (the same requests).\n"
        "Ramp table: ★ the best step under the SLO (only a clean step); SLO names the failing clause; notes: "
        "⚠bound (client-bound), cut N% (a manual change carried N% of its requests into the next load). "
        "d shows every figure of a step (← → other steps), e the errors in full.\n"
        "Throughput–latency: ● met, ✕ missed, ○ no SLO, ★ best, each with its step number; a grey (dim) "
        "marker is a step a key cut (not measured under its own load), a highlighted one the step looked at "
        "(replay); ◇ a baseline step; ┄ the SLO (SLO ↑ when far above); ↑ a step far above the rest, drawn "
        "on the top edge.\n"
        "Knee search (f, again to stop; a level you set meanwhile is your probe, f resumes): the curve panel "
        "plots each probe's SLO use (its tightest figure as a share of the limit, ┄ 100 %) against its level: "
        "● met, ✕ missed, ? undecided, ◆ yours; · the monotone fit, │ the bracket, ▲ the level probed now. "
        "The header says what it probes and why.\n"
        "n ends this step and goes to the plan's next level — after a manual change, the plan's first level "
        "above the current one; without a plan it doubles, up to 1,024. a turns the auto-ramp on or off: it "
        "takes that next level at every step's end and, without a plan, stops at the first step that misses "
        "the SLO (or at 1,024); its steps read 'step N (auto)', a key's 'step N (manual)'.\n"
        "Marks: SLO 'miss <clause> +N' = N more clauses failed; vs base ▲ better, ▼ worse, ≈ within noise, "
        "= same, '?' one step on each side (no noise estimate), '–' no baseline step at that level. "
        "Errors 'step N' = this step's count of that kind. BACKING OFF N: N streams wait after a refusal "
        "(429/503 or a refused connection) before sending again.\n"
        "More actions (refresh rate, curve axis, x2 / ÷2) are in the command palette: ctrl+p."
    )

    def __init__(self, keys: Iterable[tuple[str, str]]) -> None:
        super().__init__()
        self.keys = list(keys)

    def compose(self) -> ComposeResult:
        # Two key/description pairs per row so that the whole list fits an 80x24 terminal.
        table = Table.grid(padding=(0, 2))
        for _ in range(2):
            table.add_column(style="bold", no_wrap=True)
            table.add_column(no_wrap=True)
        half = (len(self.keys) + 1) // 2
        for left, right in zip_longest(self.keys[:half], self.keys[half:], fillvalue=("", "")):
            table.add_row(*left, *right)
        with VerticalScroll(classes="dialog help", id="help-scroll"):
            yield Label("ramp — keys  (escape closes)", classes="dialog-title")
            yield Static(table)
            yield Static(self.LEGEND, classes="dialog-help")

    def on_mount(self) -> None:
        scroll = self.query_one("#help-scroll", VerticalScroll)
        self.watch(scroll, "scroll_y", self.say_more, init=False)
        self.call_after_refresh(self.say_more)

    def on_resize(self) -> None:
        self.call_after_refresh(self.say_more)

    def say_more(self, _: float | None = None) -> None:
        """The dialog's bottom edge says when the help goes on below what is shown (an 80x24 terminal shows
        the keys and only the head of the legend), and how to reach it."""
        scroll = self.query_one("#help-scroll", VerticalScroll)
        below = scroll.max_scroll_y > 0 and scroll.scroll_y < scroll.max_scroll_y
        scroll.border_subtitle = MORE_BELOW if below else ""

    def action_close(self) -> None:
        self.dismiss(None)
