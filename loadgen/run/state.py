"""The run's mutable state, shared by the controller's parts: where the run stands (``RunStatus``) and the
load asked for now (``Load``: the mode, level, rate, auto-ramp and the plan's position).

This module is their only writer: the controller and the wheel decide *when* the state or the load
changes and call the methods here, which say *what* changes; the step bookkeeping and the snapshot only
read them. ``tests/house/test_house.py`` (test_one_owner) fails when another module assigns ``RunStatus.state`` or a field
of ``Load``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from loadgen.arrivals import ArrivalSpec
from loadgen.config import Mode, RampPlan, RunState
from loadgen.run.config import RunConfig
from loadgen.runtimes import RuntimeName


@dataclass(slots=True)
class RunStatus:
    """How the run stands and what it runs against (learnt at setup)."""

    state: RunState = "starting"
    message: str = ""  # why it failed, or how it ended
    unreachable: bool = False
    usage: bool = False  # failed because what was asked cannot be answered as given (exit 2)
    model: str = ""
    runtime: RuntimeName | None = None
    runtime_version: str | None = None
    warnings: list[str] = field(default_factory=list)  # found before the load started
    marks: list[tuple[float, str]] = field(default_factory=list)  # (elapsed s, note)
    t0_ns: int = field(default_factory=time.monotonic_ns)
    fleet: dict[str, object] = field(default_factory=dict)  # where the workers run (the record's header)

    @property
    def live(self) -> bool:
        return self.state in ("starting", "running", "paused")

    def elapsed_s(self, now_ns: int) -> float:
        return (now_ns - self.t0_ns) / 1e9

    # ---- the state's only writers -----------------------------------------------------------------------
    def run(self) -> None:
        """The load runs: set up, resumed, or a key after a finished plan took the wheel again."""
        self.state = "running"

    def pause(self) -> bool:
        """Paused, if it was running; True when it was."""
        if self.state != "running":
            return False
        self.state = "paused"
        return True

    def resume(self) -> bool:
        """Running again, if it was paused; True when it was."""
        if self.state != "paused":
            return False
        self.state = "running"
        return True

    def finish(self) -> None:
        """The plan (or the search) is over."""
        self.state = "finished"

    def fail(self, message: str, *, unreachable: bool = False, usage: bool = False) -> None:
        """Failed, and why; ``unreachable``: the target (or the server ramp launched) is gone; ``usage``: what
        was asked cannot be answered as given (a --find-max range that even its low end misses)."""
        self.state, self.message = "failed", message
        if unreachable:
            self.unreachable = True
        if usage:
            self.usage = True

    def stop(self) -> None:
        """Stopped, unless it already ended (finished or failed)."""
        if self.live:
            self.state = "stopped"

    def say(self, message: str) -> None:
        """How the run ends (an early stop, the search's result): the record's end event, the outcome."""
        self.message = message

    def explain(self, reason: str) -> None:
        """Why it stopped (a signal), unless something said more already (a failure)."""
        if not self.message:
            self.message = reason


@dataclass(slots=True)
class Load:
    """The load asked for now. ``plan`` is dropped once the operator sets a level or rate by hand."""

    config: RunConfig
    mode: Mode = "closed"
    level: int = 1
    rate: float = 1.0
    paused: bool = False
    auto: bool = False
    plan: RampPlan | None = None
    plan_index: int = 0
    probe_repeat: int | None = None  # the SLA search's probe of its level (0, 1 ...): the step's ``repeat``
    first_probe: float | None = None  # the SLA search's first level (``Search.first``): the run starts there
    probe_warmup_s: float | None = (
        None  # the SLA search's warm-up for its next probe (``Search.warmup_after``)
    )

    @classmethod
    def of(cls, config: RunConfig) -> Load:
        return cls(
            config,
            mode=config.mode,
            level=int(config.level),
            rate=float(config.rate_rps),
            auto=config.plan is not None,
            plan=config.plan,
        )

    def arrival_label(self) -> str:
        """``closed``, or the open loop's arrival process ("poisson", "gamma(0.5)" ...)."""
        if self.mode == "closed":
            return "closed"
        replay = self.config.profile.replay
        if replay is not None and replay.scheduled:
            return replay.kind  # "trace" / "requests": the file's own times (loadgen.cli.sources)
        return ArrivalSpec(self.config.arrival, burstiness=self.config.burstiness).label

    # ---- the load's only writers ------------------------------------------------------------------------
    def apply_plan_level(self, index: int) -> None:
        assert self.plan is not None
        self.set_target(self.plan.level_at(index))

    def at_plan_position(self, plan: RampPlan, position: int) -> None:
        """The plan's level at ``position`` (``n`` after a manual change rejoins the plan above the load)."""
        self.plan, self.plan_index = plan, position
        self.apply_plan_level(position)

    def set_target(self, value: float) -> None:
        """The loop's own figure: the level of a closed loop, the rate of an open one."""
        if self.mode == "closed":
            self.level = int(value)
        else:
            self.rate = float(value)

    def repeat_now(self) -> int:
        """Which repeat of its level the step beginning now is (``--repeat``, or the search's probes)."""
        if self.plan is None:  # a level set by hand: no repeat
            return 0
        return self.probe_repeat if self.probe_repeat is not None else self.plan.repeat_at(self.plan_index)

    def start_plan(self) -> None:
        """The plan's first position (the load as configured without a plan)."""
        self.plan_index = 0
        if self.plan is not None and self.plan.levels:
            self.apply_plan_level(0)
        if self.first_probe is not None:
            self.set_target(self.first_probe)

    def by_hand(self, level: int | None = None, rate: float | None = None) -> None:
        """The operator set a level or a rate (never below 0)."""
        if level is not None:
            self.level = max(0, level)
        if rate is not None:
            self.rate = max(0.0, rate)

    def leave_plan(self) -> None:
        self.plan = None

    def hold_for(self, step_s: float) -> None:
        """The SLA search's confirmation step (``--hold S``): the next step of the plan lasts ``step_s``."""
        if self.plan is not None:
            self.plan = replace(self.plan, step_s=step_s, step_seconds=())

    def probe_at(self, plan: RampPlan, repeat: int, warmup_s: float | None = None) -> None:
        """A probe of a search the console started (or the operator's level during one): a step of ``plan``'s
        length on the auto-ramp's timer, which its intervals may end early; its ``repeat`` at its level."""
        self.plan, self.plan_index, self.auto = plan, 0, True
        self.probe_repeat, self.probe_warmup_s = repeat, warmup_s

    def hold(self) -> None:
        """The search no longer drives: the level stays, its steps have no set length (as a key's)."""
        self.plan, self.auto, self.probe_repeat, self.probe_warmup_s = None, False, None, None

    def set_auto(self, on: bool) -> None:
        self.auto = on

    def set_paused(self, paused: bool) -> None:
        self.paused = paused

    def idle(self) -> None:
        """A finished plan in the console: no load, no auto-ramp, until a key asks for some."""
        self.level, self.rate, self.auto = 0, 0.0, False

    def open_at(self, rate: float, cap: int) -> None:
        """The figures a switch to the open loop starts from (the mode changes once the old step is cut)."""
        self.rate, self.level = rate, cap

    def closed_at(self, level: int) -> None:
        """The level a switch to the closed loop starts from."""
        self.level = level

    def switch_to(self, mode: Mode) -> None:
        """The new mode, off the plan (its levels were the old mode's)."""
        self.mode = mode
        self.plan = None

    def warmup_s(self) -> float:
        """One warm-up for every step: the plan's while it runs, and after a key left it too (the run's
        setting, not a second one that defaults to none); without a plan, the config's. A probe of the SLA
        search: its own, never longer."""
        if self.probe_warmup_s is not None:
            return self.probe_warmup_s
        if self.plan is not None:
            return self.plan.warmup_s_at(self.plan_index)  # a replayed session's: each step its own
        plan = self.config.plan
        return plan.warmup_s if plan is not None else self.config.warmup_s

    def step_end_ns(self, t0_ns: int) -> int | None:
        """When a step begun at ``t0_ns`` ends on its own (auto-ramp or plan), else None."""
        if not self.auto:
            return None
        step_s = self.plan.step_s_at(self.plan_index) if self.plan is not None else self.config.auto_step_s
        return t0_ns + int(step_s * 1e9)
