"""Reachability and discovery of a target before any load: is it up, which models, which runtime.

Owns ``probe`` (GET ``/v1/models`` plus the runtimes' own info endpoints, identified by
``loadgen.runtimes.identify``) and the ``ServerInfo`` it returns. Failures never raise: the
``error`` of a ``ServerInfo`` is one line naming the URL and what to do, with any secret scrubbed. Uses
httpx, imported on first call (see ``loadgen.target.http``): these are a handful of calls, off the hot path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from loadgen import strict_json
from loadgen.runtimes import RuntimeName, identify
from loadgen.target.bounded import MODELS_BYTES, ReplyTooLarge, ReplyTooSlow, read_capped
from loadgen.target.connect import httpx_client, tls_hint
from loadgen.target.http import (
    api_key,
    fetch_runtime_docs,
    reason,
    scrub,
    target_root,
    target_url,
    url_secrets,
)
from loadgen.target.secrets import scrub_cut
from loadgen.types import Target, replica_name

if TYPE_CHECKING:
    import httpx

__all__ = ["ServerInfo", "probe", "probe_one"]

Entry = Mapping[str, object]


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What ``probe`` found. ``error`` is empty when the target is ready to be load-tested."""

    url: str
    reachable: bool  # the server answered /v1/models with a model list
    error: str = ""  # one line: what went wrong at which URL and what to do
    models: tuple[str, ...] = ()
    model: str | None = None  # target.model when served, else the first model served
    max_model_len: int | None = None
    runtime: RuntimeName | None = None  # loadgen.runtimes names it
    runtime_version: str | None = None
    http_status: int | None = None  # status of the /v1/models answer
    note: str = ""  # worth a warning, but the run can go on (no model list, the model named by --model)

    @property
    def ok(self) -> bool:
        return self.reachable and not self.error


async def probe(target: Target, timeout_s: float = 5.0) -> ServerInfo:
    """Check the target answers like an OpenAI-compatible server and find its models and runtime. Several
    replicas as one target: every one is asked (at once); the first that fails, or that does not serve the
    model the first one serves, is the error, named ("replica B (URL): ..."); else the first's answer."""
    replicas = target.replica_targets()
    if len(replicas) == 1:
        return await probe_one(target, timeout_s)
    infos = await asyncio.gather(*(probe_one(t, timeout_s) for t in replicas))
    first = infos[0]
    for at, info in enumerate(infos):
        name = replica_name(at)
        if not info.ok:
            return replace(info, error=f"replica {name} ({info.url}): {info.error}")
        if at and first.model is not None and info.models and first.model not in info.models:
            served = ", ".join(info.models)
            error = f"replica {name} ({info.url}) does not serve {first.model!r} (it serves: {served})"
            return replace(info, error=error + ": every replica must serve the model; fix --url or --model")
    return first


async def probe_one(target: Target, timeout_s: float = 5.0) -> ServerInfo:
    """``probe`` of one server."""
    import httpx

    base = target_root(target)
    if not base.startswith(("http://", "https://")):
        return _unreachable(target, f"invalid URL {target.url!r}: use http://host:port (or https://)")
    async with httpx_client(target, httpx.Timeout(timeout_s)) as client:
        # The info endpoints are asked while /v1/models is: a slow server costs one round trip, not two.
        docs_task = asyncio.ensure_future(fetch_runtime_docs(client, target_root(target)))
        try:
            answer = await _models(client, target, timeout_s)
            if isinstance(answer, ServerInfo):
                return answer
            status, listing, entries = answer
            docs = (await docs_task).with_models(listing)
        finally:
            if not docs_task.done():
                docs_task.cancel()
            await asyncio.gather(docs_task, return_exceptions=True)
    runtime, version = identify(docs)
    note = ""
    if listing is None:  # 404 with a model named
        chosen, error = None, ""
        note = f"{base}/v1/models not found (HTTP 404): going on with --model {target.model!r} as given"
    else:
        chosen, error = _choose(target, entries)
        if not entries and target.model:  # a gateway that lists nothing but routes the name, as a 404 does
            note = f"{base}/v1/models lists no model: going on with --model {target.model!r} as given"
    max_len = chosen.get("max_model_len") if chosen is not None else None
    return ServerInfo(
        url=base,
        reachable=True,
        error=error,
        models=tuple(str(e["id"]) for e in entries),
        model=str(chosen["id"]) if chosen is not None else (target.model or None),
        max_model_len=max_len if isinstance(max_len, int) and not isinstance(max_len, bool) else None,
        runtime=runtime,
        runtime_version=version,
        http_status=status,
        note=note,
    )


