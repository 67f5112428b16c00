"""Every message that crosses a boundary inside a run, defined once.

* Controller → worker, over each worker's command queue: ``ClosedLoad``, ``OpenLoad``, ``PauseLoad``,
  ``ResumeLoad``, ``Flush``, ``StopLoad`` (``WorkerCommand``).
* Worker → controller, over the shared delta queue: ``WorkerReady``, ``WorkerFatal``, ``WorkerDelta``
  (``WorkerMessage``).
* Face → controller, the operator's commands: ``Stop``, ``Mark``, ``SetAuto``, ``Pause``, ``Resume``,
  ``SetLevel``, ``ChangeLevel``, ``SetRate``, ``SetMode``, ``NextStep``, ``StartSearch``, ``ResumeSearch``,
  ``StopSearch`` (``ControlCommand``). A face builds the value and gives it to ``EngineControl.send``
  (``loadgen.run.engine``), which hands it to the controller's loop; ``Controller.command`` is the one place
  that acts on each (the ``Steering`` ones through ``loadgen.run.live_search.steer``). A new command is a
  class here, a member of ``ControlCommand`` and a ``case`` there.

Each is a frozen, slotted dataclass: cheap to pickle, unchangeable once sent. Receivers dispatch on the
type (``match``), never on a string tag.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, TypeAlias

from loadgen.arrivals import ArrivalSpec
from loadgen.config import MODES, Mode, Phase

if TYPE_CHECKING:
    from loadgen.metrics import IntervalDelta

# ---- controller → worker ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClosedLoad:
    """Closed loop with ``level`` virtual users (this worker's share); ``cancel``: a lowering cuts the
    surplus users' requests in flight (counted as cancelled) instead of letting them finish."""

    level: int
    cancel: bool


@dataclass(frozen=True, slots=True)
class OpenLoad:
    """Open loop: ``arrivals`` at this worker's share of the rate, with a concurrency cap (share, 0 = none)."""

    arrivals: ArrivalSpec
    cap: int


@dataclass(frozen=True, slots=True)
class PauseLoad:
    """Send nothing new; the requests in flight finish."""


@dataclass(frozen=True, slots=True)
class ResumeLoad:
    """Send again at the load set last."""


@dataclass(frozen=True, slots=True)
class Flush:
    """Ship every open window now; the requests sent from here on belong to ``window``: of step ``step``
    (1-based, as the record numbers steps; 0: between steps, counted nowhere), its ``phase``, at the run's
    ``level`` (the whole fleet's, not this worker's share). ``--otel`` spans carry the three."""

    window: int
    t0_ns: int
    step: int = 0
    phase: Phase | None = None
    level: float = 0.0


@dataclass(frozen=True, slots=True)
class StopLoad:
    """Stop everything, ship a final delta and exit; ``cancel``: cut the requests in flight."""

    cancel: bool


WorkerCommand: TypeAlias = ClosedLoad | OpenLoad | PauseLoad | ResumeLoad | Flush | StopLoad

# ---- worker → controller ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WorkerReady:
    worker_id: int
    pid: int


@dataclass(frozen=True, slots=True)
class WorkerFatal:
    """The worker died; ``message`` names the exception and the worker's log file."""

    worker_id: int
    message: str


class RequestRow(NamedTuple):
    """One finished request as ``--save-requests-detail`` writes it (``loadgen.run.detail``): built in the
    worker only when that flag is on, shipped in the delta of the window it was sent in. A named tuple:
    pickled as a plain tuple, a fraction of a dataclass's cost."""

    request_id: str
    worker: int
    outcome: str  # "ok" | "error" | "cancelled"
    error_kind: str  # an ErrorKind value, "" unless an error
    http_status: int | None
    intended_ns: int  # host monotonic clock, like a step line's window_t0_ns
    sent_ns: int
    first_token_ns: int | None
    last_token_ns: int | None
    end_ns: int
    input_tokens: int | None
    output_tokens: int
    cached_tokens: int | None
    tokens_exact: bool
    max_tokens: int
    finish_reason: str
    bucket: str
    cache_class: str  # "hit" | "miss" | "" (the prefix-cache class the workload gave it)
    session_id: int
    turn: int
    first_answer_ns: int | None = None  # reasoning models: the first answer token (== first_token_ns without)
    reasoning_tokens: int = 0
    reasoning_exact: bool = False
    first_tool_ns: int | None = None  # tool calls: the first tool-call delta (None: no call streamed)
    tool_tokens: int = 0  # the calls' arguments' tokens


@dataclass(frozen=True, slots=True)
class WorkerDelta:
    """A worker's figures for the requests it sent in ``window``. ``closed``: none of them is left in
    flight; ``current``: the window the worker sends in now (the delta then carries its live gauges);
    ``in_flight``: how many of the window's requests (and of its arrivals still queued for a slot) were in
    flight when it was shipped — the step's closing count, and at a cut the share carried into the next load."""

    worker_id: int
    window: int
    closed: bool
    current: bool
    delta: IntervalDelta
    in_flight: int = 0
    rows: tuple[RequestRow, ...] = ()  # --save-requests-detail: its requests finished since the last delta
    # The current window's delta: the worker's requests in flight with no token yet, and the longest such
    # wait in seconds when it was shipped (seconds, not a clock reading: a Ray worker's clock is its own).
    first_waits: tuple[int, float] = (0, 0.0)


WorkerMessage: TypeAlias = WorkerReady | WorkerFatal | WorkerDelta

# ---- face → controller -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Stop:
    """End the run; ``cancel``: cut the streams in flight, else let them finish (bounded)."""

    cancel: bool


@dataclass(frozen=True, slots=True)
class Mark:
    note: str


@dataclass(frozen=True, slots=True)
class SetAuto:
    on: bool


@dataclass(frozen=True, slots=True)
class Pause:
    pass


@dataclass(frozen=True, slots=True)
class Resume:
    pass


@dataclass(frozen=True, slots=True)
class SetLevel:
    level: int


@dataclass(frozen=True, slots=True)
class ChangeLevel:
    delta: int


@dataclass(frozen=True, slots=True)
class SetRate:
    rate_rps: float


@dataclass(frozen=True, slots=True)
class SetMode:
    mode: Mode

    def __post_init__(self) -> None:  # checked where it is built: a face's typo fails at once, loudly
        if self.mode not in MODES:
            raise ValueError(f"mode must be 'closed' or 'open', not {self.mode!r}")


@dataclass(frozen=True, slots=True)
class NextStep:
    pass


@dataclass(frozen=True, slots=True)
class StartSearch:
    """Start the SLA search between ``lo`` and ``hi`` (levels in closed loop, req/s in open loop)."""

    lo: float
    hi: float


@dataclass(frozen=True, slots=True)
class ResumeSearch:
    """The search drives again after the operator took over (its probes so far kept)."""


@dataclass(frozen=True, slots=True)
class StopSearch:
    """Stop the search: the load holds where it is."""


ControlCommand: TypeAlias = (
    Stop
    | Mark
    | SetAuto
    | Pause
    | Resume
    | SetLevel
    | ChangeLevel
    | SetRate
    | SetMode
    | NextStep
    | StartSearch
    | ResumeSearch
    | StopSearch
)
# The commands that steer the load (``loadgen.run.live_search.steer``: a level key during a search is a probe)
Steering: TypeAlias = (
    SetLevel | ChangeLevel | SetRate | SetMode | NextStep | StartSearch | ResumeSearch | StopSearch
)
