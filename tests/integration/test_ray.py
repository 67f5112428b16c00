"""``--ray``: the same workers as Ray actors, on a local Ray cluster bound to 127.0.0.1 (started once for the
module, stopped at its end), against the simulator's fast mode (TTFT 50 ms, 10 ms a token, no batching
slow-down). A Ray run's record matches a local ``--workers 2`` run of the same plan and seed, it names the
hosts and their share, the flush round trips are stated, a killed actor is a reported loss (never a
silent drop in load), and no actor outlives the run. Without Ray, ``--ray`` is a one-line usage error."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from snapshot_watch import Watch

from loadgen.cli.flags import RunFlags
from loadgen.cli.resolve import resolve
from loadgen.config import RampPlan
from loadgen.exits import UsageError
from loadgen.profile import parse_profile
from loadgen.record import read_record
from loadgen.run.config import RunConfig, RunOutcome
from loadgen.run.engine import Engine
from loadgen.types import Target

HAVE_RAY = importlib.util.find_spec("ray") is not None
needs_ray = pytest.mark.skipif(not HAVE_RAY, reason="ray is not installed (pip install 'llm-ramp[ray]')")

PROFILE = parse_profile(
    "name = 'ray-small'\n[[bucket]]\ninput = 16\noutput = 32\n[sampling]\nignore_eos = true\n",
    source="<ray-small>",
)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    import ray

    t0 = time.monotonic()
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
        configure_logging=False,
    )
    print(f"ray.init took {time.monotonic() - t0:.1f} s")
    yield ray
    ray.shutdown()


pytestmark = pytest.mark.sim("fast", seed=3)


def config(
    url: str, out: Path, ray: str | None, plan: RampPlan | None = None, level: int = 8, workers: int = 2
) -> RunConfig:
    return RunConfig(
        target=Target(url=url, api="chat"),
        profile=PROFILE,
        plan=plan,
        level=level,
        workers=workers,
        out=str(out),
        seed=11,
        telemetry=False,
        ray=ray,
        warmup_s=0.0,
    )


def run(cfg: RunConfig, timeout: float = 40.0) -> RunOutcome:
    engine = Engine(cfg)
    engine.start()
    outcome = engine.wait(timeout)
    assert outcome is not None, "the run did not end"
    return outcome


def events(path: Path, kind: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [line for line in lines if line.get("event") == kind or line.get("kind") == kind]


@needs_ray
def test_ray_actors_measure_what_local_workers_do(cluster: Any, sim: Any, tmp_path: Path) -> None:
    plan = RampPlan(levels=(8.0,), step_s=2.5, warmup_s=0.5)
    local = run(config(sim.url, tmp_path / "local.jsonl", None, plan))
    on_ray = run(config(sim.url, tmp_path / "ray.jsonl", "", plan))
    assert local.state == on_ray.state == "finished", (local.message, on_ray.message)
    a, b = local.steps[-1].stats, on_ray.steps[-1].stats
    for name, outcome in (("local", local), ("ray", on_ray)):
        last = outcome.steps[-1]
        print(name, last.stats.ok, last.stats.out_tok_s, last.stats.pct("ttft_ms").p50, last.bound_reason)
    # 8 streams of 32 tokens at 50 ms + 31 x 10 ms: ~22 req/s, ~70 in the window; two shared cores.
    assert a.ok >= 30 and b.ok >= 30
    assert abs(b.ok - a.ok) <= 0.3 * a.ok
    assert abs((b.out_tok_s or 0) - (a.out_tok_s or 0)) <= 0.3 * (a.out_tok_s or 1)
    ttft_a, ttft_b = a.pct("ttft_ms").p50, b.pct("ttft_ms").p50
    assert ttft_a is not None and ttft_b is not None
    bound = [s for s in (local.steps[-1], on_ray.steps[-1]) if s.client_bound]
    if bound:
        # A loaded box (CI's step e runs this beside the --otel test and a Ray head on two cores: the Ray
        # step once read TTFT p50 110 ms against 53 locally): the product must say its timings may read
        # high, with the symptom; they are then not held to each other.
        assert all(s.bound_reason for s in bound), [s.bound_reason for s in bound]
    else:
        assert abs(ttft_b - ttft_a) <= max(25.0, 0.5 * ttft_a), (ttft_a, ttft_b)
    assert b.error_count == 0

    header = read_record(str(tmp_path / "ray.jsonl")).header
    fleet = header["fleet"]
    assert fleet["kind"] == "ray" and fleet["workers"] == 2
    assert [h["workers"] for h in fleet["hosts"]] == [[0, 1]] and fleet["hosts"][0]["share"] == 1.0
    assert fleet["command_rtt_ms"]["n"] == 10 and fleet["command_rtt_ms"]["p50"] > 0
    assert read_record(str(tmp_path / "local.jsonl")).header["fleet"]["kind"] == "local"
    (step,) = read_record(str(tmp_path / "ray.jsonl")).steps
    report = step["fleet"]  # the step line's: the flushes' round trips bound its window edges' skew
    assert report["flush_rtt_ms"]["n"] >= 2 and report["flush_rtt_ms"]["p99"] >= report["flush_rtt_ms"]["p50"]
    assert "fleet" not in read_record(str(tmp_path / "local.jsonl")).steps[0]
    (host,) = report["hosts"].values()
    assert host["workers"] == 2 and host["lag_samples"] > 0
    # No actor outlives its run.
    assert not [a for a in cluster.util.list_named_actors() if a.startswith("ramp-worker-")]


@needs_ray
def test_a_killed_actor_is_reported_and_the_run_goes_on(cluster: Any, sim: Any, tmp_path: Path) -> None:
    out = tmp_path / "kill.jsonl"
    watch = Watch()
    engine = Engine(config(sim.url, out, "", level=4), on_snapshot=watch)
    engine.start()
    watch.until(lambda s: s.state == "running" and s.windows["step"].ok >= 10, 30.0, "requests answered")
    names = json.loads(out.read_text().splitlines()[0])["fleet"]["actors"]
    cluster.kill(cluster.get_actor(names[1]))
    snap = watch.until(lambda s: any("lost" in e for e in s.recent_errors), 15.0, "the loss reported")
    ok_at_loss = snap.windows["step"].ok
    watch.until(lambda s: s.windows["step"].ok >= ok_at_loss + 10, 15.0, "the other worker goes on")
    engine.stop(cancel=True)
    outcome = engine.wait(20.0)
    assert outcome is not None and outcome.state == "stopped", outcome
    (lost,) = events(out, "worker_lost")
    assert lost["worker"] == 1 and lost["carried"] == "2 of 4 streams" and lost["workers_left"] == 1
    assert "Ray actor died" in lost["why"]
    assert any("worker 1 lost" in m for m in outcome.steps[-1].marks)
    assert not [a for a in cluster.util.list_named_actors() if a.startswith("ramp-worker-")]


@needs_ray
def test_more_workers_than_the_cluster_has_cpus_is_a_setup_error(
    cluster: Any, sim: Any, tmp_path: Path
) -> None:
    outcome = run(config(sim.url, tmp_path / "big.jsonl", "", workers=3), 30.0)
    assert outcome.state == "failed"
    assert (
        outcome.message
        == "--ray: the cluster has 2 CPUs for 3 workers of 1 CPU each: lower --workers or add nodes"
    )


def test_a_killed_worker_process_is_reported_and_the_run_goes_on(sim: Any, tmp_path: Path) -> None:
    """The local fleet too: a worker process killed under load is a stated loss, never a silent drop."""
    out = tmp_path / "kill-local.jsonl"
    watch = Watch()
    engine = Engine(config(sim.url, out, None, level=4), on_snapshot=watch)
    engine.start()
    watch.until(lambda s: s.state == "running" and s.windows["step"].ok >= 10, 30.0, "requests answered")
    os.kill(engine.worker_pids()[1], signal.SIGKILL)
    snap = watch.until(lambda s: any("lost" in e for e in s.recent_errors), 15.0, "the loss reported")
    ok_at_loss = snap.windows["step"].ok
    watch.until(lambda s: s.windows["step"].ok >= ok_at_loss + 10, 15.0, "the other worker goes on")
    engine.stop(cancel=True)
    outcome = engine.wait(20.0)
    assert outcome is not None and outcome.state == "stopped", outcome
    (lost,) = events(out, "worker_lost")
    assert (
        lost["worker"] == 1 and lost["carried"] == "2 of 4 streams" and "exited with code -9" in lost["why"]
    )
    assert any("worker 1 lost" in m for m in outcome.steps[-1].marks)


def test_ray_missing_is_one_line_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a)
    )
    with pytest.raises(UsageError, match=r"pip install 'llm-ramp\[ray\]'"):
        resolve(RunFlags(ray="", out="x.jsonl"), "http://127.0.0.1:9")
