"""Prefix-cache reset: the simulator's vLLM ``POST /reset_prefix_cache`` and SGLang ``POST /flush_cache``
(the engine drops every cached block nobody holds), the client call that picks the runtime's endpoint and
says what happened (``loadgen.target.cache``), and the ``--reset-prefix-cache`` flag."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager

import httpx
import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from loadgen.cli.commands import build_parser
from loadgen.cli.resolve import build_config as build_run_config
from loadgen.sim import FixedLatencyEngine, GpuEngine, SimServer, build_config, tokenizer
from loadgen.sim.sequences import Seq
from loadgen.target.cache import CacheReset, reset_prefix_cache
from loadgen.types import Target

SYSTEM = "You are a careful assistant who answers in full sentences. " * 40  # ~500 tokens shared


def _chat(question: str) -> dict[str, object]:
    return {
        "model": "sim-llama-8b",
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}],
        "max_tokens": 4,
        "ignore_eos": True,
    }


@pytest.fixture
async def sim() -> AsyncIterator[SimServer]:
    server = SimServer(build_config("tiny-cpu", seed=3))
    await server.start()
    yield server
    await server.stop()


async def _cached_tokens(client: httpx.AsyncClient, question: str) -> int:
    reply = await client.post("/v1/chat/completions", json=_chat(question))
    assert reply.status_code == 200
    cached: int = reply.json()["usage"]["prompt_tokens_details"]["cached_tokens"]
    return cached


async def _metric(client: httpx.AsyncClient, name: str) -> float:
    text = (await client.get("/metrics")).text
    return next(
        s.value for fam in text_string_to_metric_families(text) for s in fam.samples if s.name == name
    )


# -- the engine ----------------------------------------------------------------------------------------
def _seq(rid: int, ids: tuple[int, ...], out: int = 4, arrival: int = 0) -> Seq:
    return Seq(rid, arrival, len(ids), out, block_hashes=tokenizer.block_hashes(ids, 16))


def _drain(engine: GpuEngine, now: int = 0) -> int:
    for _ in range(100_000):
        if not engine.has_work():
            return now
        now = engine.step(now).end_ns
    raise AssertionError("engine did not finish")


def test_a_reset_drops_the_cached_blocks_nobody_holds() -> None:
    engine = GpuEngine(build_config("tiny-cpu").engine)
    shared = tuple(range(7000, 7000 + 512))
    first = _seq(1, shared + (1, 2, 3))
    engine.add(first)
    now = _drain(engine)
    assert engine.kv_usage() == 0.0  # the cached blocks count as free
    assert engine.reset_prefix_cache() == 512 // 16
    assert engine.stats.prefix_cache_resets == 1
    assert engine.kv_usage() == 0.0
    again = _seq(2, shared + (4, 5, 6), arrival=now)
    engine.add(again)
    _drain(engine, now)
    assert again.cached_tokens == 0  # a miss: the prefix was dropped
    assert engine.reset_prefix_cache() == 512 // 16  # ... and cached again by the miss
    assert engine.stats.prefix_cache_resets == 2


def test_blocks_held_by_a_running_request_stay_cached() -> None:
    engine = GpuEngine(build_config("tiny-cpu").engine)
    shared = tuple(range(9000, 9000 + 256))
    holder = _seq(1, shared + (1,), out=200)
    engine.add(holder)
    now = 0
    while holder.first_token_ns is None:
        now = engine.step(now).end_ns
    used = engine.kv_usage()
    assert engine.reset_prefix_cache() == 0  # everything cached is held by the running request
    assert engine.kv_usage() == used
    sharer = _seq(2, shared + (2,), arrival=now)
    engine.add(sharer)
    _drain(engine, now)
    assert sharer.cached_tokens == 256  # still shared after the reset, as in vLLM
    assert engine.reset_prefix_cache() == 256 // 16  # released now: the next reset drops them


def test_the_fixed_latency_engine_has_nothing_to_drop() -> None:
    engine = FixedLatencyEngine(build_config("fast").engine)
    assert engine.reset_prefix_cache() == 0
    assert engine.stats.prefix_cache_resets == 1


# -- the simulator's endpoints -------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/reset_prefix_cache", "/flush_cache"])
async def test_after_a_reset_the_same_prefix_misses_again(sim: SimServer, path: str) -> None:
    async with httpx.AsyncClient(base_url=sim.url, timeout=10) as client:
        assert await _cached_tokens(client, "first question") == 0
        assert await _cached_tokens(client, "second question") >= 256  # a hit
        hits = await _metric(client, "vllm:prefix_cache_hits_total")
        assert hits >= 256
        reply = await client.post(path)
        assert reply.status_code == 200
        assert await _cached_tokens(client, "third question") == 0  # a miss again
        assert await _metric(client, "vllm:prefix_cache_hits_total") == hits
        assert await _metric(client, "ramp_sim:prefix_cache_resets_total") == 1
        info = (await client.get("/_sim/info")).json()
    assert info["prefix_cache_resets"] == 1
    assert info["prefix_blocks_dropped"] >= 256 // 16


async def test_vllms_reset_is_post_only_and_sglangs_flush_also_answers_get(sim: SimServer) -> None:
    async with httpx.AsyncClient(base_url=sim.url, timeout=10) as client:
        assert (await client.get("/reset_prefix_cache")).status_code == 405
        assert (await client.post("/reset_prefix_cache?reset_running_requests=true")).status_code == 200
        assert (await client.get("/flush_cache")).status_code == 200
        info = (await client.get("/_sim/info")).json()
    assert info["prefix_cache_resets"] == 2


async def test_the_fast_preset_answers_200_with_nothing_to_drop() -> None:
    server = SimServer(build_config("fast"))
    url = await server.start()
    try:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            assert (await client.post("/reset_prefix_cache")).status_code == 200
            assert (await client.post("/flush_cache")).status_code == 200
            info = (await client.get("/_sim/info")).json()
    finally:
        await server.stop()
    assert info["prefix_cache_resets"] == 2 and info["prefix_blocks_dropped"] == 0


# -- the client call -----------------------------------------------------------------------------------
async def test_the_client_resets_the_simulator_as_vllm_and_as_an_unknown_runtime(sim: SimServer) -> None:
    target = Target(url=sim.url + "/v1")
    for runtime in ("vllm", None, "ramp-sim", "openai-compatible"):
        reset = await reset_prefix_cache(target, runtime)
        assert reset == CacheReset(True, f"{VLLM} → 200")
    assert sim.info()["prefix_cache_resets"] == 4


async def test_the_client_flushes_sglang(sim: SimServer) -> None:
    reset = await reset_prefix_cache(Target(url=sim.url), "sglang")
    assert reset == CacheReset(True, "POST /flush_cache → 200")
    assert sim.info()["prefix_cache_resets"] == 1


Seen = list[tuple[str, str, Mapping[str, str]]]
Answer = int | tuple[int, str]  # a status, or a status and a body
VLLM = "POST /reset_prefix_cache?reset_running_requests=true"


@asynccontextmanager
async def _fake(routes: Mapping[str, Answer], seen: Seen) -> AsyncIterator[str]:
    """A server that answers each path of ``routes`` with its status (and body; every other path: 404)."""

    async def handle(request: web.Request) -> web.Response:
        seen.append((request.method, request.path_qs, dict(request.headers)))
        answer = routes.get(request.path, 404)
        status, body = answer if isinstance(answer, tuple) else (answer, "nope")
        return web.Response(status=status, text=body)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


async def _reset_on(
    routes: Mapping[str, Answer], runtime: str | None, target: Callable[[str], Target] = Target
) -> tuple[CacheReset, Seen]:
    seen: Seen = []
    async with _fake(routes, seen) as url:
        reset = await reset_prefix_cache(target(url), runtime)
    return reset, seen


async def test_an_unknown_runtime_falls_back_to_sglangs_flush_on_404() -> None:
    reset, seen = await _reset_on({"/flush_cache": 200}, None)
    assert reset == CacheReset(True, f"{VLLM} → 404, then POST /flush_cache → 200")
    assert [(m, p) for m, p, _ in seen] == [
        ("POST", "/reset_prefix_cache?reset_running_requests=true"),
        ("POST", "/flush_cache"),
    ]


async def test_no_reset_endpoint_says_what_the_server_needs() -> None:
    reset, seen = await _reset_on({}, None)
    assert not reset.done
    assert reset.how.startswith(
        f"{VLLM} → 404, then POST /flush_cache → 404: the server offers no cache reset"
    )
    assert "VLLM_SERVER_DEV_MODE=1" in reset.how
    assert len(seen) == 2


async def test_a_known_runtime_asks_its_own_endpoint_only() -> None:
    reset, seen = await _reset_on({"/flush_cache": 200}, "vllm")
    assert not reset.done
    assert reset.how.startswith(f"{VLLM} → 404: ")
    assert "VLLM_SERVER_DEV_MODE=1" in reset.how
    assert len(seen) == 1
    reset, seen = await _reset_on({"/reset_prefix_cache": 200}, "sglang")
    assert not reset.done and reset.how.startswith("POST /flush_cache → 404")
    assert len(seen) == 1


@pytest.mark.parametrize(
    ("routes", "runtime", "start", "hint"),
    [
        ({"/flush_cache": 400}, "sglang", "POST /flush_cache → 400", "no request is running or waiting"),
        ({"/reset_prefix_cache": 409}, "vllm", f"{VLLM} → 409", "held"),
        ({"/reset_prefix_cache": 500}, None, f"{VLLM} → 500", "held"),
        ({"/reset_prefix_cache": (200, '{"success": false}')}, "vllm", f"{VLLM} → 200", "held"),
        ({"/flush_cache": (200, "Flush cache failed.\n")}, "sglang", "POST /flush_cache → 200", "no request"),
        ({"/reset_prefix_cache": 401}, "vllm", f"{VLLM} → 401", "API key"),
    ],
)
async def test_a_refused_reset_is_not_done_and_not_retried(
    routes: Mapping[str, Answer], runtime: str | None, start: str, hint: str
) -> None:
    reset, seen = await _reset_on(routes, runtime)
    assert not reset.done
    assert reset.how.startswith(start) and hint in reset.how
    assert len(seen) == 1


async def test_the_call_carries_the_targets_headers_and_query(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAMP_TEST_KEY", "sekrit")
    reset, seen = await _reset_on(
        {"/reset_prefix_cache": 200},
        "vllm",
        lambda url: Target(url=url, api_key_env="RAMP_TEST_KEY", headers=(("X-Team", "bench"),)),
    )
    assert reset.done and "sekrit" not in reset.how
    _, _, headers = seen[0]
    assert headers["Authorization"] == "Bearer sekrit" and headers["X-Team"] == "bench"


async def test_the_targets_query_string_is_kept_and_never_told() -> None:
    reset, seen = await _reset_on(
        {"/reset_prefix_cache": 200}, "vllm", lambda url: Target(url=url + "/v1?api_key=sekrit")
    )
    assert reset.done and "sekrit" not in reset.how
    assert seen[0][1] == "/reset_prefix_cache?api_key=sekrit&reset_running_requests=true"


async def test_an_unreachable_server_is_not_done_with_the_reason() -> None:
    probe = web.Application()
    runner = web.AppRunner(probe)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    await runner.cleanup()  # nothing listens there now
    reset = await reset_prefix_cache(Target(url=f"http://127.0.0.1:{port}"), None)
    assert reset == CacheReset(False, f"connection refused: http://127.0.0.1:{port}/reset_prefix_cache")


# -- the flag ------------------------------------------------------------------------------------------
URL = "http://127.0.0.1:8000"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [([], "never"), (["--reset-prefix-cache"], "step"), (["--reset-prefix-cache", "run"], "run")],
)
def test_the_flag_reaches_the_run_config(argv: list[str], expected: str) -> None:
    cfg = build_run_config(build_parser().parse_args(["run", URL, *argv]), URL)
    assert cfg.reset_prefix_cache == expected


def test_the_flag_refuses_other_values(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", URL, "--reset-prefix-cache", "always"])
    assert "step" in capsys.readouterr().err