def _secrets(target: Target) -> tuple[str, ...]:
    return (api_key(target.api_key_env), *url_secrets(target.url))


def _unreachable(target: Target, error: str, status: int | None = None) -> ServerInfo:
    return ServerInfo(
        url=target_root(target), reachable=False, http_status=status, error=scrub(error, _secrets(target))
    )


def _shown(target: Target, body: bytes, chars: int) -> str:
    """The start of an answer's body on one line, scrubbed before it is cut (a cut secret escapes its mask)."""
    text = " ".join(body[:4096].decode("utf-8", "replace").split())
    return scrub_cut(text, _secrets(target), chars, was_cut=len(body) > 4096)


async def _models(
    client: httpx.AsyncClient, target: Target, timeout_s: float
) -> ServerInfo | tuple[int, object, Sequence[Entry]]:
    """GET /v1/models: (status, document, entries with a string id), or the failure as a ``ServerInfo``."""
    import httpx

    base = target_root(target)
    try:
        url = target_url(target, "/v1/models")
        resp = await read_capped(
            client, "GET", url, max_bytes=MODELS_BYTES, total_s=timeout_s, shown=base + "/v1/models"
        )
        body = resp.content
    except ReplyTooLarge as exc:
        return _unreachable(target, f"{exc}: is this an OpenAI-compatible server?")
    except (httpx.TimeoutException, ReplyTooSlow):
        return _unreachable(
            target,
            f"no answer from {base} within {timeout_s:g} s: is the server up and listening on that port?",
        )
    except httpx.ConnectError as exc:
        why = reason(exc)
        if why.startswith("TLS "):
            return _unreachable(target, f"{base}: {why} ({tls_hint(target, why)})")
        return _unreachable(target, f"cannot connect to {base} ({why.lower()}): is the server running?")
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
        return _unreachable(target, f"invalid URL {target.url!r} ({exc}): use http://host:port")
    except httpx.HTTPError as exc:
        why = f"{type(exc).__name__}: {reason(exc).lower()}"
        return _unreachable(target, f"cannot talk to {base} ({why}): is it an HTTP server?")
    if resp.status_code == 404 and target.model:
        return 404, None, ()  # no model list (a gateway, a bare engine): the model named is asked for as is
    failure = _status_failure(target, resp.status_code, body)
    if failure is not None:
        return failure
    try:
        listing = strict_json.loads(body)
        entries = [e for e in listing["data"] if isinstance(e, dict) and isinstance(e.get("id"), str)]
    except strict_json.JsonError as exc:  # nested past the recursion limit, an integer too long
        return _unreachable(target, f"{base}/v1/models did not return a model list ({exc})", resp.status_code)
    except (ValueError, KeyError, TypeError):
        text = _shown(target, body, 120)
        return _unreachable(
            target,
            f"{base}/v1/models did not return a model list ({text!r}): is this an OpenAI-compatible server?",
            resp.status_code,
        )
    return resp.status_code, listing, entries


def _status_failure(target: Target, status: int, body: bytes) -> ServerInfo | None:
    """A non-200 answer of /v1/models, told as what to do about it."""
    models_url = target_root(target) + "/v1/models"  # as shown: without the query (it may hold a key)
    if status in (401, 403):
        env = target.api_key_env or "OPENAI_API_KEY"
        has_key = bool(api_key(target.api_key_env))
        hint = f"the key in ${env} was rejected" if has_key else f"set {env} or --api-key-env"
        return _unreachable(target, f"authentication failed at {models_url} (HTTP {status}): {hint}", status)
    if status == 404:
        return _unreachable(
            target,
            f"{models_url} not found (HTTP 404): is this an OpenAI-compatible server? check the URL and port",
            status,
        )
    if status != 200:
        text = _shown(target, body, 200)
        return _unreachable(target, f"{models_url} answered HTTP {status}: {text}", status)
    return None


def _choose(target: Target, entries: Sequence[Entry]) -> tuple[Entry | None, str]:
    """The model to load-test (the one asked for, else the first served) and what is wrong, if anything."""
    base = target_root(target)
    if not entries:
        return (
            None,
            "" if target.model else f"{base} serves no model (empty /v1/models): wait for the model to load",
        )
    if not target.model:
        return entries[0], ""
    chosen = next((e for e in entries if e["id"] == target.model), None)
    if chosen is None:
        served = ", ".join(str(e["id"]) for e in entries)
        return None, f"model {target.model!r} is not served by {base} (it serves: {served}): fix --model"
    return chosen, ""
