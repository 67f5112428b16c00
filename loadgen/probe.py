"""Reachability and discovery of a target before any load: is it up, which models, which runtime.

Owns ``probe`` (GET ``/v1/models`` plus the runtime's own info endpoints) and ``tokenize_count``
(POST ``/tokenize``). Failures never raise: ``probe`` returns a ``ServerInfo`` whose ``error`` is one line
naming the URL and what to do; ``tokenize_count`` returns ``None``. Uses httpx: these are a handful of calls,
off the hot path. httpx is imported on first call, not with this module: httpx imports its command-line
module, and with it ``rich``, whenever ``rich`` is installed, and ``loadgen`` must not pull in ``rich``.

Runtime detection, most specific first: the simulator answers ``/_sim/info``; vLLM marks its models
``owned_by: "vllm"`` and serves ``/version`` (``{"version": ...}``); SGLang marks them ``"sglang"`` and
serves ``/server_info`` (newer) or ``/get_server_info`` (older), both carrying ``"version"``. Anything else
that serves ``/v1/models`` is ``"openai-compatible"``.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from loadgen.types import Target

if TYPE_CHECKING:
    import httpx

__all__ = ["ServerInfo", "probe", "tokenize_count"]


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What ``probe`` found. ``error`` is empty when the target is ready to be load-tested."""

    url: str
    reachable: bool  # the server answered /v1/models with a model list
    error: str = ""  # one line: what went wrong at which URL and what to do
    models: tuple[str, ...] = ()
    model: str | None = None  # target.model when served, else the first model served
    max_model_len: int | None = None
    runtime: str | None = None  # "vllm" | "sglang" | "ramp-sim" | "openai-compatible"
    runtime_version: str | None = None
    http_status: int | None = None  # status of the /v1/models answer

    @property
    def ok(self) -> bool:
        return self.reachable and not self.error


def _auth_headers(target: Target) -> dict[str, str]:
    headers = dict(target.headers)
    key = os.environ.get(target.api_key_env, "") if target.api_key_env else ""
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return headers


def _scrub(text: str, target: Target) -> str:
    key = os.environ.get(target.api_key_env, "") if target.api_key_env else ""
    return text.replace(key, "***") if key else text


def _reason(exc: BaseException) -> str:
    seen: BaseException | None = exc
    for _ in range(6):
        if seen is None:
            break
        if isinstance(seen, ConnectionRefusedError):
            return "connection refused"
        code = getattr(seen, "errno", None)
        if isinstance(code, int) and code > 0:
            return os.strerror(code).lower()
        if type(seen).__name__ == "gaierror":
            return "host name not found"
        seen = seen.__cause__ or seen.__context__
    text = " ".join(str(exc).split())
    if "Name or service not known" in text or "nodename nor servname" in text:
        return "host name not found"
    return text.lower() if text else type(exc).__name__


async def _get_json(client: httpx.AsyncClient, url: str) -> Any:
    """GET a JSON document; None for any failure (these endpoints are optional)."""
    import httpx

    try:
        resp = await client.get(url)
        if resp.status_code != 200:
            return None
        return resp.json()
    except (httpx.HTTPError, ValueError):
        return None


