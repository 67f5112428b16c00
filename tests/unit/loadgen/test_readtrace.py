"""The read-delay timeline (``loadgen.run.readtrace``) and the benchmark's split of it
(``benchmarks/bench_tail.py``): every task step and collection is logged while on, nothing once closed, and
the split gives each instant to the innermost kind of work running then, so the stages add up to the delay."""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np

from loadgen.h1 import Connection, Pool
from loadgen.run.readtrace import ReadTrace, TimedConnection

ROOT = Path(__file__).resolve().parents[3]


def _bench_tail() -> Any:
    spec = importlib.util.spec_from_file_location("bench_tail", ROOT / "benchmarks" / "bench_tail.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_tail"] = module
    spec.loader.exec_module(module)
    return module


def test_steps_and_collections_are_logged_while_on_and_the_pool_is_plain_after(tmp_path: Path) -> None:
    trace = ReadTrace(str(tmp_path / "reads-0.npz"))

    async def three_steps() -> None:
        await asyncio.sleep(0)
        gc.collect()
        await asyncio.sleep(0)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        trace.start(loop)
        assert Pool.connection_class is TimedConnection
        await asyncio.get_running_loop().create_task(three_steps())
        trace.shipped(0)
        trace.close(loop)
        await asyncio.get_running_loop().create_task(three_steps())  # after close: not logged

    asyncio.run(main())
    assert Pool.connection_class is Connection
    saved = np.load(tmp_path / "reads-0.npz")
    steps = saved["steps"].reshape(-1, 3)
    assert len(steps) == 3 and (steps[:, 1] >= steps[:, 0]).all() and (steps[:, 2] >= 0).all()
    gcs = saved["gcs"].reshape(-1, 3)
    full = gcs[gcs[:, 2] == 2]  # the full collection (a gen-0 pass may come first, from what ran before)
    assert len(full) == 1
    assert steps[1, 0] <= full[0, 0] <= full[0, 1] <= steps[1, 1]  # inside the step that ran it
    assert saved["ships"].reshape(-1, 2)[0, 0] == 0
    assert not saved["full"].any()


def test_the_split_gives_each_instant_to_the_innermost_work() -> None:
    bench = _bench_tail()
    # a task step 100..200 (on CPU half of it) holding a GC 120..150; a read 250..260 (stamp 251, all of it
    # on CPU); a shipment 300..340 (from a command's handle: no step around it); idle between
    series = {
        "reads": np.asarray([250, 251, 260, 10], np.int64),
        "steps": np.asarray([100, 200, 50], np.int64),
        "ships": np.asarray([300, 340], np.int64),
        "gcs": np.asarray([120, 150, 0], np.int64),
    }
    line = bench.timeline(series)
    t0, t1 = np.asarray([90, 130, 255]), np.asarray([400, 260, 256])
    got = line.labelled(t0, t1)
    by = {name: got[i] for i, name in enumerate(bench.LABELS)}
    assert by["tasks"].tolist() == [70, 50, 0]
    assert by["gc"].tolist() == [30, 20, 0]
    assert by["reads"].tolist() == [10, 10, 1]
    assert by["ship"].tolist() == [40, 0, 0]
    assert by["idle"].tolist() == [10 + 50 + 40 + 60, 50, 0]
    assert got.sum(axis=0).tolist() == (t1 - t0).tolist()
    cpu = line.labelled(t0, t1, cpu=True)
    on_cpu = {name: cpu[i] for i, name in enumerate(bench.LABELS)}
    assert on_cpu["tasks"].tolist() == [35, 25, 0]
    assert on_cpu["gc"].tolist() == [15, 10, 0]
    assert on_cpu["reads"].tolist() == by["reads"].tolist()
    assert on_cpu["ship"].tolist() == by["ship"].tolist()
    assert on_cpu["idle"].tolist() == by["idle"].tolist()
