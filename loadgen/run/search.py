"""The SLA search (``--find-max LO:HI``): the highest level — concurrency in closed loop, rate in open loop —
whose step meets the SLO, found by probing the bounds and then bisecting between the highest level that met
and the lowest that did not. Each probe is a full step, held until its requests are done, so every verdict
stands on requests measured under their own load.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from loadgen.format import fmt_si
from loadgen.snapshot import StepSummary

RATE_RESOLUTION = 1.05  # open loop: stop once the failing rate is within 5 % of the passing one


@dataclass(frozen=True, slots=True)
class Probe:
    level: float
    met: bool
    out_tok_s: float | None
    step: int


@dataclass(slots=True)
class Search:
    lo: float
    hi: float
    integer: bool  # closed loop: levels are whole streams
    probes: list[Probe] = field(default_factory=list)
    passed: float | None = None  # the highest level that met the SLO so far
    failed: float | None = None  # the lowest level that did not

    def first(self) -> float:
        return self.lo

    def after(self, step: StepSummary) -> float | None:
        """The level to probe next after ``step``, or None when the search is over."""
        level = float(step.level) if self.integer else float(step.rate_rps or 0.0)
        met = step.verdict.met is True and step.clean
        return self.probe_result(level, met, step.stats.out_tok_s, step.index)

    def probe_result(
        self, level: float, met: bool, out_tok_s: float | None = None, step: int = -1
    ) -> float | None:
        self.probes.append(Probe(level, met, out_tok_s, step))
        if met:
            self.passed = level if self.passed is None else max(self.passed, level)
        else:
            self.failed = level if self.failed is None else min(self.failed, level)
        if self.passed is None:
            return None  # the lowest bound already misses: nothing below it is probed
        if self.failed is None:
            return self.hi if self.passed < self.hi else None
        if self.integer:
            if self.failed - self.passed <= 1:
                return None
            return float((int(self.passed) + int(self.failed)) // 2)
        if self.failed <= self.passed * RATE_RESOLUTION:
            return None
        return round((self.passed + self.failed) / 2, 3)

    def answer(self) -> Probe | None:
        met = [p for p in self.probes if p.met and p.level == self.passed]
        return met[-1] if met else None

    def summary(self) -> str:
        best = self.answer()
        unit = "streams" if self.integer else "req/s"
        if best is None:
            return f"find-max: even {self.lo:g} {unit} misses the SLO ({len(self.probes)} probe)"
        ceiling = "" if self.failed is not None else f" (the upper bound {self.hi:g} met it too)"
        return (
            f"max {best.level:g} {unit}, {fmt_si(best.out_tok_s)} out tok/s under SLO{ceiling} "
            f"({len(self.probes)} probes)"
        )

    def event(self) -> dict[str, object]:
        best = self.answer()
        return {
            "bounds": [self.lo, self.hi],
            "max_level": None if best is None else best.level,
            "out_tok_s": None if best is None else best.out_tok_s,
            "step": None if best is None else best.step,
            "probes": [{"level": p.level, "met": p.met, "step": p.step} for p in self.probes],
            "summary": self.summary(),
        }
