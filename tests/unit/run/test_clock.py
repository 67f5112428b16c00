"""``loadgen.run.clock``: the wall clock read beside the monotonic one, and instants moved between them."""

from __future__ import annotations

import time

from loadgen.run.clock import ClockPair, read_clocks


def test_a_pair_moves_monotonic_instants_to_unix_time() -> None:
    pair = ClockPair(unix_ns=1_700_000_000_000_000_000, monotonic_ns=5_000_000_000, uncertainty_ns=300)
    assert pair.offset_ns == 1_700_000_000_000_000_000 - 5_000_000_000
    assert pair.unix_ns_of(6_500_000_000) == 1_700_000_001_500_000_000
    assert pair.as_dict() == {
        "unix_ns": 1_700_000_000_000_000_000,
        "monotonic_ns": 5_000_000_000,
        "unix_minus_monotonic_ns": pair.offset_ns,
        "uncertainty_ns": 300,
    }


def test_read_clocks_brackets_the_wall_clock_read() -> None:
    before = time.time_ns()
    pair = read_clocks()
    after = time.time_ns()
    assert before <= pair.unix_ns <= after
    assert 0 <= pair.uncertainty_ns < 5_000_000
    now_offset = time.time_ns() - time.monotonic_ns()
    assert abs(now_offset - pair.offset_ns) < 5_000_000
