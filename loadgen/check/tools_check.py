"""The tool-call check of ``ramp check`` (``tool calls``), through the official SDK: one streamed chat request
offering one simple function tool with ``tool_choice`` "required"; it passes when ``delta.tool_calls``
arrived (the call's id and the function's name, then its arguments in fragments), the function named is
the one offered and the joined arguments parse as a JSON object, and it reports the time to the first
tool-call delta (TTFTC). Arguments cut by ``max_tokens`` (finish "length") are not held to JSON.

A server that refuses tools answers 400: vLLM does unless started with ``--enable-auto-tool-choice
--tool-call-parser NAME``; the check is then n/a with the server's message and that advice. Advisory: a
run offers tools only when its profile has ``[tools]``. The SDK call is bounded in bytes and time as every
other (``loadgen.check.capped``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from loadgen import measures, strict_json
from loadgen.check.api_checks import failure_text
from loadgen.check.results import CheckResult
from loadgen.check.session import SEED, Session
from loadgen.runtimes import RUNTIMES

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionToolParam

__all__ = ["FUNCTION", "NAME", "tool_calls"]

NAME = "tool calls"
FUNCTION = "get_weather"
PROMPT = "What is the weather in Paris? Answer by calling the tool."
CALL_TOKENS = 128  # room for a call's arguments: a model stops once their JSON closes
MAX_ARGUMENTS = 64 << 10  # the arguments kept (a runaway call is cut here, and fails the JSON test)
_NEEDS = "; ".join(f"{r.label} needs {r.tool_call_flags}" for r in RUNTIMES if r.tool_call_flags)
_ADVICE = f"the server refuses tools: {_NEEDS}" if _NEEDS else "the server refuses tools"


def _tool() -> ChatCompletionToolParam:
    return {
        "type": "function",
        "function": {
            "name": FUNCTION,
            "description": "The current weather in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }


class _Call:
    """What the stream said of its first call: id, name, arguments' text, when its first delta came."""

    __slots__ = ("call_id", "name", "arguments", "first_s", "deltas", "finish")

    def __init__(self) -> None:
        self.call_id = ""
        self.name = ""
        self.arguments: list[str] = []
        self.first_s: float | None = None
        self.deltas = 0
        self.finish: str | None = None

    def text(self) -> str:
        return "".join(self.arguments)[:MAX_ARGUMENTS]


async def _stream(session: Session) -> tuple[_Call, float]:
    started = time.perf_counter()
    call = _Call()
    stream = await session.sdk.chat.completions.create(
        model=session.model,
        messages=[{"role": "user", "content": PROMPT}],
        tools=[_tool()],
        tool_choice="required",
        max_tokens=CALL_TOKENS,
        stream=True,
        temperature=0,
        seed=SEED,
    )
    async for chunk in stream:
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        call.finish = choice.finish_reason or call.finish
        for delta in choice.delta.tool_calls or ():
            if delta.index != 0:  # the first call is the one judged
                continue
            call.deltas += 1
            call.first_s = time.perf_counter() if call.first_s is None else call.first_s
            call.call_id = call.call_id or (delta.id or "")
            fn = delta.function
            if fn is not None:
                call.name = call.name or (fn.name or "")
                if fn.arguments and sum(map(len, call.arguments)) < MAX_ARGUMENTS:
                    call.arguments.append(fn.arguments)
    return call, started


async def tool_calls(session: Session) -> CheckResult:
    try:
        call, started = await _stream(session)
    except Exception as exc:  # the SDK's errors, and anything a broken server makes it raise
        why = failure_text(session, exc)
        if why.startswith(("HTTP 400", "HTTP 422", "HTTP 501")):
            return CheckResult(NAME, "n/a", session.scrub(f"{why} ({_ADVICE})")[:400])
        return CheckResult(NAME, "fail", why)
    if call.first_s is None:
        return CheckResult(
            NAME,
            "fail",
            f'tool_choice "required" ignored: no tool_calls delta in the stream (finish {call.finish}); '
            "a run with [tools] would see no call",
        )
    ttftc_ms = (call.first_s - started) * 1000
    data: dict[str, object] = {measures.TTFTC_MS: ttftc_ms, "name": call.name, "deltas": call.deltas}
    if call.name != FUNCTION:
        return CheckResult(
            NAME, "fail", f"the call names {call.name!r}, not the offered {FUNCTION!r}", data=data
        )
    text = call.text()
    data["arguments_chars"] = len(text)
    shown = f"{call.deltas} tool_calls deltas, {FUNCTION}, TTFTC {ttftc_ms:.0f} ms, finish {call.finish}"
    try:
        arguments = strict_json.loads(text)
    except ValueError:  # strict_json: not JSON, nested too deeply, an integer too long
        arguments = None
    if isinstance(arguments, dict):
        data["arguments_keys"] = sorted(str(k) for k in arguments)[:16]
        return CheckResult(NAME, "pass", f"{shown}, arguments a JSON object", data=data)
    if call.finish == "length":
        return CheckResult(
            NAME,
            "pass",
            f"{shown}: arguments cut by max_tokens ({len(text)} chars), not held to JSON",
            data=data,
        )
    return CheckResult(
        NAME,
        "fail",
        f"{shown}, but the arguments are not a JSON object: {session.scrub(text[:60])!r}",
        data=data,
    )
