"""``benchmarks/bench_scale.py``'s layout of the cores (the workers each on its own, the simulators on the
cores left over, a too-small machine marked shared) and its scaling verdict (N x one worker, ±5 %)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from loadgen.cli.selftest import SelftestRow

ROOT = Path(__file__).resolve().parents[3]


def _bench_scale() -> Any:
    spec = importlib.util.spec_from_file_location("bench_scale", ROOT / "benchmarks" / "bench_scale.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_scale"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("workers", "controller", "mine", "sims", "shared"),
    [
        (1, 0, (1,), (2, 3), False),  # two simulators a worker
        (4, 0, (1, 2, 3, 4), tuple(range(5, 13)), False),
        (8, 0, tuple(range(1, 9)), tuple(range(9, 16)), False),  # 7 cores left: 7 simulators
        (16, 0, tuple(range(16)), tuple(range(16)), True),  # no core left: shared, and said so
    ],
)
def test_sixteen_cores(
    workers: int, controller: int, mine: tuple[int, ...], sims: tuple[int, ...], shared: bool
) -> None:
    where = _bench_scale().place(list(range(16)), workers, 2)
    assert (where.controller, where.workers, where.sims, where.shared) == (controller, mine, sims, shared)


def test_two_cores() -> None:
    bench = _bench_scale()
    one = bench.place([0, 1], 1, 2)
    assert (one.workers, one.sims, one.shared) == ((1,), (0,), False)  # the simulator beside the controller
    two = bench.place([0, 1], 2, 2)
    assert (two.workers, two.shared) == ((0, 1), True) and set(two.sims) == {0, 1}


def _row(workers: int, tok_s: float) -> SelftestRow:
    return SelftestRow(workers, 256 * workers, tok_s, 25_000.0 * workers, 10.0, 1.0, 5.0, False, 100, 0,
                       server_ttft_p99_ms=52.0)  # fmt: skip


def test_scaling_within_five_percent_either_way() -> None:
    bench = _bench_scale()
    where = bench.place(list(range(16)), 4, 1)
    assert " yes " in bench.line(_row(4, 4 * 24_000 * 1.04), where, 24_000.0)
    assert " NO " in bench.line(_row(4, 4 * 24_000 * 0.94), where, 24_000.0)
    assert " NO " in bench.line(_row(4, 4 * 24_000 * 1.06), where, 24_000.0)  # above is off too
    assert "96,000" in bench.line(_row(4, 95_000.0), where, 24_000.0)  # the N x one column
