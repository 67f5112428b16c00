"""The simulator's control for a knee that moves (issue 32): ``POST /_sim/slots`` changes how many sequences
run at once from the next engine step, and the config's drift does it on a schedule; over real sockets on
127.0.0.1."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from loadgen.sim import SimServer, build_config

BODY = {"model": "sim-llama-8b", "prompt": "hello", "max_tokens": 20, "ignore_eos": True}


@pytest.fixture
async def sim() -> AsyncIterator[SimServer]:
    server = SimServer(build_config("tiny-cpu", seed=3, max_num_seqs=4))
    await server.start()
    yield server
    await server.stop()


async def test_slots_dropped_to_one_make_a_second_request_wait_for_the_first(sim: SimServer) -> None:
    async with httpx.AsyncClient(base_url=sim.url, timeout=10) as client:
        answer = await client.post("/_sim/slots", json={"max_num_seqs": 1})
        assert answer.status_code == 200 and answer.json() == {"max_num_seqs": 1, "was": 4}
        assert (await client.get("/_sim/info")).json()["max_num_seqs"] == 1
        replies = await asyncio.gather(*(client.post("/v1/completions", json=BODY) for _ in range(2)))
        assert all(r.status_code == 200 for r in replies)
    first, second = sorted(sim.ground_truth(), key=lambda r: r["admitted_ns"])
    # one slot: the second waited for the first's whole generation (written a little after the engine's step)
    generation = first["last_token_ns"] - first["admitted_ns"]
    assert generation > 0 and second["admitted_ns"] - first["admitted_ns"] >= 0.9 * generation


async def test_slots_refused_out_of_range_or_malformed(sim: SimServer) -> None:
    async with httpx.AsyncClient(base_url=sim.url, timeout=10) as client:
        for body in ({"max_num_seqs": 0}, {"max_num_seqs": 2.5}, {"max_num_seqs": True}, {"slots": 2}, [2]):
            answer = await client.post("/_sim/slots", json=body)
            assert answer.status_code == 400, body
        assert (await client.post("/_sim/slots", content=b"{")).status_code == 400
        assert (await client.get("/_sim/info")).json()["max_num_seqs"] == 4  # unchanged


async def test_the_fast_engine_has_no_slots_to_change() -> None:
    server = SimServer(build_config("fast"))
    await server.start()
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            answer = await client.post("/_sim/slots", json={"max_num_seqs": 2})
        assert answer.status_code == 409 and "no slots" in answer.json()["error"]["message"]
    finally:
        await server.stop()


async def test_the_drift_changes_the_slots_on_its_schedule() -> None:
    with pytest.raises(ValueError, match="go together"):
        build_config("tiny-cpu", drift_after_s=1.0)
    began = time.monotonic()  # before the server's own start: the drift counts from there
    server = SimServer(build_config("tiny-cpu", max_num_seqs=8, drift_after_s=0.3, drift_max_num_seqs=2))
    await server.start()
    try:
        assert server.info()["max_num_seqs"] == 8
        until = time.monotonic() + 5.0
        while server.info()["max_num_seqs"] == 8 and time.monotonic() < until:
            await asyncio.sleep(0.02)  # the drift's timer runs on this loop: polled, bounded
        assert server.info()["max_num_seqs"] == 2
        assert time.monotonic() - began >= 0.3
    finally:
        await server.stop()