async def probe(target: Target, timeout_s: float = 5.0) -> ServerInfo:
    """Check the target answers like an OpenAI-compatible server and find its models and runtime."""
    import httpx

    base = target.base_url
    models_url = base + "/v1/models"
    if not base.startswith(("http://", "https://")):
        return ServerInfo(
            url=base, reachable=False, error=f"invalid URL {target.url!r}: use http://host:port (or https://)"
        )
    async with httpx.AsyncClient(
        timeout=httpx.Timeout(timeout_s), headers=_auth_headers(target), trust_env=False
    ) as client:
        sim_task = asyncio.ensure_future(_get_json(client, base + "/_sim/info"))
        version_task = asyncio.ensure_future(_get_json(client, base + "/version"))
        try:
            try:
                resp = await client.get(models_url)
                body = resp.content
            except httpx.TimeoutException:
                return ServerInfo(
                    url=base,
                    reachable=False,
                    error=f"no answer from {base} within {timeout_s:g} s: is the server up and listening on that port?",
                )
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                return ServerInfo(
                    url=base,
                    reachable=False,
                    error=f"cannot connect to {base} ({_reason(exc)}): is the server running?",
                )
            except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
                return ServerInfo(
                    url=base,
                    reachable=False,
                    error=f"invalid URL {target.url!r} ({exc}): use http://host:port",
                )
            except httpx.HTTPError as exc:
                return ServerInfo(
                    url=base,
                    reachable=False,
                    error=_scrub(
                        f"cannot talk to {base} ({type(exc).__name__}: {_reason(exc)}): is it an HTTP server?",
                        target,
                    ),
                )

            status = resp.status_code
            if status in (401, 403):
                env = target.api_key_env or "OPENAI_API_KEY"
                has_key = bool(os.environ.get(env)) if target.api_key_env else False
                hint = f"the key in ${env} was rejected" if has_key else f"set {env} or --api-key-env"
                return ServerInfo(
                    url=base,
                    reachable=False,
                    http_status=status,
                    error=f"authentication failed at {models_url} (HTTP {status}): {hint}",
                )
            if status == 404:
                return ServerInfo(
                    url=base,
                    reachable=False,
                    http_status=status,
                    error=f"{models_url} not found (HTTP 404): is this an OpenAI-compatible server? check the URL and port",
                )
            if status != 200:
                text = " ".join(body[:400].decode("utf-8", "replace").split())[:200]
                return ServerInfo(
                    url=base,
                    reachable=False,
                    http_status=status,
                    error=_scrub(f"{models_url} answered HTTP {status}: {text}", target),
                )
            try:
                listing = json.loads(body)
                entries = [e for e in listing["data"] if isinstance(e, dict) and isinstance(e.get("id"), str)]
            except (ValueError, KeyError, TypeError):
                text = " ".join(body[:400].decode("utf-8", "replace").split())[:120]
                return ServerInfo(
                    url=base,
                    reachable=False,
                    http_status=status,
                    error=f"{models_url} did not return a model list ({text!r}): is this an OpenAI-compatible server?",
                )

            models = tuple(e["id"] for e in entries)
            error = ""
            if not models:
                error = f"{base} serves no model (empty /v1/models): wait for the model to load"
                chosen: dict[str, Any] | None = None
            elif target.model:
                chosen = next((e for e in entries if e["id"] == target.model), None)
                if chosen is None:
                    error = f"model {target.model!r} is not served by {base} (it serves: {', '.join(models)}): fix --model"
            else:
                chosen = entries[0]

            runtime, version = await _identify(client, base, entries, sim_task, version_task)
            max_len = chosen.get("max_model_len") if chosen is not None else None
            return ServerInfo(
                url=base,
                reachable=True,
                error=error,
                models=models,
                model=chosen["id"] if chosen is not None else (target.model or None),
                max_model_len=max_len if isinstance(max_len, int) and not isinstance(max_len, bool) else None,
                runtime=runtime,
                runtime_version=version,
                http_status=status,
            )
        finally:
            for task in (sim_task, version_task):
                if not task.done():
                    task.cancel()
            await asyncio.gather(sim_task, version_task, return_exceptions=True)


async def _identify(
    client: httpx.AsyncClient,
    base: str,
    entries: Sequence[Mapping[str, Any]],
    sim_task: asyncio.Future[Any],
    version_task: asyncio.Future[Any],
) -> tuple[str | None, str | None]:
    owners = {str(e.get("owned_by", "")).lower() for e in entries}
    sim = await sim_task
    version_doc = await version_task
    version = version_doc.get("version") if isinstance(version_doc, dict) else None
    version = str(version) if version is not None else None
    if isinstance(sim, dict):
        sim_version = sim.get("version")
        return "ramp-sim", str(sim_version) if sim_version is not None else version
    if "vllm" in owners:
        return "vllm", version
    if True:  # SGLang's own endpoints identify it even when owned_by says little
        for path in ("/server_info", "/get_server_info"):
            info = await _get_json(client, base + path)
            if isinstance(info, dict) and "version" in info:
                return "sglang", str(info["version"])
        if "sglang" in owners:
            return "sglang", version
    return "openai-compatible", None


async def tokenize_count(
    target: Target,
    model: str,
    text: str | None,
    messages: Iterable[tuple[str, str] | Mapping[str, str]] | None = None,
    timeout_s: float = 10.0,
    client: httpx.AsyncClient | None = None,
) -> int | None:
    """Token count of a prompt (``text``) or chat (``messages``) by the server's own tokenizer.

    POST ``/tokenize`` (vLLM and SGLang shape) and read ``count`` (or ``len(tokens)``). ``None`` when the
    server has no ``/tokenize`` or the call fails for any reason. Pass ``client`` to reuse a connection.
    """
    import httpx

    payload: dict[str, Any] = {"model": model}
    if messages is not None:
        payload["messages"] = [
            {"role": m[0], "content": m[1]} if isinstance(m, tuple) else dict(m) for m in messages
        ]
    else:
        payload["prompt"] = text or ""
    owned = client is None
    if client is None:
        client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout_s), headers=_auth_headers(target), trust_env=False
        )
    try:
        resp = await client.post(target.base_url + "/tokenize", json=payload)
        if resp.status_code != 200:
            return None
        doc = resp.json()
    except (httpx.HTTPError, ValueError):
        return None
    finally:
        if owned:
            await client.aclose()
    if not isinstance(doc, dict):
        return None
    count = doc.get("count")
    if isinstance(count, int) and not isinstance(count, bool):
        return count
    tokens = doc.get("tokens") or doc.get("input_ids")
    return len(tokens) if isinstance(tokens, list) else None
