"""Runtimes identify themselves (``Runtime.identify``, ``loadgen.runtimes.identify``): a runtime declares the
info paths it is asked at and the evidence it is named on, and the target's fetch asks every runtime's paths
without naming any: a new runtime is recognised with no change to ``loadgen/target/http.py``."""

from __future__ import annotations

import json
from typing import cast

import httpx

from loadgen.runtimes import RUNTIMES, SGLANG, VLLM, Runtime, RuntimeDocs, RuntimeName, identify
from loadgen.target.http import fetch_runtime_docs

# A runtime ramp does not ship: its own info document, marked by a key of its own.
XSERVE = Runtime(
    name=cast(RuntimeName, "x-serve"),
    label="X-Serve",
    info_paths=("/x/info",),
    info_keys=("x_version",),
    identified_by=("info_keys",),
)


async def fetched(answers: dict[str, object], runtimes: tuple[Runtime, ...]) -> tuple[list[str], RuntimeDocs]:
    asked: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        doc = answers.get(request.url.path)
        return httpx.Response(200, content=json.dumps(doc)) if doc is not None else httpx.Response(404)

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        docs = await fetch_runtime_docs(client, "http://h:8000", runtimes=runtimes)
    return asked, docs


async def test_a_new_runtime_is_asked_at_its_own_paths_and_named_by_its_own_keys() -> None:
    runtimes = (*RUNTIMES, XSERVE)
    asked, docs = await fetched({"/x/info": {"x_version": "1.2", "version": "1.2"}}, runtimes)
    assert "/x/info" in asked and len(asked) == len(set(asked))
    assert identify(docs, runtimes) == ("x-serve", "1.2")
    assert identify(docs) == (None, None)  # the shipped runtimes alone do not know it


async def test_a_runtime_is_named_on_the_earliest_rung_any_runtime_claims() -> None:
    # vLLM's /version and SGLang's info document with its keys: SGLang's own document is the more specific
    answers: dict[str, object] = {
        "/version": {"version": "0.5"},
        "/server_info": {"tp_size": 2, "version": "0.5.1"},
    }
    _, docs = await fetched(answers, RUNTIMES)
    assert VLLM.identify(docs) == ("version", "0.5") and SGLANG.identify(docs) == ("info_keys", "0.5.1")
    assert identify(docs) == ("sglang", "0.5.1")
