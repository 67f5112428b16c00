"""The open loop's arrival process: ``ArrivalSpec`` says which, ``Arrivals`` produces its send times.

An ``Arrivals`` hands out seeded ABSOLUTE intended send times (``next_ns``, on ``time.monotonic_ns``'s
clock), each one gap after the last, never "sleep one gap from now": a late wake-up then sends the overdue
arrivals at once and their lateness shows as schedule lag, instead of silently stretching the schedule (as
guidellm's scheduler strategies do). The kinds:

* ``constant``: one arrival every ``1 / rate`` seconds (coefficient of variation of the gaps 0);
* ``poisson``: exponential gaps of mean ``1 / rate`` (coefficient of variation 1);
* ``gamma``: gamma gaps of mean ``1 / rate`` and shape ``k = burstiness`` (coefficient of variation
  ``1 / sqrt(k)``: ``k < 1`` burstier than Poisson, ``k > 1`` smoother, ``k = 1`` is Poisson);
* ``schedule``: a trace's or request file's own times (seconds on the source's clock), each divided by
  the time scale the rate stands for (``Workload.time_scale``); the stream ends after its last item.

A live rate change (``restart``) starts the stream over from that instant at the new rate: the next arrival
is one fresh gap after it (a schedule: its first item, at the new scale), the generator's draws continuing
where they were. A leaf: it imports only the standard library and ``loadgen.config``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Literal

from loadgen.config import Arrival

ArrivalKind = Literal[Arrival, "schedule"]  # the flags' processes, and a source's own times
GAMMA_MIN_SHAPE = 1e-3  # a gamma shape below this is taken as this (the flags refuse k <= 0)


@dataclass(frozen=True, slots=True)
class ArrivalSpec:
    """One stream of arrivals: its process, its mean rate (req/s), gamma's shape and its seed; a schedule
    brings its own times (``times_s``, on the source's clock) and the time scale the rate stands for."""

    kind: ArrivalKind = "poisson"
    rate_rps: float = 1.0
    burstiness: float = 1.0  # gamma shape k (< 1 burstier, > 1 smoother); only gamma reads it
    seed: int = 0
    times_s: tuple[float, ...] = ()  # kind "schedule": each arrival's offset on the source's clock
    time_scale: float = 1.0  # kind "schedule": source seconds per wall second

    @property
    def label(self) -> str:
        """The process as the record names it: "constant", "poisson", "gamma(0.5)", "schedule"."""
        return f"gamma({self.burstiness:g})" if self.kind == "gamma" else self.kind

    def same_process(self, other: ArrivalSpec) -> bool:
        """Whether ``other`` differs from this one at most in its rate (and a schedule's time scale)."""
        return replace(other, rate_rps=self.rate_rps, time_scale=self.time_scale) == self


def stream_seed(run_seed: int, worker_id: int) -> int:
    """The seed of one worker's arrival stream (and of its open-loop sessions): unique per (run, worker)."""
    return run_seed * 7919 + worker_id


class Arrivals:
    """Absolute intended send times of one stream; the base draws the gaps, a kind says how."""

    def __init__(self, spec: ArrivalSpec, start_ns: int) -> None:
        # Its own generator, seeded by the spec alone: the times do not depend on what else draws numbers.
        self.rng = random.Random(f"{spec.seed}:arrivals")
        self.spec = spec
        self.start_ns = self.at_ns = start_ns

    def restart(self, spec: ArrivalSpec, now_ns: int) -> None:
        """Start over from ``now_ns`` as ``spec`` says (a live rate change, a resume); the draws continue."""
        self.spec = spec
        self.start_ns = self.at_ns = now_ns

    def next_ns(self) -> int | None:
        """The next arrival's intended send time; None: no more (a rate of 0, a schedule's end)."""
        if not self.spec.rate_rps > 0:
            return None
        self.at_ns += int(self.gap_s() * 1e9)
        return self.at_ns

    def gap_s(self) -> float:
        raise NotImplementedError


class Constant(Arrivals):
    def gap_s(self) -> float:
        return 1.0 / self.spec.rate_rps


class Poisson(Arrivals):
    def gap_s(self) -> float:
        return self.rng.expovariate(self.spec.rate_rps)


class Gamma(Arrivals):
    def gap_s(self) -> float:
        k = max(GAMMA_MIN_SHAPE, self.spec.burstiness)
        return self.rng.gammavariate(k, 1.0 / self.spec.rate_rps / k)


class Schedule(Arrivals):
    """A source's own times: arrival ``i`` at ``start + times_s[i] / time_scale``, then no more."""

    def __init__(self, spec: ArrivalSpec, start_ns: int) -> None:
        super().__init__(spec, start_ns)
        self.index = 0

    def restart(self, spec: ArrivalSpec, now_ns: int) -> None:
        super().restart(spec, now_ns)
        self.index = 0

    def next_ns(self) -> int | None:
        spec = self.spec
        if self.index >= len(spec.times_s):
            return None
        self.index += 1
        return self.start_ns + int(spec.times_s[self.index - 1] / spec.time_scale * 1e9)


KINDS: dict[ArrivalKind, type[Arrivals]] = {
    "constant": Constant,
    "poisson": Poisson,
    "gamma": Gamma,
    "schedule": Schedule,
}


def arrivals(spec: ArrivalSpec, start_ns: int, going: Arrivals | None = None) -> Arrivals:
    """The stream ``spec`` describes, from ``start_ns``: ``going`` continued (its draws kept) when it is
    the same process at another rate, else a fresh one."""
    if going is not None and going.spec.same_process(spec):
        going.restart(spec, start_ns)
        return going
    return KINDS[spec.kind](spec, start_ns)
