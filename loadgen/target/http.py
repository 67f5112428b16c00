"""The small pieces every off-hot-path call to the server shares: who we are, where the root is, what went
wrong, which runtime answered, and never a secret in any text we print or record.

Owns ``auth_headers`` (the Bearer header from an environment variable's value), ``server_root`` (the URL
that ``/metrics``, ``/version`` and ``/tokenize`` hang from), ``scrub`` (secrets out of any text),
``reason`` / ``describe_error`` (an exception chain turned into a short human reason / one line naming the
URL) and the runtime identity (``RuntimeDocs`` → ``identify_runtime``; ``fetch_runtime_docs`` asks the
endpoints). The hot path (``loadgen.client``) builds its headers once per client with ``auth_headers`` and
maps its errors with ``reason``; everything else (probe, /tokenize, telemetry, launch) goes through here.

httpx is imported on first use, not with this module: httpx imports its command-line module, and with it
``rich``, whenever ``rich`` is installed, and ``loadgen`` must not pull in ``rich``.
"""

from __future__ import annotations

import asyncio
import base64
import errno
import json
import os
import re
import socket
import ssl
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit, urlunsplit

from loadgen.runtimes import GENERIC, SGLANG, SIM, VLLM, RuntimeName, lookup
from loadgen.target.bounded import INFO_BYTES, ReplyTooLarge, ReplyTooSlow, read_capped
from loadgen.types import Target, server_root

if TYPE_CHECKING:
    import httpx

__all__ = [
    "RuntimeDocs",
    "api_key",
    "auth_headers",
    "describe_error",
    "fetch_runtime_docs",
    "header_secrets",
    "identify_runtime",
    "reason",
    "scrub",
    "server_root",
    "target_headers",
    "target_root",
    "target_url",
    "url_auth_headers",
    "url_secrets",
    "without_userinfo",
]

MASK = "***"
_REASON_CHARS = 120

