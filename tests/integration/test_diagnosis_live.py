"""Issue 33, the rest: the diagnosis live in the console while a step measures (provisional, once a second),
on headless stderr as each step finishes, and what it says of bad server telemetry and of none at all.

- the console against the simulator's "queue" scenario names queueing in the steps panel's title, marked
  provisional, before the step ends;
- a server whose /metrics vanishes, restarts its counters or loses a bucket mid-step, or one that says far
  more requests run than the step sends (a server that lies, or other traffic): the step's diagnosis is
  ``unknown`` with that reason, and its other figures are there as for any step;
- a plain OpenAI-compatible server (no /metrics): ``ramp run --headless`` prints each step's diagnosis on
  stderr, which tells ``none`` apart and says what telemetry would tell; a failing one reads ``errors``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from fault_servers import REPLY, Handler
from hostile_servers import ramp_measured, serving

from loadgen.analysis.diagnosis import NO_TELEMETRY
from loadgen.config import RampPlan
from loadgen.profile import parse_profile
from loadgen.record import read_record
from loadgen.run.config import RunConfig
from loadgen.run.engine import Engine
from loadgen.sim import build_config, run_sim_in_thread
from loadgen.sim.scenarios import BASE_PRESET, scenario_overrides, scenarios
from loadgen.types import Target
from tui.app import RampApp
from tui.panel import SnapshotPanel

TINY = "[[bucket]]\ninput = 8\noutput = 2\n"
SWITCH_AFTER = 200  # completions served before /metrics goes bad: 2-3 s into the 8-s step


class Counted:
    """A completion that takes 20 ms (a few dozen a second per stream, not thousands), counted; every
    ``fail_every``-th one answers 500."""

    def __init__(self, fail_every: int = 0) -> None:
        self.served = 0
        self.fail_every = fail_every

    async def handle(self, req: web.Request) -> web.StreamResponse:
        self.served += 1
        await asyncio.sleep(0.02)
        if self.fail_every and self.served % self.fail_every == 0:
            return web.json_response({"error": {"message": "overloaded"}}, status=500)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(req)
        await resp.write(REPLY)
        await resp.write_eof()
        return resp


def vllm_page(n: int, buckets: tuple[str, ...] = ("0.01", "0.05", "0.1", "+Inf"), running: int = 1) -> str:
    """A vLLM /metrics page after ``n`` requests: gauges (``running`` requests), counters and a TTFT histogram
    growing with n."""
    lines = [
        "# TYPE vllm:num_requests_running gauge",
        f'vllm:num_requests_running{{model_name="tiny"}} {running}',
        "# TYPE vllm:num_requests_waiting gauge",
        'vllm:num_requests_waiting{model_name="tiny"} 0',
        "# TYPE vllm:kv_cache_usage_perc gauge",
        'vllm:kv_cache_usage_perc{model_name="tiny"} 0.05',
        "# TYPE vllm:generation_tokens counter",
        f'vllm:generation_tokens_total{{model_name="tiny"}} {2 * n}',
        "# TYPE vllm:time_to_first_token_seconds histogram",
    ]
    share = {"0.01": 0.5, "0.05": 0.9, "0.1": 1.0, "+Inf": 1.0}
    lines += [
        f'vllm:time_to_first_token_seconds_bucket{{le="{b}",model_name="tiny"}} {share[b] * n}'
        for b in buckets
    ]
    lines += [
        f'vllm:time_to_first_token_seconds_sum{{model_name="tiny"}} {0.02 * n}',
        f'vllm:time_to_first_token_seconds_count{{model_name="tiny"}} {n}',
    ]
    return "\n".join(lines) + "\n"


def souring(completions: Counted, then: str) -> Handler:
    """/metrics that follows ``completions``, then after ``SWITCH_AFTER`` of them: "vanish" (404 from then
    on), "restart" (its counters start over from 0) or "bucket" (the 0.05 bucket's line gone)."""

    async def metrics(req: web.Request) -> web.StreamResponse:
        n = completions.served
        if n <= SWITCH_AFTER:
            return web.Response(text=vllm_page(n), content_type="text/plain")
        if then == "vanish":
            return web.Response(status=404, text="404: Not Found")
        if then == "restart":
            return web.Response(text=vllm_page(n - SWITCH_AFTER), content_type="text/plain")
        return web.Response(text=vllm_page(n, ("0.01", "0.1", "+Inf")), content_type="text/plain")

    return metrics


def run_engine(url: str, tmp_path: Path, levels: tuple[int, ...], step_s: float) -> list[dict[str, Any]]:
    out = tmp_path / "run.jsonl"
    config = RunConfig(
        target=Target(url=url),
        profile=parse_profile(TINY, source="<tiny>"),
        plan=RampPlan(levels, step_s=step_s, warmup_s=0.0),
        out=str(out),
    )
    engine = Engine(config)
    engine.start()
    outcome = engine.wait(60)
    assert outcome is not None and outcome.state == "finished", outcome
    return list(read_record(out).steps)


@pytest.mark.parametrize(
    ("then", "reason"),
    [
        ("vanish", "the server's telemetry stopped answering"),
        ("restart", "the server's counter gen_tokens went back during the step (a restart?)"),
        ("bucket", "the server's histogram ttft_s changed its buckets during the step"),
    ],
)
def test_telemetry_that_goes_bad_mid_step_is_unknown_with_the_reason(
    then: str, reason: str, tmp_path: Path
) -> None:
    completions = Counted()
    server = serving(metrics=souring(completions, then), completions=completions.handle)
    try:
        (step,) = run_engine(server.url, tmp_path, (2,), step_s=8.0)
    finally:
        server.stop()
    assert int(step["ok"]) > SWITCH_AFTER + 50, step["ok"]  # it went bad well inside the step
    diagnosis = step["diagnosis"]
    # client: a loaded test machine flagged the step, and ramp's own limit is named first
    assert diagnosis["kind"] in ("unknown", "client"), diagnosis
    said = diagnosis["evidence"][0 if diagnosis["kind"] == "unknown" else -1]
    assert said.startswith(reason) and said.endswith("its figures over the step are not read"), diagnosis
    # the step's other figures are there, as for any step: the client's from its requests, the server's
    # from what it said while it could be read
    assert int(step["error_count"]) == 0
    assert step["pct"]["ttft_ms"]["p50"] > 0 and float(step["out_tok_s"]) > 0
    assert step["server"]["running_max"] == 1


def test_a_server_that_says_more_run_than_the_level_sends_is_unknown_with_the_reason(tmp_path: Path) -> None:
    completions = Counted()

    async def lying(req: web.Request) -> web.StreamResponse:
        # 40 running at a level of 2: the server miscounts, or serves other traffic beside ramp's
        return web.Response(text=vllm_page(completions.served, running=40), content_type="text/plain")

    server = serving(metrics=lying, completions=completions.handle)
    try:
        (step,) = run_engine(server.url, tmp_path, (2,), step_s=3.0)
    finally:
        server.stop()
    diagnosis = step["diagnosis"]
    # before the client's own limit: the server's figures cannot be read against this level at all
    assert diagnosis["kind"] == "unknown" and diagnosis["confidence"] == "low", diagnosis
    assert diagnosis["evidence"] == [
        "the server reports 40 running at level 2 (other traffic, or a server that miscounts)"
    ], diagnosis
    # the step's other figures are there, as for any step: the client's, the server's as it said them, and
    # the TTFT split from its histogram (a mean of 20 ms; 90 % under 50 ms, the rest under 100 ms)
    assert int(step["error_count"]) == 0 and int(step["ok"]) > 50
    assert step["pct"]["ttft_ms"]["p50"] > 0 and float(step["out_tok_s"]) > 0
    assert step["server"]["running_max"] == 40
    split = step["ttft_split"]
    assert split["server"]["mean_ms"] == pytest.approx(20.0) and split["server"]["p95_bucket_ms"] == [
        50.0,
        100.0,
    ]


def test_headless_says_each_steps_limit_on_stderr_and_without_metrics_what_telemetry_would_tell(
    tmp_path: Path,
) -> None:
    server = serving(completions=Counted().handle)  # a plain OpenAI-compatible server: no /metrics
    profile = tmp_path / "tiny.toml"
    profile.write_text(TINY)
    out = tmp_path / "r.jsonl"
    args = ["--profile", str(profile), "--steps", "1,2", "--step-seconds", "2", "--warmup", "0"]
    try:
        ran = ramp_measured(["run", server.url, "--headless", *args, "--out", str(out)], tmp_path, 90)
    finally:
        server.stop()
    assert ran.returncode in (0, 2), ran.stderr  # 2: no SLO met is not this test's business
    said = [line for line in ran.stderr.splitlines() if line.startswith("ramp: step ")]
    steps = [json.loads(x) for x in out.read_text().splitlines() if json.loads(x).get("type") == "step"]
    assert len(said) == len(steps) == 2, ran.stderr
    for i, (line, step) in enumerate(zip(said, steps, strict=True)):
        kind = step["diagnosis"]["kind"]
        assert line.startswith(f"ramp: step {i + 1} ({i + 1}): Limit: "), line
        assert kind in ("none", "unknown", "client"), step["diagnosis"]  # client: a loaded test machine
        if kind != "client":
            assert NO_TELEMETRY in line, line  # what /metrics would have told apart


def test_without_metrics_a_failing_server_reads_errors(tmp_path: Path) -> None:
    server = serving(completions=Counted(fail_every=3).handle)
    try:
        (step,) = run_engine(server.url, tmp_path, (2,), step_s=2.0)
    finally:
        server.stop()
    assert step["diagnosis"]["kind"] == "errors", step["diagnosis"]
    assert "of requests failed" in step["diagnosis"]["evidence"][0]
    assert not step.get("server") or all(v is None for v in step["server"].values())


async def test_the_console_names_queueing_live_before_the_step_ends(tmp_path: Path) -> None:
    scenario = scenarios()["queue"]
    sim = run_sim_in_thread(build_config(BASE_PRESET, seed=3, **scenario_overrides("queue")))
    profile = f"[[bucket]]\ninput = {scenario.input_tokens}\noutput = {scenario.output_tokens}\n"
    profile += "[sampling]\nignore_eos = true\n"
    config = RunConfig(
        target=Target(url=sim.url),
        profile=parse_profile(profile, source="<queue>"),
        plan=RampPlan((16,), step_s=60.0, warmup_s=0.3),
        out=str(tmp_path / "run.jsonl"),
    )
    app = RampApp(refresh_hz=8.0)
    engine = Engine(config, on_snapshot=app.snapshot_callback)
    app.attach(engine)
    title = ""
    try:
        async with app.run_test(size=(160, 40)) as pilot:
            for _ in range(600):  # up to ~30 s on a loaded machine; ends once the live line names it
                snap = app.shown_snapshot
                assert snap is None or snap.state != "failed", snap.message
                panel = app.screen.query_one("#steps-panel", SnapshotPanel)
                title = str(panel.border_title)
                if "Limit so far (provisional): queueing" in title:
                    break
                await pilot.pause(0.05)
            snap = app.shown_snapshot
            assert snap is not None and not snap.steps and snap.step_remaining_s  # the step still measures
            assert snap.live_diagnosis.get("kind") == "queueing", snap.live_diagnosis
            assert "Limit so far (provisional): queueing — " in title and " waiting" in title, title
    finally:
        engine.stop()
        engine.wait(30)
        sim.stop()
