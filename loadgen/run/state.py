"""The run's mutable state, shared by the controller's parts: where the run stands (``RunStatus``) and the
load asked for now (``Load``: the mode, level, rate, auto-ramp and the plan's position).

The controller changes both; the step bookkeeping and the snapshot read them. Nothing else does.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from loadgen.arrivals import ArrivalSpec
from loadgen.config import Mode, RampPlan, RunConfig, RunState
from loadgen.runtimes import RuntimeName


@dataclass(slots=True)
class RunStatus:
    """How the run stands and what it runs against (learnt at setup)."""

    state: RunState = "starting"
    message: str = ""  # why it failed, or how it ended
    unreachable: bool = False
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
            return replay.kind  # "trace" / "requests": the file's own times (loadgen.sourceargs)
        return ArrivalSpec(self.config.arrival, burstiness=self.config.burstiness).label

    def apply_plan_level(self, index: int) -> None:
        assert self.plan is not None
        value = self.plan.level_at(index)
        if self.mode == "closed":
            self.level = int(value)
        else:
            self.rate = float(value)

    def repeat_now(self) -> int:
        """Which repeat of its level the step beginning now is (``--repeat``, or the search's probes)."""
        if self.plan is None:  # a level set by hand: no repeat
            return 0
        return self.probe_repeat if self.probe_repeat is not None else self.plan.repeat_at(self.plan_index)

    def warmup_s(self) -> float:
        """One warm-up for every step: the plan's while it runs, and after a key left it too (the run's
        setting, not a second one that defaults to none); without a plan, the config's."""
        plan = self.plan or self.config.plan
        return plan.warmup_s if plan is not None else self.config.warmup_s

    def step_end_ns(self, t0_ns: int) -> int | None:
        """When a step begun at ``t0_ns`` ends on its own (auto-ramp or plan), else None."""
        if not self.auto:
            return None
        step_s = self.plan.step_s_at(self.plan_index) if self.plan is not None else self.config.auto_step_s
        return t0_ns + int(step_s * 1e9)
