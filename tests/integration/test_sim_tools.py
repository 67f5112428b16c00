"""The simulator answering with tool calls, end to end: what ramp measures of each call (its time to the
first tool-call delta, its arguments' tokens) against what the simulator did, request by request (joined
on X-Request-Id), through a session that answers the calls, and through the engine to the record.

The simulator stamps each write as it starts and the client each read as it lands (the same monotonic
clock), so a call's first delta reaches the client a loopback leg after the simulator wrote it.
"""

from __future__ import annotations

import asyncio
import csv
import json
import random
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from snapshot_watch import simulated_step

from loadgen.client import Client
from loadgen.config import Api
from loadgen.profile import parse_profile
from loadgen.sim import build_config
from loadgen.sim.server import SimServer
from loadgen.types import Outcome, RequestResult, RequestSpec, Target
from loadgen.workload import PromptSizer, Workload

PROFILE = """
[target]
api = "{api}"

[[bucket]]
input = 16
output = 64

[session]
turns = 2

[tools]
result = '{{"temperature": 21}}'
max_rounds = 2

[[tools.function]]
name = "get_weather"
parameters = {{ type = "object", properties = {{ city = {{ type = "string" }} }} }}
"""


def spec(api: Api, extra: tuple[tuple[str, object], ...] = (), max_tokens: int = 64) -> RequestSpec:
    tools = parse_profile(PROFILE.format(api=api)).tools
    assert tools is not None
    return RequestSpec(
        api=api, model="", max_tokens=max_tokens, messages=(("user", "weather?"),), keep_text=True,
        extra_body=tools.extra_body(api) + extra,
    )  # fmt: skip


async def _send_all(
    api: Api,
    n: int,
    preset: str = "tiny-cpu",
    rate: float = 1.0,
    extra: tuple[tuple[str, object], ...] = (),
    max_tokens: int = 64,
) -> tuple[list[RequestResult], dict[str, dict[str, object]]]:
    server = SimServer(build_config(preset, seed=5, tool_call_rate=rate))
    url = await server.start("127.0.0.1", 0)
    client = Client(Target(url=url), 4, "h1")
    gate = asyncio.Semaphore(4)

    async def one() -> RequestResult:
        async with gate:
            return await client.send(spec(api, extra, max_tokens), time.monotonic_ns())

    try:
        results = await asyncio.wait_for(asyncio.gather(*(one() for _ in range(n))), 60)
        return list(results), {str(g["request_id"]): g for g in server.ground_truth()}
    finally:
        await client.aclose()
        await server.stop()


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_tool_calls_match_the_simulator_request_by_request(api: Api) -> None:
    results, truth = asyncio.run(_send_all(api, 16))
    lags_ms = []
    for r in results:
        assert r.outcome is Outcome.OK, r.error_message
        g = truth[r.request_id]
        assert g["tool_call"] == "get_weather" and g["tools_offered"] == 1
        assert r.called_tool and r.finish_reason == ("length" if r.output_tokens == 64 else "tool_calls")
        # every answer token was an argument fragment: usage's count, the simulator's, the chunks'
        assert r.tool_tokens == g["tool_tokens"] == r.output_tokens == g["output_tokens"] > 1
        assert r.tool_chunks == r.tool_tokens + 1  # the call's opening delta (its name) carries no token
        assert r.ttftc_ns == r.ttft_ns == r.ttfat_ns  # no reasoning: the call is the first output
        assert r.tool_decode_tok_s is not None and r.tool_decode_tok_s > 0
        call = r.tool_calls[0]
        assert len(r.tool_calls) == 1 and call.name == "get_weather" and call.id.startswith("call_")
        assert call.arguments  # the fragments, joined
        lag = r.first_tool_ns - g["first_tool_ns"]  # type: ignore[operator]
        assert lag >= 0  # never seen before it was written
        lags_ms.append(lag / 1e6)
    assert float(np.median(lags_ms)) < 2.0, lags_ms


