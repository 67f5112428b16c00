"""The command palette provider (ctrl+p): every console action, including the rarer ones that have no
key of their own (refresh rate, curve axis, level x2 / ÷2, concurrency cap in open loop) and the detail
views (step details, errors in full)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider

if TYPE_CHECKING:
    from tui.app import RampApp


Entry = tuple[str, str, Callable[[], object]]  # title, help, what it runs


def steering_entries(app: RampApp) -> list[Entry]:
    """The commands that change the load (or write into the record)."""
    return [
        (
            "Set level / rate…",
            "type an exact concurrency (closed loop) or arrival rate (open loop)",
            app.action_type_level,
        ),
        (
            "Set concurrency cap…",
            "open loop: the most requests in flight (0 = none)",
            app.action_type_cap,
        ),
        (
            "Double the level",
            "x2 concurrency (closed) or rate (open)",
            partial(app.action_level, "double"),
        ),
        ("Halve the level", "÷2 concurrency (closed) or rate (open)", partial(app.action_level, "half")),
        ("Pause / resume", "stop sending new requests; in-flight ones finish", app.action_toggle_pause),
        ("Next step", "end this step and start the plan's next one", app.action_next_step),
        (
            "Auto-ramp on / off",
            "let the plan (or the doubling schedule) advance by itself",
            app.action_toggle_auto,
        ),
        (
            "Switch closed / open loop",
            "closed: fixed concurrency; open: arrival rate",
            app.action_toggle_mode,
        ),
        ("Mark this moment…", "write a note into the record", app.action_mark),
        (
            "Find max (knee search)…",
            "search the highest level that meets the SLO; f again stops it, or resumes it after you took over",
            app.action_find_max,
        ),
        ("Stop the knee search", "the load holds where it is", app.action_stop_search),
    ]


def view_entries(app: RampApp) -> list[Entry]:
    """The commands that change what the console shows."""
    return [
        (
            "Step details",
            "every figure of a finished step: SLO clauses, client-bound, cut share, percentiles, errors",
            app.action_step_detail,
        ),
        (
            "Errors in full",
            "the latest full message of each error kind, warnings, failing sources, the server log",
            app.action_error_detail,
        ),
        (
            "Cycle left histogram metric",
            "TTFT → ITL → e2e → schedule lag",
            partial(app.action_cycle_metric, "left"),
        ),
        (
            "Cycle right histogram metric",
            "decode tok/s → ITL → e2e",
            partial(app.action_cycle_metric, "right"),
        ),
        ("Cycle window", "this step → last N s → whole run", app.action_cycle_window),
        (
            "Curve x axis: out tok/s / level",
            "what the throughput-latency curve plots TTFT p95 against",
            app.action_cycle_curve,
        ),
        (
            "Save screenshot (SVG, text, PNG)",
            "into the record's folder, or the current directory",
            app.action_screenshot,
        ),
    ]


class RampCommands(Provider):
    def commands(self) -> list[Entry]:
        app = cast("RampApp", self.app)
        entries = steering_entries(app) + view_entries(app)
        for hz in (1.0, 2.0, 4.0, 8.0):
            entries.append(
                (f"Refresh rate {hz:g} Hz", "how often the console redraws", partial(app.set_refresh_hz, hz))
            )
        return entries

    async def discover(self) -> Hits:
        for title, help_text, callback in self.commands():
            yield DiscoveryHit(title, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_text, callback in self.commands():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), callback, help=help_text)
