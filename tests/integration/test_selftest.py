"""The scaling benchmark's arithmetic (``ramp selftest --per-worker``): which cores each part gets, each row's
scaling against one worker's tokens/s, and the goal's verdict lines. The benchmark itself is a script
(scripts/scale_bench.sh), not a timed test."""

from __future__ import annotations

from loadgen.cli.selftest import SelftestRow, layout, scaling, verdicts


def row(workers: int, streams: int, tok_s: float, sim_p99: float | None = 52.0) -> SelftestRow:
    return SelftestRow(
        workers=workers,
        streams=streams,
        out_tok_s=tok_s,
        ideal_tok_s=tok_s,
        cpu_s_per_1m=None,
        ttft_err_p50_ms=None,
        ttft_err_p99_ms=None,
        client_bound=False,
        requests=1,
        errors=0,
        server_ttft_p99_ms=sim_p99,
    )


def test_sixteen_cores_give_the_controller_one_each_worker_one_and_the_simulators_the_rest() -> None:
    plan = layout(range(16), max_workers=8)
    assert plan.controller_cpu == 0
    assert plan.worker_cpus == tuple(range(1, 9))
    assert plan.sim_cpus == tuple(range(9, 16))
    assert layout(range(16), 8, sims=3).sim_cpus == (9, 10, 11)


def test_two_cores_share_one_for_the_load_one_for_the_simulator() -> None:
    plan = layout([0, 1], max_workers=1)
    assert (plan.controller_cpu, plan.worker_cpus, plan.sim_cpus) == (None, (0,), (1,))
    assert layout([0, 1], max_workers=4).worker_cpus == (0,)


def test_scaling_is_against_n_times_one_worker_at_the_same_streams_per_worker() -> None:
    rows = [row(1, 512, 50_000), row(2, 1024, 98_000), row(4, 2048, 180_000, sim_p99=90.0), row(3, 1000, 1)]
    assert scaling(rows) == [1.0, 0.98, 0.9, None]
    lines = verdicts(rows)
    assert lines[0] == "2 workers x 512 streams: scaling 0.980 (goal >= 0.95: met); the simulators kept up"
    assert lines[1].startswith("4 workers x 512 streams: scaling 0.900 (goal >= 0.95: NOT met)")
    assert "the simulators fell behind (their TTFT p99 90 ms)" in lines[1]
    assert len(lines) == 2
