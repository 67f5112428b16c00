"""loadgen.target.http: auth header, URL root, secret scrubbing, error reasons and runtime identity."""

from __future__ import annotations

import asyncio
import errno
import json
import socket

import httpx
import pytest

from loadgen.runtimes import RuntimeDocs, identify
from loadgen.target.http import (
    api_key,
    auth_headers,
    describe_error,
    fetch_runtime_docs,
    reason,
    scrub,
    server_root,
    target_headers,
)
from loadgen.types import Target


def test_auth_headers_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAMP_TEST_KEY", "sk-123")
    monkeypatch.setenv("RAMP_EMPTY_KEY", "")
    monkeypatch.delenv("RAMP_UNSET_KEY", raising=False)
    assert auth_headers("RAMP_TEST_KEY") == {"Authorization": "Bearer sk-123"}
    assert auth_headers("RAMP_EMPTY_KEY") == {} and auth_headers("RAMP_UNSET_KEY") == {}
    assert auth_headers(None) == {} and auth_headers("") == {}
    assert api_key("RAMP_TEST_KEY") == "sk-123" and api_key(None) == ""


def test_target_headers_add_auth_to_the_extra_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAMP_TEST_KEY", "sk-123")
    target = Target(url="http://h", api_key_env="RAMP_TEST_KEY", headers=(("X-Team", "a"),))
    assert target_headers(target) == {"X-Team": "a", "Authorization": "Bearer sk-123"}
    assert target_headers(Target(url="http://h", api_key_env="")) == {}


@pytest.mark.parametrize(
    ("url", "root"),
    [
        ("http://h:8000", "http://h:8000"),
        ("http://h:8000/", "http://h:8000"),
        ("http://h:8000/v1", "http://h:8000"),
        ("http://h:8000/v1/", "http://h:8000"),
        ("  http://h:8000/v1  ", "http://h:8000"),
        ("http://h:8000/proxy/v1", "http://h:8000/proxy"),
        ("http://h:8000/v10", "http://h:8000/v10"),
    ],
)
def test_server_root(url: str, root: str) -> None:
    assert server_root(url) == root
    assert Target(url=url.strip()).base_url == root


def test_scrub_masks_every_kind_of_secret() -> None:
    assert scrub("cannot reach http://bob:hunter2@h:8000/v1") == "cannot reach http://***@h:8000/v1"
    assert scrub("git https://ghp_abc@github.com/x") == "git https://***@github.com/x"
    assert scrub("GET https://h/v1/models?api_key=abc123&x=1") == "GET https://h/v1/models?api_key=***&x=1"
    assert scrub("https://h/m?key=abc;token=def") == "https://h/m?key=***;token=***"
    assert scrub("http://h/m?x=1&Access_Token=zz#f") == "http://h/m?x=1&Access_Token=***#f"
    assert scrub("header Authorization: Bearer sk-abc.def_1") == "header Authorization: Bearer ***"
    assert scrub("the key sk-live-9 leaked", secrets=("sk-live-9", "")) == "the key *** leaked"


def test_scrub_leaves_ordinary_text_alone() -> None:
    for text in (
        "connection refused: http://127.0.0.1:8000/metrics",
        "mail me at bob@example.com",
        "http://h:8000/v1/models?limit=5&model=qwen",
        "a = b and monkey=1",
        "",
    ):
        assert scrub(text) == text


def test_reason_reads_the_chain_under_a_library_error() -> None:
    refused = ConnectionRefusedError(errno.ECONNREFUSED, "Connect call failed")
    wrapped = RuntimeError("All connection attempts failed")
    wrapped.__cause__ = refused
    assert reason(wrapped) == "connection refused"
    assert reason(socket.gaierror(-2, "Name or service not known")) == "unknown host"
    assert reason(OSError(errno.ENETUNREACH, "x")) == "network is unreachable"
    assert reason(ValueError("  odd\n  thing ")) == "odd thing"
    assert reason(ValueError()) == "ValueError"


