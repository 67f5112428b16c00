"""The simulator's control for a knee that moves (issue 32): how many sequences the batching engine runs at
once (``max_num_seqs``), changed mid-run as on a server that slowed or took on another tenant, so that a
test or a benchmark can move the knee under a running search and see it followed
(``loadgen.run.live_search``).

- ``POST /_sim/slots`` with ``{"max_num_seqs": M}`` (``slots_reply``): at once; the answer says the old
  value (``{"max_num_seqs": M, "was": N}``); 400 for a value that is not a whole number within
  1..``MAX_SLOTS``, 409 on the "fast" engine, which runs every request at once.
- The config's ``drift_after_s`` / ``drift_max_num_seqs`` (``ramp sim --drift-after-s S
  --drift-max-num-seqs M``; ``schedule_drift``): the same, S seconds after the server started.

The change applies from the engine's next step: no running sequence is preempted for it; the queue is
admitted up to the new batch as sequences finish.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time

from aiohttp import web

from loadgen import strict_json

from .config import SimConfig
from .requests import error_response
from .sequences import Engine

MAX_SLOTS = 1_000_000  # the most sequences a batch may be asked to run


def set_max_num_seqs(engine: Engine, slots: int) -> int:
    """At most ``slots`` sequences run at once from the engine's next step; returns the old value."""
    old = engine.params.max_num_seqs
    engine.params = dataclasses.replace(engine.params, max_num_seqs=slots)
    return old


def schedule_drift(engine: Engine, config: SimConfig, started_ns: int) -> asyncio.TimerHandle | None:
    """The config's drift on the running loop: ``drift_max_num_seqs`` from ``drift_after_s`` after
    ``started_ns`` (None when the config has none)."""
    if config.drift_after_s <= 0 or config.drift_max_num_seqs <= 0:
        return None
    due_s = config.drift_after_s - (time.monotonic_ns() - started_ns) / 1e9
    return asyncio.get_running_loop().call_later(
        max(0.0, due_s), set_max_num_seqs, engine, config.drift_max_num_seqs
    )


async def slots_reply(request: web.Request, engine: Engine, config: SimConfig) -> web.Response:
    """``POST /_sim/slots {"max_num_seqs": M}``: the batch from now on."""
    try:
        body = strict_json.loads(await request.read())
        slots = body["max_num_seqs"] if isinstance(body, dict) else None
    except (ValueError, KeyError) as exc:
        return error_response(f"invalid request body: {exc}", 400, "BadRequestError")
    if type(slots) is not int or not 1 <= slots <= MAX_SLOTS:
        return error_response(
            f"max_num_seqs must be a whole number within 1..{MAX_SLOTS}", 400, "BadRequestError"
        )
    if config.engine.kind != "gpu":
        return error_response("this engine runs every request at once: it has no slots", 409, "Conflict")
    return web.json_response({"max_num_seqs": slots, "was": set_max_num_seqs(engine, slots)})
