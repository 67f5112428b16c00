"""The simulator's HTTP face: an aiohttp server that speaks vLLM's OpenAI-compatible API over the engine model.

``SimServer`` owns the routes and the request handlers; the engine loop (loop.py) owns time and writes the
streams; requests.py parses bodies, faults.py draws injected failures, stream.py builds the reply bytes.

Every request leaves a ground-truth record (monotonic ns, the same clock as the client's) readable from
``SimServer.ground_truth()`` and ``GET /_sim/ground_truth``. Both runtimes' prefix-cache resets (vLLM's
``POST /reset_prefix_cache``, SGLang's ``/flush_cache``) drop the cached blocks nobody holds.

``POST /_sim/slots`` (and the config's drift, on a schedule) changes the batch mid-run, so that a test can
move the knee under a running search (slots.py).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import zlib
from array import array
from collections import deque
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from loadgen import strict_json

from . import tokenizer
from .config import SimConfig, build_config
from .faults import FaultDraw
from .loop import EngineLoop
from .metrics import make_registry, render
from .model import make_engine
from .params import EngineParams
from .replies import json_reply, stream_reply
from .requests import BadRequest, GenerateRequest, error_response, parse_generate, tokenize_ids
from .sequences import Engine, Seq, sample_output_len
from .slots import schedule_drift, slots_reply
from .stream import Stream
from .tools import offered_call, tool_call


def _ground_truth_record(request: web.Request, api: str, arrival_ns: int) -> dict[str, Any]:
    return {
        "id": None, "request_id": request.headers.get("X-Request-Id"), "api": api, "arrival_ns": arrival_ns,
        "admitted_ns": None, "first_token_ns": None, "last_token_ns": None, "end_ns": None, "status": 200,
        "stream": False, "prompt_tokens": None, "cached_tokens": None, "output_tokens": 0, "chunks": 0,
        "preemptions": 0, "fault": None, "finish_reason": None, "max_tokens": None,
        "reasoning_tokens": 0, "first_answer_ns": None, "traceparent": request.headers.get("traceparent"),
        "tools_offered": 0, "tool_messages": 0, "tool_call": None, "tool_tokens": 0, "first_tool_ns": None,
        "answer_changed": None,
    }  # fmt: skip


def reasoning_len(draws: random.Random, params: EngineParams) -> int:
    """A reasoning phase's length: uniform within ±``reasoning_spread`` of ``reasoning_tokens``, at least 1."""
    mean, spread = params.reasoning_tokens, params.reasoning_spread
    return max(1, round(draws.uniform(mean * (1 - spread), mean * (1 + spread))))


def stop_cut(tokens: tuple[bytes, ...], pos: int, target: int, stop: tuple[str, ...]) -> int:
    """How many of the ``target`` tokens from ``pos`` a reply keeps before its text would contain a stop
    sequence (the token that completes one and all after it are dropped, as vLLM drops the stop text; the
    reply then ends with finish_reason "stop")."""
    text = ""
    for kept in range(target):
        text += tokens[(pos + kept) % len(tokens)].decode()
        if any(s in text for s in stop):
            return kept
    return target


def _fault_refusal(faults: dict[str, float]) -> web.Response | None:
    """The reply of a request whose injected fault is an HTTP error (500 or 429), else None."""
    if "error" in faults:
        return error_response(
            "simulated internal server error (ramp sim fault injection)", 500, "InternalServerError"
        )
    if "429" in faults:
        resp = error_response("simulated rate limit (ramp sim fault injection)", 429, "RateLimitError")
        resp.headers["Retry-After"] = "1"
        return resp
    return None