async def test_describe_error_names_the_url() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/metrics"
    async with httpx.AsyncClient(trust_env=False) as client:
        with pytest.raises(httpx.HTTPError) as caught:
            await client.get(url)
    assert describe_error(caught.value, url) == f"connection refused: {url}"
    assert describe_error(socket.gaierror(-2, "Name or service not known"), url) == f"unknown host: {url}"
    assert describe_error(httpx.ReadTimeout("slow"), url, 0.3) == f"timeout after 0.3 s: {url}"
    assert describe_error(asyncio.TimeoutError(), url) == f"timeout: {url}"
    request = httpx.Request("GET", url)
    status = httpx.HTTPStatusError("x", request=request, response=httpx.Response(503, request=request))
    assert describe_error(status, url) == f"HTTP 503 from {url}"
    assert describe_error(httpx.RemoteProtocolError("bad"), url) == f"RemoteProtocolError: {url}"
    assert describe_error(ValueError("no\nway"), url) == f"ValueError: no way ({url})"


VLLM_MODELS = {"data": [{"id": "qwen", "owned_by": "vllm"}]}
SGLANG_MODELS = {"data": [{"id": "qwen", "owned_by": "sglang"}]}
OTHER_MODELS = {"data": [{"id": "m1", "owned_by": "someone"}]}


def answered(
    sim: object = None, version: object = None, sglang: object = None, models: object = None
) -> RuntimeDocs:
    """The answers of the simulator's info path, vLLM's /version and SGLang's info path, as fetched."""
    return RuntimeDocs.of({"ramp-sim": [sim], "sglang": [sglang]}, {"vllm": version}, models)


@pytest.mark.parametrize(
    ("docs", "expected"),
    [
        (
            answered(sim={"version": "0.1.0"}, version={"version": "9"}, models=VLLM_MODELS),
            ("ramp-sim", "0.1.0"),
        ),
        (answered(sim={}, version={"version": "9"}), ("ramp-sim", "9")),
        (answered(version={"version": "0.32.0"}, models=VLLM_MODELS), ("vllm", "0.32.0")),
        (answered(sglang={"version": "0.4.9", "model_path": "q"}, models=OTHER_MODELS), ("sglang", "0.4.9")),
        (answered(version={"version": "0.5"}, sglang={"tp_size": 2}), ("sglang", "0.5")),
        (answered(models=SGLANG_MODELS), ("sglang", None)),
        (RuntimeDocs.of(metrics_runtime="sglang"), ("sglang", None)),
        (answered(version={"version": "0.32.0"}), ("vllm", "0.32.0")),
        (answered(models=OTHER_MODELS), ("openai-compatible", None)),
        (answered(), (None, None)),
        (RuntimeDocs(), (None, None)),
    ],
)
def test_identify(docs: RuntimeDocs, expected: tuple[str | None, str | None]) -> None:
    assert identify(docs) == expected


def test_what_is_not_a_json_object_is_left_out() -> None:
    assert answered(sim=[1], version="text", sglang=3, models={"data": "nope"}) == RuntimeDocs()


async def test_fetch_runtime_docs_asks_every_endpoint_at_once() -> None:
    asked: list[str] = []
    answers = {"/version": {"version": "0.32.0"}, "/get_server_info": {"version": "0.4.9", "tp_size": 1}}

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        doc = answers.get(request.url.path)
        return httpx.Response(200, content=json.dumps(doc)) if doc else httpx.Response(404)

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        docs = await fetch_runtime_docs(client, "http://h:8000", models=OTHER_MODELS)
    assert sorted(asked) == ["/_sim/info", "/get_server_info", "/server_info", "/version"]
    assert docs.info == {"sglang": answers["/get_server_info"]} and docs.owners == frozenset({"someone"})
    assert identify(docs) == ("sglang", "0.4.9")


def test_models_fetched_apart_join_the_other_answers() -> None:
    docs = answered(version={"version": "0.32.0"}).with_models(VLLM_MODELS)
    assert docs.owners == frozenset({"vllm"}) and docs.models_answered
    assert identify(docs) == ("vllm", "0.32.0")
