"""The Responses API check of ``ramp check`` (``responses stream``), through the official SDK: one streamed
``client.responses.create`` with the same prompt as the chat checks; it passes when text streamed (answer
``response.output_text.delta``, or reasoning deltas only: a reasoning model may spend the check's few tokens
thinking) and the stream ended with ``response.completed`` (or ``response.incomplete``,
cut by ``max_output_tokens``) carrying its usage. A server without ``/v1/responses`` answers 404 or 405: n/a,
unless the run will speak it (``--api responses``), then a failure.
"""

from __future__ import annotations

import time

from loadgen import measures
from loadgen.check.api_checks import PROMPT, REPLY_TOKENS, failure_text
from loadgen.check.results import CheckResult
from loadgen.check.session import Session

__all__ = ["NAME", "responses_stream"]

NAME = "responses stream"
_REASONING = ("response.reasoning_text.delta", "response.reasoning_summary_text.delta")


async def responses_stream(session: Session, required: bool = False) -> CheckResult:
    started = time.perf_counter()
    first: float | None = None
    deltas = reasoning = 0
    usage: tuple[int, int] | None = None
    status = ""
    try:
        stream = await session.sdk.responses.create(
            model=session.model, input=PROMPT, max_output_tokens=REPLY_TOKENS, stream=True
        )
        async for event in stream:
            if event.type == "response.output_text.delta":
                if event.delta:
                    deltas += 1
                    first = time.perf_counter() if first is None else first
            elif event.type in _REASONING:
                reasoning += 1
            elif event.type == "response.completed" or event.type == "response.incomplete":
                status = str(event.response.status or "")
                used = event.response.usage
                if used is not None:
                    usage = (used.input_tokens, used.output_tokens)
    except Exception as exc:  # the SDK's errors, and anything a broken server makes it raise
        why = failure_text(session, exc)
        if why.startswith(("HTTP 404", "HTTP 405")) and not required:
            return CheckResult(NAME, "n/a", f"{why} (no Responses API here: ramp run --api chat)")
        return CheckResult(NAME, "fail", why, required)
    if first is None and not reasoning:
        return CheckResult(NAME, "fail", "no text in the stream, answer or reasoning", required)
    if usage is None:
        return CheckResult(
            NAME, "fail", "the stream ended without response.completed and its usage", required
        )
    shown = f"first text {(first - started) * 1000:.0f} ms" if first is not None else "all reasoning"
    why = (
        f"{deltas} text deltas{f', {reasoning} reasoning' if reasoning else ''}, {status}, "
        f"usage {usage[0]} + {usage[1]}, {shown}"
    )
    data: dict[str, object] = {} if first is None else {measures.TTFAT_MS: (first - started) * 1000}
    return CheckResult(NAME, "pass", why, required, data)
