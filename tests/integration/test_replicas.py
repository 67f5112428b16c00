"""Several replicas as one target (``--url A --url B``): against two in-process simulators, both serve, the
record's per-replica figures sum to each step's totals, round robin by session keeps the shares within one
request per worker, a replica that dies mid-run is flagged ("replica B served 0 requests") while the other
carries the run, and an unreachable replica at the start is a clear error naming it (exit 3). The console's
replica panel shows the table and the flag, and stays hidden with one server. The URL flags themselves:
``ramp run URL`` unchanged, ``A,B`` and ``--url`` combined, a replica given twice refused."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from snapshot_watch import Watch
from tui_fakes import make_app, make_snapshot

from loadgen.cli.flags import RunFlags
from loadgen.cli.resolve import resolve
from loadgen.config import RampPlan
from loadgen.exits import UsageError
from loadgen.profile import parse_profile
from loadgen.record import read_record, step_from_line
from loadgen.run.config import RunConfig, RunOutcome
from loadgen.run.engine import Engine
from loadgen.sim import SimHandle, build_config, run_sim_in_thread
from loadgen.snapshot import ReplicaStats
from loadgen.target.urls import check_urls
from loadgen.types import REPLICA_POLICY, Target
from tui.replicas import ReplicasPanel, render_replicas

PROFILE = """
name = "replicas-small"
description = "short prompts, 16 output tokens, one request a session"
[[bucket]]
input = 16
output = 16
[sampling]
ignore_eos = true
"""


def profile() -> Any:
    return parse_profile(PROFILE, source="<replicas-small>")


def two_sims() -> tuple[SimHandle, SimHandle]:
    return (
        run_sim_in_thread(build_config("fast", seed=1)),
        run_sim_in_thread(build_config("fast", seed=2)),
    )


@pytest.fixture(scope="module")
def sims() -> Iterator[tuple[SimHandle, SimHandle]]:
    a, b = two_sims()
    yield a, b
    a.stop()
    b.stop()


def config(
    urls: tuple[str, ...], out: Path, levels: tuple[float, ...], workers: int = 1, step_s: float = 1.2
) -> RunConfig:
    return RunConfig(
        target=Target(url=urls[0], replicas=urls),
        profile=profile(),
        plan=RampPlan(levels, step_s=step_s, warmup_s=0.2),
        out=str(out),
        workers=workers,
        seed=7,
    )


def finish(engine: Engine, timeout: float = 30.0) -> RunOutcome:
    outcome = engine.wait(timeout)
    if outcome is None:
        engine.stop(cancel=True)
        outcome = engine.wait(10.0)
    assert outcome is not None, "the engine did not finish"
    return outcome


def test_both_replicas_serve_and_their_figures_sum_to_the_step(
    sims: tuple[SimHandle, SimHandle], tmp_path: Path
) -> None:
    a, b = sims
    out = tmp_path / "two.jsonl"
    workers = 2
    watch = Watch()
    engine = Engine(config((a.url, b.url), out, (4,), workers=workers, step_s=300.0), on_snapshot=watch)
    engine.start()
    # The step ends on what it holds, not on a clock (a 1.2 s step beside other work once held no request
    # of replica A's): each worker sends to A, B, A ... in turn, so once the step counts more finished
    # requests than there are workers, one worker sent two of them, one to each replica; stopped without
    # cancelling, every request sent finishes and is counted. And both replicas' /metrics were read.
    try:
        watch.until(
            lambda s: (
                not s.warming_up
                and s.windows["step"].ok > workers
                and len(s.replicas) == 2
                and all(r.kv_usage is not None for r in s.replicas)
            ),
            60,
            "more finished requests in the step than workers, both replicas' /metrics read",
        )
    finally:
        engine.stop(cancel=False)
    outcome = finish(engine)
    assert outcome.state == "stopped", outcome.message

    check_replica_step(out, (a, b), outcome, workers)


def check_replica_step(
    out: Path, sims: tuple[SimHandle, SimHandle], outcome: RunOutcome, workers: int
) -> None:
    """The two-replica step's record: the header names both, and the step's figures split into theirs."""
    a, b = sims
    record = read_record(out)
    header = record.header
    assert [r["name"] for r in header["replicas"]] == ["A", "B"]
    assert [r["url"] for r in header["replicas"]] == [a.url, b.url]
    assert header["replica_policy"] == REPLICA_POLICY
    (step,) = record.steps
    replicas = step["replicas"]
    assert [r["name"] for r in replicas] == ["A", "B"]
    assert all(r["ok"] > 0 for r in replicas), replicas
    assert step["idle_replicas"] == []
    # The breakdown is the step's own requests, split: nothing lost, nothing counted twice.
    assert sum(r["ok"] for r in replicas) == step["ok"]
    assert sum(r["errors"] for r in replicas) == step["error_count"] == 0
    assert sum(r["cancelled"] for r in replicas) == step["cancelled"]
    assert sum(r["output_tokens"] for r in replicas) == step["output_tokens"]
    # The record rounds window_s to the millisecond: over a short window (the step ends once it holds more
    # requests than workers, 0.4 s in a CI run) that alone moves the rate by up to 0.5 ms / window_s.
    rounding = 0.0005 / (step["window_s"] - 0.0005)
    assert sum(r["out_tok_s"] for r in replicas) == pytest.approx(
        step["output_tokens"] / step["window_s"], rel=max(1e-3, rounding * 1.01)
    )
    for r in replicas:
        assert r["output_tokens"] == 16 * r["ok"]
        assert 0 < r["ttft_ms_p50"] <= r["ttft_ms_p95"]
        assert r["kv_usage"] is not None  # each replica's own /metrics was polled
        assert f"ttft_ms|replica:{r['name']}" in step["hists"]
    # Round robin by session: each worker's requests of the step alternate A, B, A, ... (one request a
    # session here), so the shares differ by at most one request per worker (well within one per user).
    sent = [r["ok"] + r["errors"] + r["cancelled"] for r in replicas]
    assert abs(sent[0] - sent[1]) <= workers, sent
    # What the simulators say they served: both did, and no more than the client sent them in the run.
    served = [len(a.ground_truth()), len(b.ground_truth())]
    assert all(n >= r["ok"] for n, r in zip(served, replicas, strict=True)), (served, replicas)
    # The step line reads back into the same breakdown the engine reported.
    (summary,) = outcome.steps
    assert step_from_line(step).replicas == summary.replicas
    assert [(r.name, r.ok) for r in summary.replicas] == [(r["name"], r["ok"]) for r in replicas]


def test_a_replica_down_mid_run_is_flagged_and_the_other_carries_on(tmp_path: Path) -> None:
    a, b = two_sims()
    try:
        out = tmp_path / "down.jsonl"
        watch = Watch()
        engine = Engine(config((a.url, b.url), out, (2, 2, 2)), on_snapshot=watch)
        engine.start()
        watch.until(lambda s: len(s.steps) >= 1, 20.0, "the first step")
        b.stop()
        snap = watch.until(lambda s: len(s.steps) >= 3 or s.state != "running", 30.0, "the third step")
        outcome = finish(engine)
    finally:
        a.stop()
        b.stop()
    assert outcome.state == "finished", outcome.message  # A kept succeeding: the run is not "unreachable"
    steps = read_record(out).steps
    first, last = steps[0], steps[-1]
    assert all(r["ok"] > 0 for r in first["replicas"]) and first["idle_replicas"] == []
    by_name = {r["name"]: r for r in last["replicas"]}
    assert by_name["A"]["ok"] > 0
    assert by_name["B"]["ok"] == 0 and by_name["B"]["errors"] > 0
    assert last["idle_replicas"] == [f"replica B served 0 requests ({by_name['B']['errors']} errors)"]
    assert last["errors"].get("connect", 0) + last["errors"].get("stream_cut", 0) == by_name["B"]["errors"]
    # On screen: the console's replica panel, drawn from the last snapshot, says so too.
    shown = render_replicas(snap, 80).plain
    assert f"step {last['step']}: replica B served 0 requests" in shown


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_replica_at_the_start_is_a_clear_error(
    sims: tuple[SimHandle, SimHandle], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from loadgen.cli.commands import main

    a, _ = sims
    port = closed_port()
    down = f"http://ramp:s3cretpw@127.0.0.1:{port}"
    out = tmp_path / "never.jsonl"
    code = main(["run", "--url", a.url, "--url", down, "--headless", "--steps", "1", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 3, err
    assert f"replica B (http://127.0.0.1:{port}): cannot connect" in err, err
    assert "s3cretpw" not in err and "Traceback" not in err
    assert not out.exists()  # nothing was sent, no record begun


def test_url_flags() -> None:
    one = resolve(RunFlags(), "http://127.0.0.1:8000")
    assert one.target.url == "http://127.0.0.1:8000" and one.target.replicas == ()
    assert one.target.replica_targets() == (one.target,)
    both = resolve(RunFlags(urls=("http://127.0.0.1:8002",)), "http://127.0.0.1:8000,http://127.0.0.1:8001")
    assert both.target.url == "http://127.0.0.1:8000"
    assert both.target.replicas == ("http://127.0.0.1:8000", "http://127.0.0.1:8001", "http://127.0.0.1:8002")
    assert [t.url for t in both.target.replica_targets()] == list(both.target.replicas)
    flagged = resolve(RunFlags(urls=("http://127.0.0.1:8000", "http://127.0.0.1:8001")), "")
    assert flagged.target.replicas == ("http://127.0.0.1:8000", "http://127.0.0.1:8001")
    # A comma inside a query string is no second replica.
    assert check_urls("http://h:1/v1?x=a,b") == (("http://h:1/v1?x=a,b",), None)
    with pytest.raises(UsageError, match="given twice"):
        resolve(RunFlags(urls=("http://127.0.0.1:8000/v1",)), "http://127.0.0.1:8000")
    with pytest.raises(UsageError, match="no target URL"):
        resolve(RunFlags(), "")
    with pytest.raises(UsageError, match="must start with http"):
        resolve(RunFlags(urls=("127.0.0.1:8001",)), "http://127.0.0.1:8000")


REPLICAS = (
    ReplicaStats("A", "http://10.0.0.1:8000", 120, 120, 0, 0, 7680, 768.0, 51.0, 88.0, 0.42),
    ReplicaStats("B", "http://10.0.0.2:8000", 9, 0, 9, 0, 0, 0.0, None, None, None),
)


async def test_the_console_shows_the_replica_table_and_the_flag() -> None:
    *earlier, last = make_snapshot().steps
    last = replace(last, replicas=REPLICAS, idle_replicas=("replica B served 0 requests (9 errors)",))
    flagged = (*earlier, last)
    app, _ = make_app(replicas=REPLICAS, steps=flagged)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        app.redraw()
        await pilot.pause()
        panel = app.screen.query_one("#replicas-panel", ReplicasPanel)
        assert panel.display and panel.region.width > 0
        text = str(panel.render())
        assert "A" in text and "768" in text and "51" in text and "42%" in text
        assert f"step {last.index + 1}: replica B served 0 requests (9 errors)" in text
        assert "replica B served 0 requests (9 errors) in the last 10 s" in text
        assert panel.border_subtitle is not None and REPLICA_POLICY in str(panel.border_subtitle)


async def test_the_replica_panel_stays_hidden_with_one_server() -> None:
    app, _ = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        app.redraw()
        await pilot.pause()
        panel = app.screen.query_one("#replicas-panel", ReplicasPanel)
        assert not panel.display and panel.region.width == 0
        assert app.screen.query_one("#server-panel").region.width > 0
