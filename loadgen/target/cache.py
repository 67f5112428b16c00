"""The target's prefix-cache reset: vLLM's ``POST /reset_prefix_cache``, SGLang's ``POST /flush_cache``.

Owns which endpoint a runtime offers (``reset_paths``), the call (the target's headers, a short timeout,
proxies from the environment ignored) and what it tells: ``CacheReset``, whether the cache was reset and one
line saying how (each request with its status, then why not), for the step's record. ``reset_prefix_cache``
never raises: an HTTP answer, a refusal or an unreachable server all come back as a ``CacheReset``.

vLLM mounts its reset only when started with ``VLLM_SERVER_DEV_MODE=1`` (else 404), and refuses it while
running requests hold cache blocks unless ``?reset_running_requests=true`` (which preempts them: they
recompute, inside the warm-up that follows a reset). SGLang refuses a flush (HTTP 400) while any request
runs or waits. A runtime we cannot name is asked vLLM's endpoint, then SGLang's when the first is absent.
httpx is imported on first use (see ``loadgen.target.http``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from loadgen.target.http import api_key, describe_error, scrub, target_headers
from loadgen.types import Target

if TYPE_CHECKING:
    import httpx

__all__ = ["SGLANG_FLUSH", "VLLM_RESET", "CacheReset", "reset_paths", "reset_prefix_cache"]

VLLM_RESET = "/reset_prefix_cache?reset_running_requests=true"
SGLANG_FLUSH = "/flush_cache"
_ABSENT = (404, 405)
_NO_RESET = (
    "the server offers no cache reset (vLLM serves /reset_prefix_cache only when started with "
    "VLLM_SERVER_DEV_MODE=1; SGLang serves /flush_cache)"
)


@dataclass(frozen=True, slots=True)
class CacheReset:
    """Whether the prefix cache was reset, and how (``POST /flush_cache → 200``) or why not."""

    done: bool
    how: str


def reset_paths(runtime: str | None) -> tuple[str, ...]:
    """The endpoints to try, in order, for a runtime as ``identify_runtime`` names it."""
    name = (runtime or "").lower()
    if "sglang" in name:
        return (SGLANG_FLUSH,)
    if "vllm" in name:
        return (VLLM_RESET,)
    return (VLLM_RESET, SGLANG_FLUSH)


def _url(target: Target, path: str) -> str:
    """``path`` on the target, the target's own query string (``?api_key=...``) kept before ours."""
    route, _, ours = path.partition("?")
    url = target.endpoint(route)
    return url + ("&" if "?" in url else "?") + ours if ours else url


def _refused(path: str, status: int, body: str) -> str | None:
    """Why an answer is not a reset (``None``: it is one). Both runtimes may say so in a 200's body."""
    if 200 <= status < 300:
        if path == VLLM_RESET and '"success":false' in body.replace(" ", "").lower():
            return "vLLM could not reset: cache blocks are still held by running requests"
        if path == SGLANG_FLUSH and "fail" in body.lower():
            return "SGLang flushes only when no request is running or waiting"
        return None
    if status in (401, 403):
        return "not authorised (is the API key set?)"
    if path == SGLANG_FLUSH:
        if status == 400:
            return "SGLang flushes only when no request is running or waiting"
        return "the server has no /flush_cache" if status in _ABSENT else "SGLang refused the flush"
    if status in _ABSENT:
        return "vLLM serves /reset_prefix_cache only when started with VLLM_SERVER_DEV_MODE=1"
    return "vLLM refused the reset: cache blocks are still held by running requests (an older vLLM?)"


@dataclass(frozen=True, slots=True)
class _Attempt:
    said: str  # "POST /flush_cache → 400", or why no answer came ("connection refused: http://h/flush_cache")
    status: int | None  # None: no answer
    why: str | None  # why the answer is not a reset; None: it is one (or no answer came)


async def _post(client: httpx.AsyncClient, target: Target, path: str, timeout_s: float) -> _Attempt:
    import httpx

    try:
        response = await client.post(_url(target, path))
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        plain = target.base_url + path.partition("?")[0]
        return _Attempt(
            scrub(describe_error(exc, plain, timeout_s), (api_key(target.api_key_env),)), None, None
        )
    status = response.status_code
    return _Attempt(f"POST {path} → {status}", status, _refused(path, status, response.text[:2000]))


async def reset_prefix_cache(target: Target, runtime: str | None, timeout_s: float = 10.0) -> CacheReset:
    """Reset the target's prefix cache through ``runtime``'s endpoint (both, in turn, for an unknown one).

    ``done`` only when the server said it reset; ``how`` tells each request and its status, then why not.
    The next endpoint is tried only after a 404 or 405 (absent): any other answer is the runtime's own."""
    import httpx

    attempts: list[_Attempt] = []
    timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, target.connect_timeout_s))
    async with httpx.AsyncClient(timeout=timeout, headers=target_headers(target), trust_env=False) as client:
        for path in reset_paths(runtime):
            attempt = await _post(client, target, path, timeout_s)
            attempts.append(attempt)
            if attempt.status is not None and attempt.why is None:
                return CacheReset(True, ", then ".join(a.said for a in attempts))
            if attempt.status not in _ABSENT:
                break
    return CacheReset(False, _told(attempts))


def _told(attempts: list[_Attempt]) -> str:
    """The attempts in order, then why not; when every endpoint was absent, one sentence for them all."""
    lines = ", then ".join(a.said for a in attempts)
    if len(attempts) > 1 and all(a.status in _ABSENT for a in attempts):
        return f"{lines}: {_NO_RESET}"
    why = attempts[-1].why
    return f"{lines}: {why}" if why else lines