class SimServer:
    """The simulator. ``await start()`` returns its base URL; ``engine`` is the model, for tests."""

    def __init__(self, config: SimConfig | None = None) -> None:
        self.config = config if config is not None else build_config()
        self.engine: Engine = make_engine(self.config.engine, self.config.seed)
        self._rng = random.Random(self.config.seed + 1)
        self._faults = FaultDraw(self.config.faults, self.config.seed + 2)
        self._loop = EngineLoop(
            self.engine, tokenizer.output_stream(self.config.seed), self.config.stream_interval
        )
        self._model_json = json.dumps(self.config.model)
        self._gt: deque[dict[str, Any]] = deque(maxlen=self.config.ground_truth_limit)
        self._registry = make_registry(self)
        self._next_rid = 0
        self._open = 0  # generations in flight (the answer-change control's batch size)
        self._started_ns = time.monotonic_ns()
        self._runner: web.AppRunner | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._drift: asyncio.TimerHandle | None = None
        self.url = ""

    # -- lifecycle ------------------------------------------------------------------------------------
    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/completions", self._completions)
        app.router.add_post("/v1/responses", self._responses)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/tokenize", self._tokenize)
        app.router.add_get("/health", self._health)
        app.router.add_get("/version", self._version)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_post("/reset_prefix_cache", self._reset_prefix_cache)  # vLLM (VLLM_SERVER_DEV_MODE=1)
        app.router.add_post("/flush_cache", self._flush_cache)  # SGLang's, which answers GET too
        app.router.add_get("/flush_cache", self._flush_cache)
        app.router.add_get("/_sim/info", self._info)
        app.router.add_get("/_sim/ground_truth", self._ground_truth)
        app.router.add_post("/_sim/slots", self._slots)
        # A stop ends the streams still open (as a server going down does) within a second, instead of
        # holding them, silent, for aiohttp's default 60 s: the client sees the cut at once.
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port, backlog=4096)
        await site.start()
        bound = self._runner.addresses[0]
        self.url = f"http://{host}:{bound[1]}"
        self._loop_task = asyncio.create_task(self._loop.run(), name="sim-engine-loop")
        self._drift = schedule_drift(self.engine, self.config, self._started_ns)
        return self.url

    async def stop(self) -> None:
        if self._drift is not None:
            self._drift.cancel()
        if self._loop_task is not None:
            self._loop_task.cancel()
            try:
                await self._loop_task
            except asyncio.CancelledError:
                pass
            self._loop_task = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def ground_truth(self) -> list[dict[str, Any]]:
        return list(self._gt)

    def info(self) -> dict[str, Any]:
        e = self.engine
        return {
            "simulator": "llm-ramp sim",
            "emulates": "vllm",
            "version": self.config.version,
            "preset": self.config.preset,
            "model": self.config.model,
            "config": self.config.to_dict(),
            "running": e.num_running,
            "waiting": e.num_waiting,
            "kv_cache_usage": e.kv_usage(),
            "steps": e.stats.steps,
            "steps_late": self._loop.steps_late,
            "max_late_ms": self._loop.max_late_ns / 1e6,
            "resyncs": self._loop.resyncs,
            "prefix_cache_resets": e.stats.prefix_cache_resets,
            "prefix_blocks_dropped": e.stats.prefix_blocks_dropped,
            "ground_truth_records": len(self._gt),
            "max_num_seqs": e.params.max_num_seqs,  # now: ``POST /_sim/slots`` or the drift may change it
        }

    # -- generation -----------------------------------------------------------------------------------
    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "chat")

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "completions")

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "responses")

    async def _generate(self, request: web.Request, api: str) -> web.StreamResponse:
        raw = await request.read()
        gt = _ground_truth_record(request, api, time.monotonic_ns())
        self._open += 1
        try:
            return await self._generate_inner(request, api, raw, gt)
        finally:
            self._open -= 1
            gt["end_ns"] = time.monotonic_ns()
            self._gt.append(gt)

    async def _generate_inner(
        self, request: web.Request, api: str, raw: bytes, gt: dict[str, Any]
    ) -> web.StreamResponse:
        cfg = self.config
        try:
            req = parse_generate(raw, api, cfg.model, cfg.engine)
        except BadRequest as exc:
            gt["status"] = exc.status
            return error_response(str(exc), exc.status, exc.kind)
        faults = self._faults.draw(request.headers.get("x-sim-fault"))
        gt["fault"] = ",".join(faults) if faults else None
        gt["prompt_tokens"] = req.prompt_len
        gt["tools_offered"] = len(req.tools)
        gt["tool_messages"] = req.tool_messages
        gt["max_tokens"] = req.max_tokens
        refusal = _fault_refusal(faults)
        if refusal is not None:
            gt["status"] = refusal.status
            return refusal
        draws = self._draws(req, gt)
        st = self._new_stream(api, req, faults, draws)
        gt["id"] = st.rid
        gt["stream"] = st.streaming
        if "slow_ttft" in faults:
            await asyncio.sleep(faults["slow_ttft"] or cfg.faults.slow_ttft_s)
        seq = self._new_seq(req, "empty" in faults, st, draws)
        try:
            if st.streaming:
                return await stream_reply(request, st, seq, self._loop)
            return await json_reply(request, st, seq, self._loop, cfg.model)
        finally:
            if seq.state in ("waiting", "running"):
                self.engine.abort(seq)
            gt["admitted_ns"] = seq.admitted_ns
            gt["first_token_ns"] = st.first_ns
            gt["first_due_ns"] = seq.first_token_ns  # when the engine's step made it: lateness = write - due
            gt["last_token_ns"] = st.last_ns
            gt["cached_tokens"] = seq.cached_tokens
            gt["output_tokens"] = st.sent
            gt["reasoning_tokens"] = min(st.sent, st.reasoning_total)
            gt["first_answer_ns"] = st.first_answer_ns
            if st.called is not None:  # the call opened with the first answer write
                gt["tool_call"] = st.called.name
                gt["tool_tokens"] = st.tool_tokens
                gt["first_tool_ns"] = st.first_answer_ns
            gt["chunks"] = st.chunks
            gt["preemptions"] = seq.preemptions
            gt["finish_reason"] = seq.finish_reason if seq.state == "finished" else seq.state

    def _draws(self, req: GenerateRequest, gt: dict[str, Any]) -> random.Random:
        """Where a request's reply is drawn from: the server's generator, or one of its own when it gives a
        ``seed`` or asks for temperature 0 (the same seed and prompt then get the same reply, streamed or
        not), unless the answer-change control changes it (``gt["answer_changed"]``)."""
        seed = req.seed if req.seed is not None else 0 if req.temperature == 0 else None
        if seed is None:
            return self._rng
        prompt = zlib.crc32(array("q", req.ids).tobytes())
        changed = self._answer_changes()
        gt["answer_changed"] = changed
        return random.Random(f"llm-ramp-sim:{seed}:{prompt}" + (":changed" if changed else ""))

    def _answer_changes(self) -> bool:
        """Whether this request's reply changes: more generations open than ``answer_change_above``, or
        past ``answer_change_after_s``; then ``answer_change_share`` of them (the server's draw)."""
        cfg = self.config
        above = cfg.answer_change_above and self._open > cfg.answer_change_above
        late = cfg.answer_change_after_s and (
            time.monotonic_ns() - self._started_ns >= cfg.answer_change_after_s * 1e9
        )
        if not (above or late):
            return False
        return cfg.answer_change_share >= 1.0 or self._rng.random() < cfg.answer_change_share

    def _new_stream(
        self, api: str, req: GenerateRequest, faults: dict[str, float], draws: random.Random
    ) -> Stream:
        self._next_rid += 1
        st = Stream(
            api=api,
            streaming=req.streaming,
            include_usage=req.include_usage,
            rid={"chat": "chatcmpl-", "responses": "resp_"}.get(api, "cmpl-")
            + f"{self._rng.getrandbits(64):016x}",
            created=int(time.time()),  # wall clock for the "created" field only
            model_json=self._model_json,
            prompt_tokens=req.prompt_len,
            pos=draws.randrange(len(self._loop.tokens)),
            faults=faults,
            reasoning_field=self.config.reasoning_field,
        )
        st.arm(self.config.faults)
        return st

    def _new_seq(self, req: GenerateRequest, empty: bool, st: Stream, draws: random.Random) -> Seq:
        params = self.config.engine
        target = 0 if empty else sample_output_len(draws, params, req.max_tokens, req.ignore_eos)
        if req.stop and target:
            target = stop_cut(self._loop.tokens, st.pos, target, req.stop)
        if params.reasoning_tokens and target:
            st.think(min(target, reasoning_len(draws, params)))
        name = offered_call(req.tools, req.tool_choice, self.config.tool_call_rate, draws)
        if name is not None:
            st.call(tool_call(st.api, name, st.rid, st.created, st.model_json))
        seq = Seq(
            self._next_rid,
            time.monotonic_ns(),
            req.prompt_len,
            req.max_tokens,
            target_out=target,
            block_hashes=tokenizer.block_hashes(req.ids, params.block_size)
            if params.enable_prefix_caching
            else (),
            stream=st,
        )
        st.seq = seq
        return seq

    # -- small endpoints ------------------------------------------------------------------------------
    async def _models(self, request: web.Request) -> web.Response:
        created = int(time.time())
        card = {
            "id": self.config.model, "object": "model", "created": created, "owned_by": "ramp-sim",
            "root": self.config.model, "parent": None, "max_model_len": self.config.engine.max_model_len,
            "permission": [],
        }  # fmt: skip
        return web.json_response({"object": "list", "data": [card]})

    async def _tokenize(self, request: web.Request) -> web.Response:
        try:
            ids = tokenize_ids(strict_json.loads(await request.read()))
        except BadRequest as exc:
            return error_response(str(exc), exc.status, exc.kind)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            return error_response(f"invalid request body: {exc}", 400, "BadRequestError")
        return web.json_response(
            {
                "count": len(ids),
                "max_model_len": self.config.engine.max_model_len,
                "tokens": ids,
                "token_strs": None,
            }
        )

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def _version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": self.config.version})

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=render(self._registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _reset_prefix_cache(self, request: web.Request) -> web.Response:
        # vLLM answers an empty 200. vLLM itself refuses while running requests hold blocks, unless
        # ?reset_running_requests=true preempts them; the sim preempts no one and keeps the held blocks
        # cached, so a reset under load succeeds and only requests already sharing the prefix keep it.
        self.engine.reset_prefix_cache()
        return web.Response(status=200)

    async def _flush_cache(self, request: web.Request) -> web.Response:
        self.engine.reset_prefix_cache()
        return web.Response(text="Cache flushed.\n")  # SGLang's answer

    async def _info(self, request: web.Request) -> web.Response:
        return web.json_response(self.info())

    async def _slots(self, request: web.Request) -> web.Response:
        return await slots_reply(request, self.engine, self.config)

    async def _ground_truth(self, request: web.Request) -> web.Response:
        records = self.ground_truth()
        last = request.query.get("last")
        if last is not None and last.isdigit():
            records = records[-int(last) :] if int(last) else []
        return web.json_response(records)