# user:password@ (or a bare token@) in a URL; ?api_key=... / &token=... in a query string; a Bearer token in a header dump.
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)[^/?#\s@]+@")
_SECRET_PARAMS = re.compile(
    r"(?P<name>[?&;](?:api[_-]?key|key|token|access[_-]?token|auth|password|secret|sig|signature)=)[^&;#\s'\"]+",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(?P<name>\bBearer\s+)[A-Za-z0-9._~+/=-]+", re.IGNORECASE)
# RFC 7617's token68 after "Basic": base64 of user:password, decodable, so as secret as the password itself.
_BASIC = re.compile(r"(?P<name>\bBasic\s+)[A-Za-z0-9._~+/=-]+", re.IGNORECASE)


# ------------------------------------------------------------------------------------------- identity


def api_key(api_key_env: str | None) -> str:
    """The key held by the environment variable ``api_key_env`` ("" when unnamed, unset or empty)."""
    return os.environ.get(api_key_env, "") if api_key_env else ""


def auth_headers(api_key_env: str | None) -> dict[str, str]:
    """``{"Authorization": "Bearer <key>"}`` when the variable holds a key, else ``{}``."""
    key = api_key(api_key_env)
    return {"Authorization": f"Bearer {key}"} if key else {}


def target_headers(target: Target) -> dict[str, str]:
    """The target's extra headers plus the auth header: what every call to the target sends. A URL's
    ``user:password@`` becomes a Basic header; a key in ``api_key_env`` (a Bearer header) wins over it."""
    return {**dict(target.headers), **url_auth_headers(target.url), **auth_headers(target.api_key_env)}


def url_auth_headers(url: str) -> dict[str, str]:
    """``{"Authorization": "Basic ..."}`` for a URL's ``user:password@`` part, ``{}`` without one."""
    parts = urlsplit(url.strip())
    if parts.username is None:
        return {}
    pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
    return {"Authorization": "Basic " + base64.b64encode(pair.encode()).decode("ascii")}


def url_secrets(url: str) -> tuple[str, ...]:
    """What a URL's ``user:password@`` part gives away, for ``scrub``: the password (as written and
    decoded) and the Basic header's base64 token (a server may echo it without the ``Basic`` word)."""
    parts = urlsplit(url.strip())
    password = parts.password
    if not password:
        return ()
    token = url_auth_headers(url)["Authorization"].partition(" ")[2]
    return token, password, unquote(password)


def header_secrets(headers: Mapping[str, str]) -> tuple[str, ...]:
    """The credentials an ``Authorization`` header sent, for ``scrub``: a Bearer key, a Basic token and the
    password it encodes (a server that echoes the header may echo any of them)."""
    scheme, _, credential = next(
        (v for k, v in headers.items() if k.lower() == "authorization"), ""
    ).partition(" ")
    credential = credential.strip()
    if not credential:
        return ()
    if scheme.lower() != "basic":
        return (credential,)
    try:
        password = base64.b64decode(credential, validate=True).decode().partition(":")[2]
    except ValueError:
        return (credential,)
    return (credential, password) if password else (credential,)


def without_userinfo(url: str) -> str:
    """``url`` without its ``user:password@`` part (sent as a header instead: ``url_auth_headers``)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def target_url(target: Target, path: str = "") -> str:
    """``path`` on the target as it is sent: the query string after the path, no ``user:password@``."""
    return without_userinfo(target.endpoint(path))


def target_root(target: Target) -> str:
    """The server's root as it is sent (``/metrics``, ``/version`` hang from it), no credentials."""
    return without_userinfo(target.base_url)


# ------------------------------------------------------------------------------------------- secrets


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with credentials masked: each of ``secrets`` verbatim, ``user:pass@`` in URLs, secret-looking
    query parameters (``api_key=``, ``key=``, ``token=``...), Bearer tokens and Basic credentials."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, MASK)
    if "@" in text:
        text = _URL_CREDENTIALS.sub(lambda m: m["scheme"] + MASK + "@", text)
    if "=" in text:
        text = _SECRET_PARAMS.sub(lambda m: m["name"] + MASK, text)
    if "earer" in text:
        text = _BEARER.sub(lambda m: m["name"] + MASK, text)
    if "asic" in text:
        text = _BASIC.sub(lambda m: m["name"] + MASK, text)
    return text


# ------------------------------------------------------------------------------------------- errors


def reason(exc: BaseException) -> str:
    """A short human reason ("connection refused", "unknown host", "network is unreachable"...) from an
    exception and the chain under it: libraries wrap the socket error that says why."""
    seen: BaseException | None = exc
    for _ in range(6):
        if seen is None:
            break
        # ssl's own (libraries subclass them without their fields, and wrap the original): an OSError whose
        # errno (1) would read "operation not permitted".
        from_ssl = type(seen).__module__ == "ssl"
        if from_ssl and isinstance(seen, ssl.SSLCertVerificationError):
            return f"TLS certificate verify failed: {str(seen.verify_message).rstrip('.')}"
        if isinstance(seen, ssl.SSLError):
            if from_ssl:
                return f"TLS error: {seen.reason or seen}"
            if seen.__cause__ is not None or seen.__context__ is not None:
                seen = seen.__cause__ or seen.__context__  # the wrapped original says more
                continue
        if isinstance(seen, ConnectionRefusedError):
            return "connection refused"
        if isinstance(seen, socket.gaierror) or type(seen).__name__ == "ClientConnectorDNSError":
            return "unknown host"
        code = seen.errno if isinstance(seen, OSError) else None
        if code is None:
            os_error = getattr(seen, "os_error", None)  # aiohttp's ClientConnectorError keeps it there
            code = os_error.errno if isinstance(os_error, OSError) else None
        if isinstance(code, int) and code in errno.errorcode:
            return os.strerror(code).lower()
        seen = seen.__cause__ or seen.__context__
    text = " ".join(str(exc).split())
    if "Name or service not known" in text or "nodename nor servname" in text:
        return "unknown host"
    return text[:_REASON_CHARS] if text else type(exc).__name__


def describe_error(exc: BaseException, url: str, timeout_s: float | None = None) -> str:
    """One line for a failed call: what went wrong, then the URL (``connection refused: http://h/metrics``)."""
    text = " ".join(str(exc).split())
    if isinstance(exc, TimeoutError | asyncio.TimeoutError) or _is_httpx(exc, "TimeoutException"):
        after = f" after {timeout_s:g} s" if timeout_s is not None else ""
        return f"timeout{after}: {url}"
    if _is_httpx(exc, "HTTPStatusError"):
        import httpx

        assert isinstance(exc, httpx.HTTPStatusError)
        return f"HTTP {exc.response.status_code} from {url}"
    if isinstance(exc, OSError) or _is_httpx(exc, "ConnectError"):
        why = reason(exc)
        if why in ("connection refused", "unknown host") or why.startswith("TLS "):
            return f"{why}: {url}"
        return f"cannot connect ({text[:80] if text else 'connect error'}): {url}"
    if _is_httpx(exc, "HTTPError"):
        return f"{type(exc).__name__}: {url}"
    return f"{type(exc).__name__}: {text[:_REASON_CHARS]} ({url})"


def _is_httpx(exc: BaseException, name: str) -> bool:
    """``isinstance(exc, httpx.<name>)`` without importing httpx for exceptions that cannot be its own."""
    if not (type(exc).__module__ or "").startswith("httpx"):
        return False
    import httpx

    cls = getattr(httpx, name)
    return isinstance(exc, cls)


# ------------------------------------------------------------------------------------------- runtime


@dataclass(frozen=True, slots=True)
class RuntimeDocs:
    """What a server answered at the endpoints that name its runtime (``None``: no JSON object there)."""

    sim: Mapping[str, object] | None = None  # ramp's simulator: its info path (SIM.info_paths)
    version: Mapping[str, object] | None = None  # VLLM.version_path (the simulator answers it too)
    sglang: Mapping[str, object] | None = None  # SGLANG.info_paths: the newer, else the older
    owners: frozenset[str] = field(default_factory=frozenset)  # owned_by of /v1/models entries, lowercased
    models_answered: bool = False  # /v1/models answered with a model list
    metrics_runtime: RuntimeName | None = None  # detected from /metrics prefixes, when the caller scraped it

    def with_models(self, models: object | None) -> RuntimeDocs:
        """The same answers plus the ``/v1/models`` document's owners (fetched apart, e.g. by the probe)."""
        fresh = docs_from(None, None, None, models)
        return replace(self, owners=fresh.owners, models_answered=fresh.models_answered)


def _text(value: object) -> str | None:
    return str(value) if value not in (None, "") else None


def identify_runtime(docs: RuntimeDocs) -> tuple[RuntimeName | None, str | None]:
    """(runtime, version), most specific answer first; (None, None) when nothing identifies the server.

    The simulator answers ``/_sim/info``; vLLM marks its models ``owned_by: "vllm"`` and serves ``/version``
    (``{"version": ...}``); SGLang marks them ``"sglang"`` and serves ``/server_info`` or
    ``/get_server_info`` (with ``version``, ``tp_size``, ``model_path``). Anything else that serves
    ``/v1/models`` is ``"openai-compatible"``. The names and markers are the runtimes' (``loadgen.runtimes``);
    a simulator that names a runtime ramp does not know is ramp's simulator.
    """
    version = _text(docs.version.get("version")) if docs.version is not None else None
    if docs.sim is not None:
        claimed = lookup(docs.sim.get("runtime"))
        return (claimed or SIM).name, _text(docs.sim.get("version")) or version
    if VLLM.owned_by in docs.owners:
        return VLLM.name, version
    info = docs.sglang
    if info is not None and any(key in info for key in SGLANG.info_keys):
        return SGLANG.name, _text(info.get("version")) or version
    if SGLANG.owned_by in docs.owners:
        return SGLANG.name, version
    if docs.metrics_runtime is not None:
        return docs.metrics_runtime, version
    if version is not None:
        return VLLM.name, version  # /version with a bare {"version": ...} is vLLM's answer
    if docs.models_answered:
        return GENERIC.name, None
    return None, None


async def get_json(client: httpx.AsyncClient, url: str, max_bytes: int = INFO_BYTES) -> object | None:
    """GET a JSON document, bounded (``loadgen.target.bounded``); ``None`` for any failure (the info
    endpoints are optional)."""
    import httpx

    try:
        # A timeout of its own: the client's is per read, and a body may trickle in forever.
        timeout = client.timeout.read or 5.0
        resp = await read_capped(client, "GET", url, max_bytes=max_bytes, total_s=timeout)
        if resp.status_code != 200:
            return None
        doc: object = json.loads(resp.content)
        return doc
    except (httpx.HTTPError, ValueError, ReplyTooLarge, ReplyTooSlow, RecursionError):
        return None


def _mapping(doc: object) -> Mapping[str, object] | None:
    return doc if isinstance(doc, Mapping) else None


async def fetch_runtime_docs(
    client: httpx.AsyncClient,
    root: str,
    models: object | None = None,
    metrics_runtime: RuntimeName | None = None,
) -> RuntimeDocs:
    """Ask every runtime's info endpoint under ``root`` at once. ``models`` is the ``/v1/models`` document
    when the caller already has it (its ``owned_by`` names the runtime)."""
    assert VLLM.version_path is not None
    newer, older = SGLANG.info_paths
    sim, version, info, info_old = await asyncio.gather(
        get_json(client, root + SIM.info_paths[0]),
        get_json(client, root + VLLM.version_path),
        get_json(client, root + newer),
        get_json(client, root + older),
    )
    return docs_from(sim, version, _mapping(info) or _mapping(info_old), models, metrics_runtime)


def docs_from(
    sim: object | None,
    version: object | None,
    sglang: object | None,
    models: object | None,
    metrics_runtime: RuntimeName | None = None,
) -> RuntimeDocs:
    """``RuntimeDocs`` from raw JSON documents as the endpoints returned them (anything, or ``None``)."""
    entries = models.get("data") if isinstance(models, Mapping) else None
    listed = [e for e in entries if isinstance(e, Mapping)] if isinstance(entries, list) else []
    return RuntimeDocs(
        sim=_mapping(sim),
        version=_mapping(version),
        sglang=_mapping(sglang),
        owners=frozenset(str(e.get("owned_by", "")).lower() for e in listed),
        models_answered=bool(listed),
        metrics_runtime=metrics_runtime,
    )
