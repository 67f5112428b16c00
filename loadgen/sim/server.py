"""The simulator's HTTP face: an aiohttp server that speaks vLLM's OpenAI-compatible API over the engine model.

One engine loop owns time: it runs a step against a monotonic deadline (the next step starts where the last
one ended, so sleep overshoot never accumulates), then writes the chunks of every request the step advanced.
A chunk is a cached byte prefix + token text + cached suffix; it is written straight from the loop when the
client's socket buffer is nearly empty, and handed to the request's own task when the client is slow or the
stream is stalled on purpose, so one slow reader never delays the others.

Every request leaves a ground-truth record (monotonic ns, the same clock as the client's) readable from
``SimServer.ground_truth()`` and ``GET /_sim/ground_truth``.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import deque
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from . import tokenizer
from .config import FAULT_KINDS, SimConfig
from .metrics import make_registry, render
from .model import make_engine
from .sequences import Engine, Seq, Step, sample_output_len

_SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}
_DONE = b"data: [DONE]\n\n"
_SLOW_CLIENT_BYTES = 16_384  # above this much unsent data, stop writing from the engine loop
_RESYNC_NS = 100_000_000  # if the loop falls this far behind, restart the clock instead of replaying steps


class BadRequest(Exception):
    def __init__(self, message: str, status: int = 400, kind: str = "BadRequestError") -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


def _error(message: str, status: int, kind: str) -> web.Response:
    body = {"error": {"message": message, "type": kind, "param": None, "code": status}}
    return web.json_response(body, status=status)


class _Stream:
    """Per-request output state. Written by the engine loop; the handler task only drains the backlog."""

    __slots__ = (
        "api", "streaming", "include_usage", "rid", "created", "prefix", "suffix", "head", "resp", "transport",
        "pos", "unsent", "sent", "chunks", "backlog", "wake", "hold_until", "complete", "closed", "cut",
        "faults", "stall_s", "stall_at", "disconnect_at", "malformed_at", "first_ns", "last_ns", "seq",
        "prompt_tokens", "role_sent",
    )  # fmt: skip

    def __init__(self) -> None:
        self.api = "chat"
        self.streaming = False
        self.include_usage = False
        self.rid = ""
        self.created = 0
        self.head = b""
        self.prefix = b""
        self.suffix = b""
        self.prompt_tokens = 0
        self.seq: Seq | None = None
        self.pos = 0
        self.unsent = 0
        self.sent = 0
        self.chunks = 0
        self.backlog: list[bytes] | None = None
        self.wake = asyncio.Event()
        self.hold_until = 0
        self.complete = False
        self.closed = False
        self.cut = False
        self.faults: dict[str, float] = {}
        self.stall_s = 0.0
        self.stall_at = -1
        self.disconnect_at = -1
        self.malformed_at = -1
        self.first_ns: int | None = None
        self.last_ns: int | None = None
        self.resp: web.StreamResponse | None = None
        self.transport: asyncio.Transport | None = None
        self.role_sent = False


class SimServer:
    """The simulator. ``await start()`` returns its base URL; ``engine`` is the model, for tests."""

    def __init__(self, config: SimConfig | None = None) -> None:
        from .config import build_config

        self.config = config if config is not None else build_config()
        self.engine: Engine = make_engine(self.config.engine, self.config.seed)
        self._rng = random.Random(self.config.seed + 1)
        self._fault_rng = random.Random(self.config.seed + 2)
        self._tokens = tokenizer.output_stream(self.config.seed)
        self._model_json = json.dumps(self.config.model)
        self._gt: deque[dict[str, Any]] = deque(maxlen=self.config.ground_truth_limit)
        self._registry = make_registry(self)
        self._wakeup = asyncio.Event()
        self._next_rid = 0
        self._runner: web.AppRunner | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self.url = ""
        # How honest the clock was: steps written late, and how late (engine-loop lag).
        self.steps_late = 0
        self.max_late_ns = 0
        self.resyncs = 0

    # -- lifecycle ------------------------------------------------------------------------------------
    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/completions", self._completions)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/tokenize", self._tokenize)
        app.router.add_get("/health", self._health)
        app.router.add_get("/version", self._version)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/_sim/info", self._info)
        app.router.add_get("/_sim/ground_truth", self._ground_truth)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port, backlog=4096)
        await site.start()
        server = site._server
        assert server is not None and isinstance(server, asyncio.base_events.Server)
        bound = server.sockets[0].getsockname()
        self.url = f"http://{host}:{bound[1]}"
        self._loop_task = asyncio.create_task(self._engine_loop(), name="sim-engine-loop")
        return self.url

    async def stop(self) -> None:
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
            "steps_late": self.steps_late,
            "max_late_ms": self.max_late_ns / 1e6,
            "resyncs": self.resyncs,
            "ground_truth_records": len(self._gt),
        }

    # -- the engine loop ------------------------------------------------------------------------------
    async def _engine_loop(self) -> None:
        engine = self.engine
        mono = time.monotonic_ns
        t = mono()
        while True:
            if not engine.has_work():
                self._wakeup.clear()
                await self._wakeup.wait()
                t = mono()
                continue
            now = mono()
            if now - t > _RESYNC_NS:
                self.resyncs += 1
                t = now
            step = engine.step(t)
            delay = step.end_ns - mono()
            if delay > 0:
                await asyncio.sleep(delay / 1e9)
            else:
                await asyncio.sleep(0)  # catching up: still let the sockets breathe
            late = mono() - step.end_ns
            if late > 2_000_000:
                self.steps_late += 1
            if late > self.max_late_ns:
                self.max_late_ns = late
            if step.emits:
                await self._emit(step)
            t = step.end_ns

    async def _emit(self, step: Step) -> None:
        interval = self.config.stream_interval
        toks = self._tokens
        ntoks = len(toks)
        mono = time.monotonic_ns
        for e in step.emits:
            st = e.seq.stream
            if not isinstance(st, _Stream) or st.closed:
                continue
            st.unsent += e.tokens
            finished = e.finished
            if not finished and st.sent and st.unsent < interval:
                continue
            n = st.unsent
            if not st.streaming:
                st.sent += n
                st.unsent = 0
                if finished:
                    st.complete = True
                    st.wake.set()
                continue
            pos = st.pos
            if n == 1:
                text = toks[pos]
            elif pos + n <= ntoks:
                text = b"".join(toks[pos : pos + n])
            else:
                text = b"".join(toks[(pos + i) % ntoks] for i in range(n))
            st.pos = (pos + n) % ntoks
            st.sent += n
            st.unsent = 0
            if finished:
                data = st.prefix + text + self._final_suffix(st, e.seq)
            else:
                data = st.prefix + text + st.suffix
            if not st.role_sent:
                st.role_sent = True
                if st.head:
                    data = st.head + data
            if st.malformed_at >= 0 and st.sent >= st.malformed_at:
                st.malformed_at = -1
                data = st.prefix + b' oops"}, "finish_reason":\n\n' + data
            if n:
                st.chunks += 1
            resp = st.resp
            transport = st.transport
            if (
                st.backlog is not None
                or transport is None
                or transport.get_write_buffer_size() > _SLOW_CLIENT_BYTES
            ):
                if st.backlog is None:
                    st.backlog = []
                st.backlog.append(data)
                st.wake.set()
            else:
                # Stamped as the write starts: the ground truth of when a token left the server, so no
                # client can ever see it earlier.
                now = mono()
                try:
                    await resp.write(data)  # type: ignore[union-attr]  # cannot block: the buffer is nearly empty
                except (ConnectionError, RuntimeError):
                    self._gone(st)
                    continue
                if st.first_ns is None and n:
                    st.first_ns = now
                st.last_ns = now
            if finished:
                st.complete = True
                st.wake.set()
            elif st.disconnect_at >= 0 and st.sent >= st.disconnect_at:
                st.cut = True
                st.complete = True
                st.closed = True
                self.engine.abort(e.seq)
                st.wake.set()
            elif st.stall_at >= 0 and st.sent >= st.stall_at:
                st.stall_at = -1
                st.hold_until = mono() + int(st.stall_s * 1e9)
                if st.backlog is None:
                    st.backlog = []
                st.wake.set()

    def _final_suffix(self, st: _Stream, seq: Seq) -> bytes:
        reason = seq.finish_reason or "length"
        if st.api == "chat":
            tail = (
                f'"}},"logprobs":null,"finish_reason":"{reason}","stop_reason":null,"token_ids":null}}]}}\n\n'
            )
        else:
            tail = (
                f'","logprobs":null,"finish_reason":"{reason}","stop_reason":null,'
                f'"prompt_token_ids":null,"token_ids":null}}]}}\n\n'
            )
        out = tail.encode()
        if st.include_usage:
            out += self._usage_event(st, st.prompt_tokens, st.sent, seq.cached_tokens or 0)
        return out + _DONE

    def _usage_event(self, st: _Stream, prompt: int, completion: int, cached: int) -> bytes:
        obj = "chat.completion.chunk" if st.api == "chat" else "text_completion"
        return (
            f'data: {{"id":"{st.rid}","object":"{obj}","created":{st.created},"model":{self._model_json},'
            f'"choices":[],"usage":{{"prompt_tokens":{prompt},"total_tokens":{prompt + completion},'
            f'"completion_tokens":{completion},"prompt_tokens_details":{{"cached_tokens":{cached}}}}}}}\n\n'
        ).encode()

    def _gone(self, st: _Stream) -> None:
        st.closed = True
        if st.seq is not None:
            self.engine.abort(st.seq)
        st.wake.set()

    # -- requests -------------------------------------------------------------------------------------
    def _draw_faults(self, request: web.Request) -> dict[str, float]:
        header = request.headers.get("x-sim-fault")
        if header is not None:
            return _parse_fault_header(header)
        f = self.config.faults
        if not any(
            (
                f.error_rate,
                f.rate_429,
                f.stall_rate,
                f.disconnect_rate,
                f.slow_ttft_rate,
                f.malformed_rate,
                f.empty_rate,
            )
        ):
            return {}
        rnd = self._fault_rng.random
        out: dict[str, float] = {}
        if rnd() < f.error_rate:
            return {"error": 0.0}
        if rnd() < f.rate_429:
            return {"429": 0.0}
        if rnd() < f.empty_rate:
            out["empty"] = 0.0
        if rnd() < f.slow_ttft_rate:
            out["slow_ttft"] = f.slow_ttft_s
        if rnd() < f.stall_rate:
            out["stall"] = f.stall_s
        if rnd() < f.disconnect_rate:
            out["disconnect"] = f.disconnect_after_tokens
        if rnd() < f.malformed_rate:
            out["malformed"] = f.malformed_after_tokens
        return out

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "chat")

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "completions")

    async def _generate(self, request: web.Request, api: str) -> web.StreamResponse:
        raw = await request.read()
        arrival_ns = time.monotonic_ns()
        gt: dict[str, Any] = {
            "id": None, "request_id": request.headers.get("X-Request-Id"), "api": api, "arrival_ns": arrival_ns, "admitted_ns": None, "first_token_ns": None,
            "last_token_ns": None, "end_ns": None, "status": 200, "stream": False, "prompt_tokens": None,
            "cached_tokens": None, "output_tokens": 0, "chunks": 0, "preemptions": 0, "fault": None,
            "finish_reason": None, "max_tokens": None,
        }  # fmt: skip
        try:
            return await self._generate_inner(request, api, raw, arrival_ns, gt)
        finally:
            gt["end_ns"] = time.monotonic_ns()
            self._gt.append(gt)

    async def _generate_inner(
        self, request: web.Request, api: str, raw: bytes, arrival_ns: int, gt: dict[str, Any]
    ) -> web.StreamResponse:
        cfg = self.config
        params = cfg.engine
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise BadRequest("the request body must be a JSON object")
            ids = _prompt_ids(body, api)
            model = body.get("model")
            if model not in (None, "", cfg.model):
                raise BadRequest(f"The model `{model}` does not exist.", 404, "NotFoundError")
            max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
            prompt_len = len(ids)
            if max_tokens is None:
                max_tokens = params.max_model_len - prompt_len
            if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
                if prompt_len >= params.max_model_len:
                    raise BadRequest(
                        f"This model's maximum context length is {params.max_model_len} tokens. However, your "
                        f"request has {prompt_len} input tokens. Please reduce the length of the input messages."
                    )
                raise BadRequest(f"max_tokens must be at least 1, got {max_tokens}.")
            if prompt_len + max_tokens > params.max_model_len:
                raise BadRequest(
                    f"This model's maximum context length is {params.max_model_len} tokens. However, you requested "
                    f"{prompt_len + max_tokens} tokens ({prompt_len} in the messages, {max_tokens} in the completion). "
                    "Please reduce the length of the messages or completion."
                )
        except BadRequest as exc:
            gt["status"] = exc.status
            return _error(str(exc), exc.status, exc.kind)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            gt["status"] = 400
            return _error(f"invalid request body: {exc}", 400, "BadRequestError")

        faults = self._draw_faults(request)
        gt["fault"] = ",".join(faults) if faults else None
        gt["prompt_tokens"] = prompt_len
        gt["max_tokens"] = max_tokens
        if "error" in faults:
            gt["status"] = 500
            return _error(
                "simulated internal server error (ramp sim fault injection)", 500, "InternalServerError"
            )
        if "429" in faults:
            gt["status"] = 429
            resp = _error("simulated rate limit (ramp sim fault injection)", 429, "RateLimitError")
            resp.headers["Retry-After"] = "1"
            return resp

        st = _Stream()
        st.api = api
        st.streaming = bool(body.get("stream", False))
        opts = body.get("stream_options") or {}
        st.include_usage = bool(opts.get("include_usage", False)) if isinstance(opts, dict) else False
        self._next_rid += 1
        st.rid = ("chatcmpl-" if api == "chat" else "cmpl-") + f"{self._rng.getrandbits(64):016x}"
        st.created = int(time.time())  # wall clock for the "created" field only
        st.prompt_tokens = prompt_len
        st.pos = self._rng.randrange(len(self._tokens))
        st.faults = faults
        gt["id"] = st.rid
        gt["stream"] = st.streaming
        self._templates(st)
        if "stall" in faults:
            st.stall_s = faults["stall"] or cfg.faults.stall_s
            st.stall_at = cfg.faults.stall_after_tokens
        if "disconnect" in faults:
            st.disconnect_at = int(faults["disconnect"] or cfg.faults.disconnect_after_tokens)
        if "malformed" in faults:
            st.malformed_at = int(faults["malformed"] or cfg.faults.malformed_after_tokens)

        if "slow_ttft" in faults:
            await asyncio.sleep(faults["slow_ttft"] or cfg.faults.slow_ttft_s)

        target = (
            0
            if "empty" in faults
            else sample_output_len(self._rng, params, max_tokens, bool(body.get("ignore_eos")))
        )
        seq = Seq(
            self._next_rid,
            time.monotonic_ns(),
            prompt_len,
            max_tokens,
            target_out=target,
            block_hashes=tokenizer.block_hashes(ids, params.block_size)
            if params.enable_prefix_caching
            else (),
            stream=st,
        )
        st.seq = seq
        try:
            if st.streaming:
                return await self._stream_reply(request, st, seq)
            return await self._json_reply(request, st, seq)
        finally:
            if seq.state in ("waiting", "running"):
                self.engine.abort(seq)
            gt["admitted_ns"] = seq.admitted_ns
            gt["first_token_ns"] = st.first_ns
            gt["last_token_ns"] = st.last_ns
            gt["cached_tokens"] = seq.cached_tokens
            gt["output_tokens"] = st.sent
            gt["chunks"] = st.chunks
            gt["preemptions"] = seq.preemptions
            gt["finish_reason"] = seq.finish_reason if seq.state == "finished" else seq.state

    def _submit(self, seq: Seq) -> None:
        self.engine.add(seq)
        self._wakeup.set()

    async def _stream_reply(self, request: web.Request, st: _Stream, seq: Seq) -> web.StreamResponse:
        resp = web.StreamResponse(status=200, headers=_SSE_HEADERS)
        await resp.prepare(request)
        st.resp = resp
        st.transport = request.transport
        self._submit(seq)
        mono = time.monotonic_ns
        try:
            while True:
                await st.wake.wait()
                st.wake.clear()
                while True:
                    if st.hold_until:
                        delay = st.hold_until - mono()
                        if delay > 0:
                            await asyncio.sleep(delay / 1e9)
                        st.hold_until = 0
                    if not st.backlog:
                        break
                    data = b"".join(st.backlog)
                    st.backlog.clear()
                    now = mono()  # as the write starts (see _emit)
                    await resp.write(data)
                    if st.first_ns is None and st.sent:
                        st.first_ns = now
                    st.last_ns = now
                if st.backlog is not None and not st.hold_until:
                    st.backlog = None
                if st.complete or st.closed:
                    break
        except (ConnectionError, RuntimeError):
            st.closed = True
        if st.cut and request.transport is not None:
            request.transport.close()  # mid-stream disconnect: no terminating chunk, no [DONE]
        return resp

    async def _json_reply(self, request: web.Request, st: _Stream, seq: Seq) -> web.StreamResponse:
        self._submit(seq)
        while not (st.complete or st.closed):
            await st.wake.wait()
            st.wake.clear()
        if st.faults.get("stall") is not None:
            await asyncio.sleep(st.stall_s)
        now = time.monotonic_ns()
        st.first_ns = st.last_ns = now if st.sent else None
        if "disconnect" in st.faults and request.transport is not None:
            request.transport.close()  # the connection drops before any reply
            return web.Response(status=200)
        text = self._text(st)
        usage = {
            "prompt_tokens": st.prompt_tokens,
            "total_tokens": st.prompt_tokens + st.sent,
            "completion_tokens": st.sent,
            "prompt_tokens_details": {"cached_tokens": seq.cached_tokens or 0},
        }
        reason = seq.finish_reason or "length"
        if st.api == "chat":
            choice: dict[str, Any] = {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None, "tool_calls": []},
                "logprobs": None,
                "finish_reason": reason,
                "stop_reason": None,
            }
            obj = "chat.completion"
        else:
            choice = {
                "index": 0,
                "text": text,
                "logprobs": None,
                "finish_reason": reason,
                "stop_reason": None,
            }
            obj = "text_completion"
        body = {
            "id": st.rid, "object": obj, "created": st.created, "model": self.config.model,
            "choices": [choice], "usage": usage,
        }  # fmt: skip
        if "malformed" in st.faults:
            return web.Response(body=json.dumps(body)[:-7].encode(), content_type="application/json")
        return web.json_response(body)

    def _text(self, st: _Stream) -> str:
        toks = self._tokens
        start = st.pos
        st.pos = (start + st.sent) % len(toks)
        return b"".join(toks[(start + i) % len(toks)] for i in range(st.sent)).decode()

    def _templates(self, st: _Stream) -> None:
        """Cache the bytes around each chunk's text: per chunk only the text changes."""
        obj = "chat.completion.chunk" if st.api == "chat" else "text_completion"
        base = f'data: {{"id":"{st.rid}","object":"{obj}","created":{st.created},"model":{self._model_json},"choices":[{{"index":0,'
        if st.api == "chat":
            st.head = (
                base + '"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],'
                '"prompt_token_ids":null,"prompt_text":null}\n\n'
            ).encode()
            st.prefix = (base + '"delta":{"content":"').encode()
            st.suffix = b'"},"logprobs":null,"finish_reason":null,"token_ids":null}]}\n\n'
        else:
            st.head = b""
            st.prefix = (base + '"text":"').encode()
            st.suffix = b'","logprobs":null,"finish_reason":null,"stop_reason":null,"prompt_token_ids":null,"token_ids":null}]}\n\n'

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
            body = await request.json()
            if not isinstance(body, dict):
                raise BadRequest("the request body must be a JSON object")
            api = "chat" if "messages" in body else "completions"
            if api == "chat" and body.get("add_generation_prompt") is False:
                ids = tokenizer.encode_chat(_messages(body), add_generation_prompt=False)
            else:
                ids = _prompt_ids(body, api)
        except BadRequest as exc:
            return _error(str(exc), exc.status, exc.kind)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            return _error(f"invalid request body: {exc}", 400, "BadRequestError")
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

    async def _info(self, request: web.Request) -> web.Response:
        return web.json_response(self.info())

    async def _ground_truth(self, request: web.Request) -> web.Response:
        records = self.ground_truth()
        last = request.query.get("last")
        if last is not None and last.isdigit():
            records = records[-int(last) :] if int(last) else []
        return web.json_response(records)


