"""The target's prefix-cache reset, through the runtime's own endpoint (``Runtime.cache_resets`` of
``loadgen.runtimes``: vLLM's ``POST /reset_prefix_cache``, SGLang's ``POST /flush_cache``).

Owns which endpoints are tried for a runtime (``reset_routes``), the call (the target's headers, a short
timeout, proxies from the environment ignored) and what it tells: ``CacheReset``, whether the cache was reset and one
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

from loadgen.runtimes import RUNTIMES, CacheResetRoute, named
from loadgen.target.http import api_key, describe_error, scrub, target_headers
from loadgen.types import Target

if TYPE_CHECKING:
    import httpx

__all__ = ["CacheReset", "reset_paths", "reset_prefix_cache", "reset_routes"]

_ABSENT = (404, 405)
# Every route any runtime serves, each named once, for the sentence said when none was there.
_ROUTES: dict[str, CacheResetRoute] = {route.path: route for r in RUNTIMES for route in r.cache_resets}
_NO_RESET = f"the server offers no cache reset ({'; '.join(route.hint for route in _ROUTES.values())})"


@dataclass(frozen=True, slots=True)
class CacheReset:
    """Whether the prefix cache was reset, and how (``POST /flush_cache → 200``) or why not."""

    done: bool
    how: str


def reset_routes(runtime: str | None) -> tuple[CacheResetRoute, ...]:
    """The endpoints to try, in order, for a runtime as ``loadgen.runtimes.identify`` names it (every runtime's,
    in turn, for one ramp cannot name)."""
    return named(runtime).cache_resets


def reset_paths(runtime: str | None) -> tuple[str, ...]:
    """The paths of ``reset_routes``."""
    return tuple(route.path for route in reset_routes(runtime))


def _url(target: Target, path: str) -> str:
    """``path`` on the target, the target's own query string (``?api_key=...``) kept before ours."""
    route, _, ours = path.partition("?")
    url = target.endpoint(route)
    return url + ("&" if "?" in url else "?") + ours if ours else url


def _refused(route: CacheResetRoute, status: int, body: str) -> str | None:
    """Why an answer is not a reset (``None``: it is one). A runtime may say so in a 200's body."""
    if 200 <= status < 300:
        if route.body_refusal in body.replace(" ", "").lower():
            return route.body_refusal_why
        return None
    if status in (401, 403):
        return "not authorised (is the API key set?)"
    if status in route.status_whys:
        return route.status_whys[status]
    return route.absent_why if status in _ABSENT else route.other_why


@dataclass(frozen=True, slots=True)
class _Attempt:
    said: str  # "POST /flush_cache → 400", or why no answer came ("connection refused: http://h/flush_cache")
    status: int | None  # None: no answer
    why: str | None  # why the answer is not a reset; None: it is one (or no answer came)


async def _post(
    client: httpx.AsyncClient, target: Target, route: CacheResetRoute, timeout_s: float
) -> _Attempt:
    import httpx

    path = route.path
    try:
        response = await client.post(_url(target, path))
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        plain = target.base_url + path.partition("?")[0]
        return _Attempt(
            scrub(describe_error(exc, plain, timeout_s), (api_key(target.api_key_env),)), None, None
        )
    status = response.status_code
    return _Attempt(f"POST {path} → {status}", status, _refused(route, status, response.text[:2000]))


async def reset_prefix_cache(target: Target, runtime: str | None, timeout_s: float = 10.0) -> CacheReset:
    """Reset the target's prefix cache through ``runtime``'s endpoint (both, in turn, for an unknown one).

    ``done`` only when the server said it reset; ``how`` tells each request and its status, then why not.
    The next endpoint is tried only after a 404 or 405 (absent): any other answer is the runtime's own."""
    import httpx

    attempts: list[_Attempt] = []
    timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, target.connect_timeout_s))
    async with httpx.AsyncClient(timeout=timeout, headers=target_headers(target), trust_env=False) as client:
        for route in reset_routes(runtime):
            attempt = await _post(client, target, route, timeout_s)
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
