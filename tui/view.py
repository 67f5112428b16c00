"""The console's own view state: which metric each histogram shows and which window the panels read.

This is UI state only (the engine never sees it); it is immutable so that a panel can compare the view
it last drew with the current one and skip the redraw when nothing changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, TypeVar, get_args

from loadgen import measures
from loadgen.config import WINDOWS, Window

CurveX = Literal["out_tok_s", "level"]  # the step curve's x axis

# What each histogram panel may show, in the order its key cycles, from the catalogue (``measures.Metric.console``):
# the latencies left, the speeds right (then the latencies it may show too); each panel starts on its first.
LEFT_METRICS: measures.Live[str] = measures.Live(
    lambda ms, cs: tuple(m.name for m in measures.side_metrics("left"))
)
RIGHT_METRICS: measures.Live[str] = measures.Live(
    lambda ms, cs: tuple(m.name for m in measures.side_metrics("right"))
)
CURVE_X: tuple[CurveX, ...] = get_args(CurveX)

T = TypeVar("T", bound=str)


def _cycle(options: Sequence[T], current: T) -> T:
    index = options.index(current) if current in options else -1
    return options[(index + 1) % len(options)]


@dataclass(frozen=True, slots=True)
class ViewState:
    left_metric: str = field(default_factory=lambda: LEFT_METRICS[0])
    right_metric: str = field(default_factory=lambda: RIGHT_METRICS[0])
    window: Window = "step"
    curve_x: CurveX = "out_tok_s"
    # What the console looks at when it is not its own run's: "ATTACHED" (``ramp attach``, read-only),
    # "ATTACHED · LOST" while the ramp cannot be reached; "" for the operator's own console
    badge: str = ""
    # Seconds since an attached console last reached a live run's ramp (None while it answers): the panels
    # grey and the status line counts "LOST 0:20" instead of the last picture's RUNNING · MEASURING
    lost_s: float | None = None

    def cycle_left(self) -> ViewState:
        return replace(self, left_metric=_cycle(LEFT_METRICS, self.left_metric))

    def cycle_right(self) -> ViewState:
        return replace(self, right_metric=_cycle(RIGHT_METRICS, self.right_metric))

    def cycle_window(self) -> ViewState:
        return replace(self, window=_cycle(WINDOWS, self.window))

    def cycle_curve_x(self) -> ViewState:
        return replace(self, curve_x=_cycle(CURVE_X, self.curve_x))
