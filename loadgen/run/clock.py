"""The run's wall clock beside its monotonic one, so its times join other systems' (a Grafana panel, a
server's log, a trace): every duration is measured on ``time.monotonic_ns`` (the host's, shared by its
worker processes), and one pair read at the record's start turns any of those instants into Unix time.

The pair is the tightest of a few back-to-back readings: ``uncertainty_ns`` is the gap between the two
monotonic reads that bracket the wall-clock read. NTP may slew the wall clock during a long run; the offset
is the one at the start, which is what makes the record's instants consistent with one another.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

READS = 5


@dataclass(frozen=True, slots=True)
class ClockPair:
    unix_ns: int  # time.time_ns()
    monotonic_ns: int  # time.monotonic_ns(), the midpoint of the bracket around the wall-clock read
    uncertainty_ns: int = 0

    @property
    def offset_ns(self) -> int:
        """Unix time minus monotonic time: add it to a monotonic instant to get Unix nanoseconds."""
        return self.unix_ns - self.monotonic_ns

    def unix_ns_of(self, monotonic_ns: int) -> int:
        return monotonic_ns + self.offset_ns

    def as_dict(self) -> dict[str, int]:
        """The record header's ``clock``."""
        return {
            "unix_ns": self.unix_ns,
            "monotonic_ns": self.monotonic_ns,
            "unix_minus_monotonic_ns": self.offset_ns,
            "uncertainty_ns": self.uncertainty_ns,
        }


def read_clocks(reads: int = READS) -> ClockPair:
    """The wall clock and the monotonic clock read together: the tightest of ``reads`` brackets."""
    best: ClockPair | None = None
    for _ in range(max(1, reads)):
        before = time.monotonic_ns()
        unix = time.time_ns()
        after = time.monotonic_ns()
        pair = ClockPair(unix, (before + after) // 2, after - before)
        if best is None or pair.uncertainty_ns < best.uncertainty_ns:
            best = pair
    assert best is not None
    return best
