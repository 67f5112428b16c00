"""Tiny fault-injecting servers on 127.0.0.1 (port 0) for what the simulator cannot do: a refusal with a
``Retry-After``, a 401, ``/v1/models`` answers of every shape, an HTTPS server with a throwaway CA, and an
HTTP proxy that counts what went through it. Each runs in a thread of its own, so an engine (its own loop and
worker processes) can talk to it as to any server."""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from aiohttp import web

MODELS = {"object": "list", "data": [{"id": "tiny", "object": "model", "owned_by": "test"}]}
REPLY = (
    b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{"content":" there"},"finish_reason":"stop"}]}\n\n'
    b'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}\n\n'
    b"data: [DONE]\n\n"
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def stream_ok(req: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(req)
    await resp.write(REPLY)
    await resp.write_eof()
    return resp


async def models_ok(req: web.Request) -> web.StreamResponse:
    return web.json_response(MODELS)


@dataclass
class FaultServer:
    """``routes``: (method, path) -> handler; every request's (time, method, path, query) is noted."""

    routes: dict[tuple[str, str], Handler]
    tls: ssl.SSLContext | None = None
    port: int = 0
    seen: list[tuple[float, str, str, str]] = field(default_factory=list)
    loop: asyncio.AbstractEventLoop | None = None
    thread: threading.Thread | None = None
    runner: web.AppRunner | None = None
    ready: threading.Event = field(default_factory=threading.Event)

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def requests(self, path: str) -> list[float]:
        return [t for t, _, p, _ in self.seen if p == path]

    def start(self) -> FaultServer:
        self.thread = threading.Thread(target=self._main, daemon=True)
        self.thread.start()
        assert self.ready.wait(10), "fault server did not start"
        return self

    def _main(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.loop.run_until_complete(self._serve())
        self.loop.run_forever()
        self.loop.close()

    async def _serve(self) -> None:
        @web.middleware
        async def note(request: web.Request, handler: Handler) -> web.StreamResponse:
            self.seen.append((time.monotonic(), request.method, request.path, request.query_string))
            return await handler(request)

        app = web.Application(middlewares=[note])
        for (method, path), handler in self.routes.items():
            app.router.add_route(method, path, handler)
        self.runner = web.AppRunner(app, shutdown_timeout=0.2)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0, ssl_context=self.tls)
        await site.start()
        self.port = self.runner.addresses[0][1]
        self.ready.set()

    def stop(self) -> None:
        loop = self.loop
        if loop is None or self.runner is None:
            return
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        if self.thread is not None:
            self.thread.join(10)


def refusing(status: int, retry_after: str | None = None, models: bool = True) -> FaultServer:
    """Every completion refused with ``status`` (and ``Retry-After``); /v1/models answers normally."""

    async def refuse(req: web.Request) -> web.StreamResponse:
        headers = {"Retry-After": retry_after} if retry_after is not None else None
        return web.json_response(
            {"error": {"message": f"refused ({status})"}}, status=status, headers=headers
        )

    routes: dict[tuple[str, str], Handler] = {
        ("POST", "/v1/chat/completions"): refuse,
        ("POST", "/v1/completions"): refuse,
    }
    if models:
        routes[("GET", "/v1/models")] = models_ok
    return FaultServer(routes).start()


def answering(models: Handler = models_ok, tls: ssl.SSLContext | None = None) -> FaultServer:
    """Streams a two-token reply to every completion; ``models`` answers /v1/models."""
    return FaultServer(
        {
            ("GET", "/v1/models"): models,
            ("POST", "/v1/chat/completions"): stream_ok,
            ("POST", "/v1/completions"): stream_ok,
        },
        tls=tls,
    ).start()


class Certs(NamedTuple):
    """A throwaway CA and a server certificate it signed: ``ca`` is the file a client trusts (--ca-cert),
    ``chain`` the server's certificate followed by the CA's (so an unverifying client is told "self-signed
    certificate in certificate chain"), ``key`` the server's private key."""

    ca: Path
    chain: Path
    key: Path


def certificates(folder: Path, hostname: str = "localhost", loopback: bool = True) -> Certs:
    """A new CA (trustme) and a certificate it signed for ``hostname`` (and 127.0.0.1 with ``loopback``)."""
    import trustme

    ca = trustme.CA()
    leaf = ca.issue_cert(hostname, *(["127.0.0.1"] if loopback else []))
    certs = Certs(
        folder / f"{hostname}-ca.pem", folder / f"{hostname}-chain.pem", folder / f"{hostname}-key.pem"
    )
    ca.cert_pem.write_to_path(str(certs.ca))
    certs.chain.write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems) + ca.cert_pem.bytes())
    leaf.private_key_pem.write_to_path(str(certs.key))
    return certs


