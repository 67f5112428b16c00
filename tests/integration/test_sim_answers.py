"""The simulator's answers: deterministic per prompt at temperature 0 (or with a seed), and changed by its
answer-change control above a number of open generations or after a time (the control quality tests use)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from loadgen.sim import SimServer, build_config
from loadgen.sim.__main__ import build_parser, config_from_args


def _body(prompt: str, **extra: Any) -> dict[str, Any]:
    return {"model": "sim-llama-8b", "prompt": prompt, "max_tokens": 16, "stream": True, **extra}


async def _answer(client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> str:
    text: list[str] = []
    async with client.stream("POST", url + "/v1/completions", json=body) as resp:
        async for line in resp.aiter_lines():
            if line.startswith("data: {"):
                choices = json.loads(line[6:])["choices"]
                text.extend(c["text"] for c in choices)
    return "".join(text)


@pytest.fixture
async def sims() -> AsyncIterator[list[SimServer]]:
    made: list[SimServer] = []
    yield made
    for server in made:
        await server.stop()


async def _start(made: list[SimServer], **overrides: Any) -> str:
    server = SimServer(build_config("tiny-cpu", speed=50.0, **overrides))
    made.append(server)
    return await server.start()


async def test_temperature_zero_answers_depend_on_the_prompt_alone(sims: list[SimServer]) -> None:
    url = await _start(sims)
    async with httpx.AsyncClient(timeout=10) as client:
        greedy = [await _answer(client, url, _body(p, temperature=0)) for p in ("a b c", "d e f", "a b c")]
        sampled = [await _answer(client, url, _body("a b c", temperature=1.0)) for _ in range(3)]
    assert greedy[0] == greedy[2] != greedy[1] and greedy[0]
    assert len(set(sampled)) > 1  # without temperature 0 or a seed each reply is drawn afresh
    again = await _start(sims)  # a restarted server answers as before (its seed is its weights)
    other = await _start(sims, seed=5)  # another seed: another model, other answers
    async with httpx.AsyncClient(timeout=10) as client:
        assert await _answer(client, again, _body("a b c", temperature=0)) == greedy[0]
        assert await _answer(client, other, _body("a b c", temperature=0)) != greedy[0]


async def test_answers_change_above_a_number_of_open_generations(sims: list[SimServer]) -> None:
    url = await _start(sims, answer_change_above=2)
    prompts = [f"probe {i}" for i in range(4)]
    async with httpx.AsyncClient(timeout=10) as client:
        alone = [await _answer(client, url, _body(p, temperature=0)) for p in prompts]
        two = await asyncio.gather(*(_answer(client, url, _body(p, temperature=0)) for p in prompts[:2]))
        four = await asyncio.gather(*(_answer(client, url, _body(p, temperature=0)) for p in prompts))
    assert list(two) == alone[:2]
    changed = [a != b for a, b in zip(four, alone, strict=True)]
    assert sum(changed) >= 1, changed  # the 3rd and 4th of 4 open generations answer differently
    truth = sims[0].ground_truth()
    assert [g["answer_changed"] for g in truth[:6]] == [False] * 6
    assert sum(bool(g["answer_changed"]) for g in truth[6:]) == sum(changed)


async def test_answers_change_after_a_time(sims: list[SimServer]) -> None:
    url = await _start(sims, answer_change_after_s=0.3)
    async with httpx.AsyncClient(timeout=10) as client:
        before = await _answer(client, url, _body("x y", temperature=0))
        again = await _answer(client, url, _body("x y", temperature=0))
        await asyncio.sleep(0.35)  # past the simulator's change time (not synchronisation)
        after = await _answer(client, url, _body("x y", temperature=0))
    assert before == again != after


def test_ramp_sim_flags_set_the_control() -> None:
    args = build_parser().parse_args(
        ["--answer-change-above", "8", "--answer-change-after-s", "30", "--answer-change-share", "0.5"]
    )
    config = config_from_args(args)
    assert (config.answer_change_above, config.answer_change_after_s, config.answer_change_share) == (
        8,
        30.0,
        0.5,
    )
    with pytest.raises(ValueError, match="answer_change_share"):
        build_config(answer_change_share=1.5)
