"""A controller without processes, sockets or waiting, for unit tests of the step state machine: a clock the
test moves (``FakeClock``) and workers the test scripts (``FakeFleet``: it keeps every command the controller
sent and hands over the interval deltas the test ships, made by the workers' own ``Recorder``).

``controller(...)`` builds a ``Controller`` on both with setup skipped (the workers are ready, the load
has not started): the test calls ``start_load()``, ships deltas, moves the clock and calls ``tick(ctl)``
(one turn of the controller's main loop: ``pump``, then ``check_timers``), and reads the step lines
(``steps.summaries``) and the record.
"""

from __future__ import annotations

from pathlib import Path

from loadgen.config import RampPlan
from loadgen.metrics import Recorder
from loadgen.profile import Profile, parse_profile
from loadgen.run.config import RunConfig
from loadgen.run.controller import Controller
from loadgen.run.fleet import Fleet
from loadgen.run.protocol import ClosedLoad, Flush, OpenLoad, WorkerCommand, WorkerDelta, WorkerMessage
from loadgen.run.recording import RunRecord
from loadgen.snapshot import Snapshot
from loadgen.types import Outcome, RequestResult, Target
from loadgen.workload import PromptSizer

PROFILE = """
name = "unit"
description = "100 output tokens"
[[bucket]]
input = 20
output = 100
"""
S = 1_000_000_000  # ns in a second


def profile() -> Profile:
    return parse_profile(PROFILE, source="<unit>")


class FakeClock:
    """Monotonic ns, moved only by ``advance``."""

    def __init__(self, start_s: float = 1000.0) -> None:
        self.now_ns = int(start_s * S)

    def __call__(self) -> int:
        return self.now_ns

    def advance(self, seconds: float) -> None:
        self.now_ns += int(seconds * S)


class FakeFleet(Fleet):
    """Scripted workers: ``commands`` holds what each was sent; ``ship`` queues a delta for ``drain``."""

    def __init__(self, config: RunConfig, clock: FakeClock) -> None:
        super().__init__(config)
        self.clock = clock
        self.commands: list[tuple[int, WorkerCommand]] = []
        self.inbox: list[WorkerMessage] = []
        self.window: dict[int, int] = {}  # worker -> the window it sends in now (its last Flush)
        self.since: dict[int, int] = {}  # worker -> when its last delta ended
        self.recorders = {wid: Recorder(wid) for wid in range(self.size)}

    def spawn(self, model: str, sizer: PromptSizer) -> None:
        self.alive.update(range(self.size))

    def send(self, wid: int, cmd: WorkerCommand) -> None:
        self.commands.append((wid, cmd))
        if isinstance(cmd, Flush):
            self.window[wid] = cmd.window

    def drain(self) -> list[WorkerMessage]:
        out, self.inbox = self.inbox, []
        return out

    def drain_blocking(self, timeout_s: float) -> list[WorkerMessage]:
        return self.drain()

    def any_alive(self) -> bool:
        return bool(self.alive)

    def join(self) -> None:
        self.alive.clear()

    def loads(self) -> list[WorkerCommand]:
        """The load commands sent, in order (worker 0's)."""
        return [cmd for wid, cmd in self.commands if wid == 0 and isinstance(cmd, ClosedLoad | OpenLoad)]

    def ship(
        self,
        wid: int = 0,
        *,
        ok: int = 0,
        in_flight: int = 0,
        window: int | None = None,
        closed: bool = False,
        e2e_s: float = 1.0,
        output_tokens: int = 100,
    ) -> None:
        """Worker ``wid``'s delta for ``window`` (by default the one it sends in now): ``ok`` requests that
        finished now, each ``e2e_s`` long with ``output_tokens`` tokens; ``in_flight`` of the window's
        requests still running (``closed``: none is)."""
        now = self.clock()
        recorder = self.recorders[wid]
        for _ in range(ok):
            start = now - int(e2e_s * S)
            recorder.record(
                RequestResult(
                    Outcome.OK,
                    intended_ns=start,
                    sent_ns=start,
                    end_ns=now,
                    first_token_ns=start + int(0.1 * S),
                    last_token_ns=now,
                    output_tokens=output_tokens,
                    input_tokens=20,
                    tokens_exact=True,
                )
            )
        t0 = self.since.get(wid, now - S // 4)
        self.since[wid] = now
        current = self.window.get(wid)
        target = current if window is None else window
        assert target is not None, "no window was opened"
        live = ok * output_tokens
        delta = recorder.take(t0, now, live_tokens=live, in_flight=in_flight, sent=ok)
        self.inbox.append(WorkerDelta(wid, target, closed, target == current, delta, in_flight))


def tick(ctl: Controller) -> None:
    """What the controller's main loop does once it wakes: the workers' messages, then the step timers."""
    ctl.pump()
    ctl.check_timers(ctl.clock())


def controller(
    *,
    plan: RampPlan | None = None,
    level: int = 4,
    workers: int = 1,
    record: Path | None = None,
    **config: object,
) -> tuple[Controller, FakeFleet, FakeClock, list[Snapshot]]:
    """A controller on a fake fleet and clock, its workers ready; ``record``: its step lines go there."""
    run = RunConfig(
        Target("http://127.0.0.1:9"),
        profile(),
        plan=plan,
        level=level,
        workers=workers,
        telemetry=False,
        **{"warmup_s": 0.0, **config},  # type: ignore[arg-type]  # manual steps measure at once here
    )
    clock = FakeClock()
    fleet = FakeFleet(run, clock)
    published: list[Snapshot] = []
    ctl = Controller(run, published.append, fleet=fleet, clock=clock)
    fleet.alive.update(range(fleet.size))
    if record is not None:
        ctl.record = RunRecord.open(str(record), {"type": "header"}, ())
    return ctl, fleet, clock, published