def tls_context(certs: Certs) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(certs.chain), str(certs.key))
    return ctx


def json_models(doc: object, status: int = 200) -> Handler:
    async def answer(req: web.Request) -> web.StreamResponse:
        return web.Response(status=status, text=json.dumps(doc), content_type="application/json")

    return answer


@dataclass
class CountingProxy:
    """An HTTP proxy on 127.0.0.1: CONNECT tunnels and absolute-form requests, bytes piped both ways; notes
    each connection's first request line (what went through it)."""

    port: int = 0
    lines: list[str] = field(default_factory=list)
    loop: asyncio.AbstractEventLoop | None = None
    server: asyncio.Server | None = None
    ready: threading.Event = field(default_factory=threading.Event)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> CountingProxy:
        threading.Thread(target=self._main, daemon=True).start()
        assert self.ready.wait(10), "proxy did not start"
        return self

    def _main(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.server = self.loop.run_until_complete(asyncio.start_server(self._client, "127.0.0.1", 0))
        self.port = self.server.sockets[0].getsockname()[1]
        self.ready.set()
        self.loop.run_forever()
        # The tunnels still open when the proxy stops end here, on their loop: left pending, they would be
        # collected after the loop closed, and their writers' close() would call into a closed loop.
        self.loop.run_until_complete(self._end_tunnels())
        self.loop.close()

    @staticmethod
    async def _end_tunnels() -> None:
        pending = asyncio.all_tasks() - {asyncio.current_task()}
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            writer.close()
            return
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        self.lines.append(line)
        method, target = line.split()[:2]
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
        else:
            netloc = target.split("://", 1)[1].split("/", 1)[0]
            host, _, port = netloc.rpartition(":")
        up_reader, up_writer = await asyncio.open_connection(host.strip("[]"), int(port or 80))
        if method == "CONNECT":
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            up_writer.write(head)  # servers take absolute-form targets (RFC 9112 3.2.2)
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    @staticmethod
    async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            dst.close()

    def stop(self) -> None:
        loop, server = self.loop, self.server
        if loop is None or server is None:
            return
        loop.call_soon_threadsafe(server.close)
        loop.call_soon_threadsafe(loop.stop)


# -- an OpenAI-like server with one flaw at a time (ramp check's fault cases) -------------------------------

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa".split()
RATELIMIT = {
    "x-ratelimit-limit-requests": "100",
    "x-ratelimit-remaining-requests": "99",
    "x-ratelimit-reset-requests": "600ms",
    "x-ratelimit-limit-tokens": "10000",
    "x-ratelimit-remaining-tokens": "9990",
    "x-ratelimit-reset-tokens": "6ms",
}


@dataclass(frozen=True)
class Flaws:
    """What the OpenAI-like server gets wrong; the defaults get nothing wrong."""

    no_usage_chunk: bool = False  # stream_options.include_usage ignored
    ignore_max_tokens: bool = False  # always 16 tokens
    accept_bad_request: bool = False  # 200 to messages that are not a list
    ratelimit: bool = False  # x-ratelimit-* headers on every answer
    echo_auth: bool = False  # the error message quotes the request's Authorization header
    reasoning: bool = False  # not a flaw: a reasoning model's reasoning_content before the answer


def _reply_words(body: dict[str, object], flaws: Flaws) -> tuple[list[str], str]:
    asked = body.get("max_tokens")
    n = 16 if flaws.ignore_max_tokens or not isinstance(asked, int) else min(asked, 16)
    words, finish = WORDS[:n], "length"
    stop = body.get("stop")
    for s in [stop] if isinstance(stop, str) else stop if isinstance(stop, list) else []:
        cut = next((i for i, w in enumerate(words) if s in " " + w), None)
        if cut is not None:
            words, finish = words[:cut], "stop"
    return words, finish


async def _stream_reply(
    req: web.Request,
    chat: bool,
    words: list[str],
    finish: str,
    usage: dict[str, int] | None,
    headers: dict[str, str],
    reasoning: bool = False,
) -> web.StreamResponse:
    """The reply as SSE: chat's role-only chunk first, a word per chunk, the usage chunk when given."""
    kind = "chat.completion.chunk" if chat else "text_completion"
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", **headers})
    await resp.prepare(req)

    async def event(choices: list[dict[str, object]], **extra: object) -> None:
        doc = {"id": "x", "object": kind, "model": "tiny", "choices": choices, **extra}
        await resp.write(b"data: " + json.dumps(doc).encode() + b"\n\n")

    if chat:
        await event([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
        if reasoning:
            await event([{"index": 0, "delta": {"reasoning_content": "let me think"}, "finish_reason": None}])
    for at, word in enumerate(words):
        done = finish if at == len(words) - 1 else None
        part = {"delta": {"content": " " + word}} if chat else {"text": " " + word}
        await event([{"index": 0, **part, "finish_reason": done}])
    if usage is not None:
        await event([], usage=usage)
    await resp.write(b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp


def openai_like(flaws: Flaws = Flaws()) -> FaultServer:
    """/v1/models, chat and completions (streamed or not) with usage, max_tokens and stop honoured, errors as
    OpenAI's JSON — except for the ``flaws`` asked for."""
    headers = RATELIMIT if flaws.ratelimit else {}

    async def generate(req: web.Request) -> web.StreamResponse:
        body = await req.json()
        chat = req.path.endswith("/chat/completions")
        if chat and not isinstance(body.get("messages"), list) and not flaws.accept_bad_request:
            said = f" (from {req.headers.get('Authorization')})" if flaws.echo_auth else ""
            error = {
                "error": {"message": f"'messages' must be a list{said}", "type": "invalid_request_error"}
            }
            return web.json_response(error, status=400, headers=headers)
        words, finish = _reply_words(body, flaws)
        usage = {"prompt_tokens": 7, "completion_tokens": len(words), "total_tokens": 7 + len(words)}
        kind = "chat.completion" if chat else "text_completion"
        if not body.get("stream"):
            text = "".join(" " + w for w in words)
            message = {"role": "assistant", "content": text}
            if flaws.reasoning:
                message["reasoning_content"] = "let me think"
            choice = {"index": 0, "message": message} if chat else {"index": 0, "text": text}
            doc = {
                "id": "x",
                "object": kind,
                "model": "tiny",
                "choices": [{**choice, "finish_reason": finish}],
                "usage": usage,
            }
            return web.json_response(doc, headers=headers)
        options = body.get("stream_options")
        with_usage = (
            isinstance(options, dict) and bool(options.get("include_usage")) and not flaws.no_usage_chunk
        )
        return await _stream_reply(
            req, chat, words, finish, usage if with_usage else None, headers, flaws.reasoning
        )

    async def models(req: web.Request) -> web.StreamResponse:
        return web.json_response(MODELS, headers=headers)

    return FaultServer(
        {
            ("GET", "/v1/models"): models,
            ("POST", "/v1/chat/completions"): generate,
            ("POST", "/v1/completions"): generate,
        }
    ).start()
