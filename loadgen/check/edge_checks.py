"""The edge checks of ``ramp check``: how the server refuses (a malformed request: a 4xx with OpenAI's error
JSON; a prompt past ``max_model_len``: a 400 that says so), its ``/metrics`` exposition (parsed by
``loadgen.telemetry.exposition``, which names the runtime), ``/tokenize`` (``loadgen.target.tokenize``) and
the ``x-ratelimit-*`` headers its answers carried (``loadgen.target.ratelimit``).
"""

from __future__ import annotations

from loadgen import strict_json
from loadgen.check.api_checks import failure_text
from loadgen.check.results import CheckResult
from loadgen.check.session import Session, usage_counts, whole
from loadgen.runtimes import METRIC_RUNTIMES
from loadgen.target.http import target_url
from loadgen.target.ratelimit import ratelimit_line
from loadgen.target.tokenize import TokenizeError, count_tokens, tokenize_body, tokenize_url
from loadgen.telemetry.exposition import detect_runtime, parse_samples
from loadgen.telemetry.reading import SourceError

__all__ = ["bad_request", "context_overflow", "metrics", "rate_limits", "tokenize"]

BAD_MESSAGES = "this is not a list of messages"
_NAMED = " or ".join(r.label for r in METRIC_RUNTIMES)  # "vLLM or SGLang"
OVERFLOW_MARGIN = 100  # words past max_model_len; each word is at least one token in any tokenizer


def _short(text: str, most: int = 80) -> str:
    """``text`` on one line, cut at a word boundary past ``most`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= most else text[:most].rsplit(" ", 1)[0] + " …"


def _error_shape(status: int, text: str) -> tuple[bool, str]:
    """(OpenAI's shape, what the body is) for an error answer's body."""
    try:
        body = strict_json.loads(text)
    except ValueError:  # strict_json: not JSON, nested too deeply, an integer too long
        return False, f"HTTP {status} with a body that is not JSON ({' '.join(text.split())[:60]!r})"
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return True, f"HTTP {status}, OpenAI error JSON: {_short(error['message'])!r}"
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return (
            True,
            f"HTTP {status}, legacy error JSON (message at the top level): {_short(body['message'])!r}",
        )
    return False, f"HTTP {status}, JSON without an error message: {' '.join(text.split())[:80]!r}"


async def bad_request(session: Session) -> CheckResult:
    """``messages`` that is not a list: every OpenAI-compatible server must refuse it with a 4xx."""
    from openai import APIStatusError

    name = "error shape"
    try:
        await session.sdk.chat.completions.create(
            model=session.model,
            messages=[{"role": "user", "content": "hi"}],
            max_tokens=1,
            extra_body={"messages": BAD_MESSAGES},
        )
    except APIStatusError as exc:
        shaped, said = _error_shape(exc.status_code, session.scrub(exc.response.text))  # scrubbed, then cut
        if not 400 <= exc.status_code < 500:
            return CheckResult(
                name, "fail", session.scrub(f"a malformed request got {said} (want a 4xx)"), True
            )
        return CheckResult(name, "pass" if shaped else "fail", session.scrub(said), True)
    except Exception as exc:  # a 200 whose body the SDK cannot read, a dropped connection
        return CheckResult(name, "fail", f"a malformed request: {failure_text(session, exc)}", True)
    return CheckResult(
        name, "fail", "HTTP 200 to a malformed request (messages not a list): it was accepted", True
    )


async def context_overflow(session: Session) -> CheckResult:
    """A prompt longer than ``max_model_len`` (words, each at least one token) with ``max_tokens`` 1."""
    from openai import APIStatusError

    name = "context overflow"
    limit = session.max_model_len
    if limit is None:
        return CheckResult(name, "n/a", "the server does not state max_model_len in /v1/models")
    words = limit + OVERFLOW_MARGIN
    try:
        raw = await session.sdk.chat.completions.with_raw_response.create(
            model=session.model,
            messages=[{"role": "user", "content": " ".join(["hello"] * words)}],
            max_tokens=1,
        )
        reply = whole(raw.parse(), raw.headers)  # an SSE or HTML answer: NotOneObject, said as such
    except APIStatusError as exc:
        shaped, said = _error_shape(exc.status_code, session.scrub(exc.response.text))  # scrubbed, then cut
        if exc.status_code == 400 and shaped:
            return CheckResult(name, "pass", session.scrub(f"{words:,} words past {limit:,}: {said}"))
        return CheckResult(
            name, "fail", session.scrub(f"{words:,} words past {limit:,}: {said} (want a 400)")
        )
    except Exception as exc:
        return CheckResult(name, "fail", f"{words:,} words past {limit:,}: {failure_text(session, exc)}")
    counts = usage_counts(reply.usage)  # the SDK does not check a reply's types
    used = counts[0] if counts is not None else None
    return CheckResult(
        name,
        "fail",
        f"HTTP 200 to {words:,} words against max_model_len {limit:,} (prompt_tokens {used}): truncated silently?",
    )


async def metrics(session: Session) -> CheckResult:
    import httpx

    url = target_url(session.target, "/metrics")
    name = "/metrics"
    try:
        resp = await session.edge.get(url)
    except httpx.HTTPError as exc:
        return CheckResult(name, "n/a", session.scrub(f"{type(exc).__name__}: {exc}"))
    if resp.status_code != 200:
        return CheckResult(name, "n/a", f"HTTP {resp.status_code}: no server telemetry (the panel shows n/a)")
    try:
        samples = parse_samples(resp.text, "/metrics")
    except SourceError as exc:
        return CheckResult(name, "fail", str(exc))
    runtime = detect_runtime(samples)
    if runtime is None:
        return CheckResult(name, "fail", f"{len(samples)} samples, none with {_NAMED} names")
    return CheckResult(name, "pass", f"{len(samples)} samples, {runtime} names", data={"runtime": runtime})


async def tokenize(session: Session) -> CheckResult:
    name = "/tokenize"
    url = tokenize_url(session.target)
    try:
        count = await count_tokens(session.edge, url, tokenize_body(session.model, "hello world"))
    except TokenizeError as exc:
        return CheckResult(
            name,
            "n/a",
            session.scrub(f"{exc}: prompt lengths are estimated (or pass --tokenizer tokenizer.json)"),
        )
    return CheckResult(name, "pass", f"'hello world' is {count} tokens: prompts are sized exactly")


def rate_limits(session: Session) -> CheckResult:
    line = ratelimit_line(session.ratelimit)
    if not line:
        return CheckResult("rate limits", "n/a", "no x-ratelimit-* headers in any answer")
    return CheckResult("rate limits", "pass", line, data=dict(session.ratelimit))