def test_a_reasoning_model_thinks_then_calls() -> None:
    results, truth = asyncio.run(
        _send_all("chat", 8, "tiny-reasoning", extra=(("ignore_eos", True),), max_tokens=200)
    )
    for r in results:
        assert r.outcome is Outcome.OK, r.error_message
        g = truth[r.request_id]
        assert r.reasoning_tokens == g["reasoning_tokens"] > 0 and r.tool_tokens == g["tool_tokens"] > 0
        assert r.tool_tokens + r.reasoning_tokens == r.output_tokens == 200
        assert r.finish_reason == "length"  # ignore_eos: cut by max_tokens inside the call's arguments
        assert r.ttftc_ns == r.ttfat_ns and r.ttftc_ns > r.ttft_ns  # type: ignore[operator]


def test_the_call_rate_is_the_simulators_exactly() -> None:
    results, truth = asyncio.run(_send_all("chat", 24, rate=0.5))
    called = [r for r in results if r.called_tool]
    assert 0 < len(called) < 24
    assert {r.request_id for r in called} == {k for k, g in truth.items() if g["tool_call"]}
    for r in results:
        assert r.outcome is Outcome.OK
        assert r.finish_reason == (
            "length" if r.output_tokens == 64 else "tool_calls" if r.called_tool else "stop"
        )
        assert r.tool_tokens == truth[r.request_id]["tool_tokens"]


async def _sessions(
    api: Api, sessions: int, profile: str = ""
) -> tuple[list[list[RequestResult]], dict[str, dict[str, object]]]:
    server = SimServer(build_config("tiny-cpu", seed=5, tool_call_rate=1.0))
    url = await server.start("127.0.0.1", 0)
    client = Client(Target(url=url), sessions, "h1")
    workload = Workload(parse_profile(profile or PROFILE.format(api=api)), PromptSizer(1.0), "", seed=1)

    async def one(i: int) -> list[RequestResult]:
        session = workload.new_session(random.Random(i))
        out = []
        while (request := session.next_request()) is not None:
            out.append(await client.send(request, time.monotonic_ns()))
            session.on_result(out[-1])
        return out

    try:
        runs = await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(sessions))), 60)
        return list(runs), {str(g["request_id"]): g for g in server.ground_truth()}
    finally:
        await client.aclose()
        await server.stop()


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_session_answers_each_call_and_the_server_sees_the_results(api: Api) -> None:
    """Every reply calls the tool: each of the 2 user turns makes its 2 tool rounds (the cap), and the
    server saw 0, 1, 2 tool results, then the second turn's 2, 3, 4."""
    runs, truth = asyncio.run(_sessions(api, 3))
    for results in runs:
        assert all(r.outcome is Outcome.OK for r in results), [r.error_message for r in results]
        assert [truth[r.request_id]["tool_messages"] for r in results] == [0, 1, 2, 2, 3, 4]
        assert [r.turn for r in results] == list(range(6))
        prompts = [truth[r.request_id]["prompt_tokens"] for r in results]
        assert prompts == sorted(prompts)  # the history grows with every call and result


def test_a_replayed_dataset_answers_each_call_and_the_server_sees_the_results(tmp_path: Path) -> None:
    """A dataset's 2-turn conversations replayed with [tools]: each turn's reply calls the tool, the session
    answers it twice (the cap) before the next recorded user turn, as a synthetic session does; the server
    saw the tool messages, and the recorded reply follows the calls in the history."""
    data = tmp_path / "chats.jsonl"
    turns = [["be brief", "hello there", "hi", "tell me a story", "once"]] * 2
    data.write_text(
        "".join(
            json.dumps({"conversations": [{"from": f, "value": v} for f, v in zip(ROLES, t, strict=True)]})
            + "\n"
            for t in turns
        ),
        encoding="utf-8",
    )
    profile = PROFILE.format(api="chat").replace("[session]\nturns = 2\n", f'[dataset]\npath = "{data}"\n')
    runs, truth = asyncio.run(_sessions("chat", 2, profile))
    for results in runs:
        assert all(r.outcome is Outcome.OK for r in results), [r.error_message for r in results]
        assert [truth[r.request_id]["tool_messages"] for r in results] == [0, 1, 2, 2, 3, 4]
        assert [r.turn for r in results] == list(range(6))
        prompts = [truth[r.request_id]["prompt_tokens"] for r in results]
        assert prompts == sorted(prompts) and len(set(prompts)) == 6  # every round resends a longer history