def _parse_fault_header(header: str) -> dict[str, float]:
    """``stall=2.5,disconnect=3`` -> {"stall": 2.5, "disconnect": 3.0}; a bare kind takes the config's value."""
    out: dict[str, float] = {}
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        name = name.strip().lower().replace("-", "_")
        if name in ("", "none"):
            continue
        if name == "500":
            name = "error"
        if name in FAULT_KINDS:
            try:
                out[name] = float(value) if value else 0.0
            except ValueError:
                out[name] = 0.0
    return out


def _messages(body: dict[str, Any]) -> list[tuple[str, str]]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list")
    out: list[tuple[str, str]] = []
    for m in messages:
        if not isinstance(m, dict):
            raise BadRequest("each message must be an object with 'role' and 'content'")
        content = m.get("content") or ""
        if isinstance(content, list):  # OpenAI content parts: keep the text ones
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        out.append((str(m.get("role", "user")), str(content)))
    return out


def _prompt_ids(body: dict[str, Any], api: str) -> list[int]:
    if api == "chat":
        return tokenizer.encode_chat(_messages(body))
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        return list(tokenizer.encode(prompt))
    if isinstance(prompt, list) and prompt:
        first = prompt[0]
        if isinstance(first, int):
            return [int(t) for t in prompt]
        if isinstance(first, list):
            return [int(t) for t in first]
        if isinstance(first, str):
            return list(tokenizer.encode(first))
    raise BadRequest("'prompt' must be a string, a list of strings or a list of token ids")
