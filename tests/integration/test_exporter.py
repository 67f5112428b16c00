"""``--metrics-port``: ramp's own /metrics scraped over HTTP during a real run against the simulator (one
worker process, 127.0.0.1, port 0), the level read back while it holds and the totals checked against the
record once it ends; and a real Prometheus server (the ``prometheus`` binary; skipped without it) scraping
a run and answering a PromQL query with the level the run held."""

from __future__ import annotations

import json
import platform
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from snapshot_watch import Watch

from loadgen.cli import main as cli_main
from loadgen.config import RampPlan
from loadgen.observe.exporter import serve, with_exporter
from loadgen.profile import parse_profile
from loadgen.record import read_record
from loadgen.run.config import RunConfig
from loadgen.run.engine import Engine
from loadgen.types import Target

PROFILE = """
name = "exporter-small"
[[bucket]]
name = "short"
input = 24
output = 24
[sampling]
ignore_eos = true
"""


pytestmark = pytest.mark.sim("h200-llama8b", seed=3)  # the conftest's module-scoped simulator


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def samples(text: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def config(sim: Any, out: Path, plan: RampPlan) -> RunConfig:
    profile = parse_profile(PROFILE, source="<exporter-small>")
    return RunConfig(target=Target(url=sim.url), profile=profile, plan=plan, out=str(out))


def test_a_scrape_reads_the_level_and_the_record_agrees(sim: Any, tmp_path: Path) -> None:
    said: list[str] = []
    cfg, metrics = with_exporter(
        config(sim, tmp_path / "r.jsonl", RampPlan((3,), 2.0, 0.3)), "127.0.0.1", 0, said.append
    )
    assert metrics is not None and said == [f"ramp: metrics on {metrics.url}\n"]
    base = metrics.url.removesuffix("/metrics")
    try:
        assert get(base + "/healthz") == (200, "ok\n")
        assert get(base + "/readyz") == (503, "starting\n")  # no snapshot yet
        watch = Watch()
        engine = Engine(cfg, on_snapshot=watch)
        engine.start()
        watch.seen(
            lambda s: s.phase == "measure" and s.state == "running" and s.in_flight > 0, what="measuring"
        )
        status, text = get(metrics.url)
        assert status == 200
        live = samples(text)
        assert live["ramp_level"][()] == 3 and live["ramp_step"][()] == 1
        assert live["ramp_state"][(("state", "running"),)] == 1.0
        assert live["ramp_workers"] == {(("host", platform.node()),): 1.0}  # the header's fleet, by host
        assert get(base + "/readyz") == (200, "running\n")
        outcome = engine.wait(40)
        assert outcome is not None and outcome.state == "finished", outcome
        final = samples(get(metrics.url)[1])
        assert get(base + "/readyz") == (503, "finished\n")
    finally:
        metrics.close()
    record = read_record(tmp_path / "r.jsonl")
    assert record.header["metrics_url"] == metrics.url
    (step,) = record.steps
    assert final["ramp_requests_total"][(("status", "ok"),)] == step["ok"] > 0
    assert final["ramp_tokens_total"][(("direction", "output"),)] == step["output_tokens"]
    assert final["ramp_ttft_seconds_count"][()] == step["ok"]
    # the run's exact p50 is the step's (one step): the gauge is HDR's, not a bucket interpolation
    p50 = final["ramp_ttft_quantile_seconds"][(("quantile", "0.5"), ("window", "run"))]
    assert p50 == pytest.approx(step["ttft_ms"]["p50"] / 1000, rel=1e-9)


@pytest.mark.skipif(shutil.which("promtool") is None, reason="no promtool (Debian: prometheus)")
def test_promtool_finds_nothing_to_say_of_a_scrape(sim: Any, tmp_path: Path) -> None:
    """Issue 30: ``promtool check metrics`` said 60 "quantile label on a gauge" and that ``ramp_step_count``
    was named like a histogram's count. A scrape after a two-step run (every window and histogram filled)
    passes clean, and both steps' starts are in it, as far apart as the record says."""
    cfg, metrics = with_exporter(
        config(sim, tmp_path / "r.jsonl", RampPlan((2, 3), 1.5, 0.3)), "127.0.0.1", 0, lambda _: None
    )
    assert metrics is not None
    try:
        engine = Engine(cfg)
        engine.start()
        outcome = engine.wait(40)
        assert outcome is not None and outcome.state == "finished", outcome
        status, text = get(metrics.url)
    finally:
        metrics.close()
    assert status == 200 and 'ramp_ttft_quantile_seconds{quantile="0.95",window="run"}' in text
    lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    assert (lint.returncode, lint.stdout + lint.stderr) == (0, ""), lint.stdout + lint.stderr
    starts = samples(text)["ramp_step_start_timestamp_seconds"]
    one, two = starts[(("step", "1"),)], starts[(("step", "2"),)]
    steps = read_record(tmp_path / "r.jsonl").steps
    assert two - one == pytest.approx(steps[1]["started_s"] - steps[0]["started_s"], abs=0.05)


def test_a_port_taken_is_a_usage_error(sim: Any, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = cli_main(["run", sim.url, "--headless", "--steps", "1", "--metrics-port", str(port)])
    err = capsys.readouterr().err
    assert code == 2 and f"--metrics-port {port}: cannot listen on 127.0.0.1:{port}" in err
    assert "Traceback" not in err


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.skipif(shutil.which("prometheus") is None, reason="no prometheus binary (Debian: prometheus)")
def test_a_real_prometheus_scrapes_the_level(sim: Any, tmp_path: Path) -> None:
    cfg, metrics = with_exporter(
        config(sim, tmp_path / "p.jsonl", RampPlan((5,), 30.0, 0.3)), "127.0.0.1", 0, str
    )
    assert metrics is not None
    target = metrics.url.removeprefix("http://").removesuffix("/metrics")
    conf = tmp_path / "prometheus.yml"
    conf.write_text(
        json.dumps(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "scrape_configs": [{"job_name": "ramp", "static_configs": [{"targets": [target]}]}],
            }
        )
    )  # YAML is a superset of JSON
    # Prometheus cannot bind port 0 and say which: a free port, taken again within milliseconds
    prom_port = free_port()
    prom = subprocess.Popen(
        ["prometheus", f"--config.file={conf}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{prom_port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    engine = Engine(cfg)
    try:
        engine.start()
        query = urllib.parse.urlencode({"query": 'ramp_level{job="ramp"}'})
        deadline = time.monotonic() + 60
        level: float | None = None
        # polls Prometheus, not the run: bounded. A scrape before the run's first step has begun reads the
        # level before it (a CI run read 1): on a loaded machine Prometheus can get there first: wait for the 5.
        while level != 5.0 and time.monotonic() < deadline:
            status, body = (
                get(f"http://127.0.0.1:{prom_port}/api/v1/query?{query}") if _up(prom_port) else (0, "")
            )
            if status == 200:
                result = json.loads(body)["data"]["result"]
                if result:
                    level = float(result[0]["value"][1])
            if level != 5.0:
                time.sleep(0.5)
        assert level == 5.0
    finally:
        engine.stop()
        engine.wait(30)
        metrics.close()
        prom.terminate()
        prom.wait(20)


def _up(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_headless_cli_says_the_port_it_took_and_the_header_keeps_it(
    sim: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cli.jsonl"
    profile = tmp_path / "p.toml"
    profile.write_text(PROFILE)
    argv = ["run", sim.url, "--headless", "--profile", str(profile), "--steps", "1", "--step-seconds", "1",
            "--warmup", "0", "--out", str(out), "--metrics-port", "0"]  # fmt: skip
    assert cli_main(argv) == 0
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if line.startswith("ramp: metrics on ")]
    assert len(said) == 1
    url = said[0].removeprefix("ramp: metrics on ")
    port = int(url.removeprefix("http://127.0.0.1:").removesuffix("/metrics"))
    assert port > 0 and read_record(out).header["metrics_url"] == url
    with pytest.raises(OSError):  # closed with the run: nothing listens there any more
        urllib.request.urlopen(url, timeout=2)


def test_an_ipv6_host_is_served_and_named_in_brackets() -> None:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError as exc:
        pytest.skip(f"no IPv6 loopback here: {exc}")
    metrics = serve("::1", 0)
    try:
        assert metrics.url.startswith("http://[::1]:") and metrics.url.endswith("/metrics")
        assert get(metrics.url.removesuffix("/metrics") + "/healthz") == (200, "ok\n")
        assert get(metrics.url.removesuffix("/metrics") + "/nope")[0] == 404
        assert samples(get(metrics.url)[1]) == {"ramp_up": {(): 0.0}}
    finally:
        metrics.close()
