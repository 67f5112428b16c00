"""The small pieces every off-hot-path call to the server shares: who we are, where the root is, what went
wrong, which runtime answered, and never a secret in any text we print or record.

Owns ``auth_headers`` (the Bearer header from an environment variable's value), ``server_root`` (the URL
that ``/metrics``, ``/version`` and ``/tokenize`` hang from), ``scrub`` (secrets out of any text),
``reason`` / ``describe_error`` (an exception chain turned into a short human reason / one line naming the
URL) and what names the runtime (``fetch_runtime_docs`` asks every runtime's info and version paths;
``loadgen.runtimes.identify`` reads the answers). The hot path (``loadgen.client``) builds its headers once
per client with ``auth_headers`` and maps its errors with ``reason``; everything else (probe, /tokenize,
telemetry, launch) goes through here.

httpx is imported on first use, not with this module: httpx imports its command-line module, and with it
``rich``, whenever ``rich`` is installed, and ``loadgen`` must not pull in ``rich``.
"""

from __future__ import annotations

import asyncio
import base64
import errno
import os
import re
import socket
import ssl
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit, urlunsplit

from loadgen import strict_json
from loadgen.runtimes import RUNTIMES, Runtime, RuntimeDocs, RuntimeName
from loadgen.target.bounded import INFO_BYTES, ReplyTooLarge, ReplyTooSlow, read_capped
from loadgen.types import Target, server_root

if TYPE_CHECKING:
    import httpx

__all__ = [
    "api_key",
    "auth_headers",
    "describe_error",
    "fetch_runtime_docs",
    "header_secrets",
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
# A server logging its arguments or settings: "--api-key X", "--hf-token=X", "HF_TOKEN=X", vLLM's
# "non-default args: {'api_key': 'X'}" (a list too: ['X']), a JSON "token": "X".
_WORD = r"(?:api[_-]?key|token|secret|password|passwd)"
_FLAG_VALUE = re.compile(rf"(?P<name>--?(?:[\w-]*[-_])?{_WORD}(?:=|\s+))(?!-)[^\s'\",]+", re.IGNORECASE)
_ENV_VALUE = re.compile(
    r"(?P<name>\b(?:[A-Z0-9_]*_)?(?:API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD)=)[^\s'\",;&#]+"
)
_DICT_VALUE = re.compile(rf"(?P<name>['\"]\w*{_WORD}['\"]\s*:\s*\[?\s*['\"])[^'\"]+", re.IGNORECASE)


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
    query parameters (``api_key=``, ``key=``, ``token=``...), Bearer tokens and Basic credentials, and the
    values of key-like flags, variables and settings (``--api-key X``, ``HF_TOKEN=X``, ``'api_key': 'X'``)."""
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
    for pattern, needs in ((_FLAG_VALUE, "-"), (_ENV_VALUE, "="), (_DICT_VALUE, ":")):
        if needs in text:  # each match holds its character: a line without it is not searched (per line cost)
            text = pattern.sub(lambda m: m["name"] + MASK, text)
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
        return strict_json.loads(resp.content)
    except (httpx.HTTPError, ValueError, ReplyTooLarge, ReplyTooSlow):  # ValueError: strict_json's too
        return None


async def fetch_runtime_docs(
    client: httpx.AsyncClient,
    root: str,
    models: object | None = None,
    metrics_runtime: RuntimeName | None = None,
    runtimes: Sequence[Runtime] = RUNTIMES,
) -> RuntimeDocs:
    """Ask every runtime's info and version paths under ``root`` at once (what ``loadgen.runtimes.identify``
    reads). ``models`` is the ``/v1/models`` document when the caller already has it (its ``owned_by``
    names the runtime)."""
    asked = [(r.name, True, path) for r in runtimes for path in r.info_paths]
    asked += [(r.name, False, r.version_path) for r in runtimes if r.version_path is not None]
    answers = await asyncio.gather(*(get_json(client, root + path) for _, _, path in asked))
    info: dict[str, list[object]] = {}
    versions: dict[str, object] = {}
    for (name, is_info, _), doc in zip(asked, answers, strict=True):
        if is_info:
            info.setdefault(name, []).append(doc)  # in the runtime's order: the first object is its document
        else:
            versions[name] = doc
    return RuntimeDocs.of(info, versions, models, metrics_runtime)