ROLES = ("system", "human", "gpt", "human", "gpt")


def test_the_record_holds_the_simulators_tool_calls(tmp_path: Path) -> None:
    """One step through the engine (worker process, deltas, the record), stopped without cancelling: its
    tool calls and their tokens are the simulator's, and the per-request export's first tool-call delta is
    each request's first-call write a loopback leg later."""
    profile = parse_profile(
        PROFILE.format(api="chat").replace("[session]\nturns = 2\n", "[slo]\nttftc_p95_ms = 60000\n")
    )
    line, step, truth = simulated_step(
        build_config("tiny-cpu", seed=3, tool_call_rate=1.0), profile, tmp_path
    )
    assert line["tool_calls"] == step.stats.tool_calls == len(truth)
    assert line["tool_tokens"] == sum(g["tool_tokens"] for g in truth) == line["output_tokens"]
    assert "ttftc_ms" in line["hists"] and "tool_decode_tok_s" in line["hists"]
    # no reasoning: each call is its reply's first output, so TTFTC's histogram is TTFT's
    assert step.stats.pct("ttftc_ms") == step.stats.pct("ttft_ms") and step.stats.pct(
        "ttftc_ms"
    ).count == len(truth)
    assert step.stats.pct("tool_decode_tok_s").count > 0
    # the SLO's TTFTC clause was judged on the calls (a step with none would list it as not judged)
    assert line["slo_met"] is True and line["slo_failures"] == [] and "slo_not_judged" not in line
    assert step.stats.goodput_req_s == step.stats.req_s
    with open(tmp_path / "run.requests.csv", encoding="utf-8") as f:
        rows = {r["request_id"]: r for r in csv.DictReader(f)}
    truth_by_id = {g["request_id"]: g for g in truth}
    assert rows.keys() == truth_by_id.keys()
    lags_ms = []
    for rid, row in rows.items():
        g = truth_by_id[rid]
        assert int(row["tool_tokens"]) == g["tool_tokens"] and row["ttftc_ms"] == row["ttft_ms"]
        lags_ms.append((int(row["first_tool_ns"]) - g["first_tool_ns"]) / 1e6)
    assert min(lags_ms) >= 0 and float(np.median(lags_ms)) < 2.0, lags_ms


async def _unstreamed() -> tuple[dict[str, object], dict[str, object], int]:
    server = SimServer(build_config("tiny-cpu", seed=1))
    url = await server.start("127.0.0.1", 0)
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            ask = {"messages": [{"role": "user", "content": "x"}], "max_tokens": 64, "tools": tools}
            chat = (await http.post(url + "/v1/chat/completions", json=ask)).json()
            bad = await http.post(url + "/v1/chat/completions", json={**ask, "tools": [{"type": "x"}]})
            truth = server.ground_truth()[0]
        return chat, truth, bad.status_code
    finally:
        await server.stop()


def test_an_unstreamed_reply_carries_its_call() -> None:
    chat, truth, refused = asyncio.run(_unstreamed())
    choice = chat["choices"][0]  # type: ignore[index]
    call = choice["message"]["tool_calls"][0]
    assert call["function"]["name"] == "f" == truth["tool_call"] and choice["message"]["content"] is None
    assert chat["usage"]["completion_tokens"] == truth["tool_tokens"] > 0  # type: ignore[index]
    assert choice["finish_reason"] == ("length" if truth["tool_tokens"] == 64 else "tool_calls")
    assert refused == 400  # a tool without type "function", as vLLM refuses it
