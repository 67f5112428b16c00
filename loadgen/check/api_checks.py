"""The generation checks of ``ramp check``, through the OpenAI SDK: chat and completions, streamed and not;
the usage chunk (``stream_options.include_usage``) against the non-streamed usage of the same request; the
``max_tokens`` limit; stop sequences; the role-only first chunk; reasoning fields.

Each check returns one ``CheckResult`` with a one-line reason. The same prompt is sent every time at
temperature 0 with a fixed seed (``loadgen.check.session``), so the streamed and non-streamed replies, and
the stop check's reference and its stopped reply, are the same request.
"""

from __future__ import annotations

from dataclasses import dataclass

from loadgen import measures
from loadgen.check.results import CheckResult
from loadgen.check.session import Api, NotOneObject, Reply, Session, WrongType

__all__ = ["PROMPT", "GenerationChecks", "failure_text", "unreadable", "unreadable_text"]

PROMPT = "Write a long story about a river that runs past a mountain, a garden, a bridge and an old town."
REPLY_TOKENS = 16  # enough text to pick a stop word from, cheap on a managed API
LIMIT_TOKENS = 5  # the max_tokens check asks this few
SHAPE_ERRORS = (TypeError, AttributeError, KeyError, IndexError, ValueError)


def failure_text(session: Session, exc: BaseException) -> str:
    """An SDK error as one line: the HTTP status and the server's message, or the connection failure."""
    from openai import APIConnectionError, APIStatusError, APITimeoutError

    if isinstance(exc, WrongType):
        return session.scrub(f"{exc}; the latest: {session.last.text(session.secrets())}")[:360]
    if isinstance(exc, NotOneObject):
        return str(exc)
    if isinstance(exc, APIStatusError):
        return session.scrub(f"HTTP {exc.status_code}: {_message(exc.body) or exc.message}")[:300]
    if isinstance(exc, APITimeoutError):
        return "no answer within the timeout"
    if isinstance(exc, APIConnectionError):
        cause = exc.__cause__
        return session.scrub(f"connection failed: {cause or exc}")[:300]
    if isinstance(exc, SHAPE_ERRORS):  # the SDK does not check types: a reply of the wrong shape
        return unreadable_text(session, exc)
    return session.scrub(f"{type(exc).__name__}: {exc}")[:300]


def unreadable_text(session: Session, exc: BaseException) -> str:
    """What raised on an answer that could not be read, and what the latest answer was, on one line."""
    said = session.scrub(f"{type(exc).__name__}: {exc}")[:160]
    came = session.scrub(session.last.text(session.secrets()))[:200]
    return f"an answer this check could not read ({said}); the latest: {came}"


def unreadable(session: Session, name: str, required: bool, exc: Exception) -> CheckResult:
    """A check that raised on an answer it could not read (a field of the wrong type, a body of the wrong
    kind): a failed row saying what raised and what the latest answer was, instead of a traceback."""
    return CheckResult(name, "fail", unreadable_text(session, exc), required)


def _message(body: object) -> str | None:
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return None


def _usage(reply: Reply) -> str:
    u = reply.usage
    if u is None:
        return "no usage"
    return f"usage {u.prompt_tokens} + {u.completion_tokens}"


@dataclass
class GenerationChecks:
    """Runs the generation checks in order, keeping the replies later checks compare against."""

    session: Session
    chat_reply: Reply | None = None
    chat_stream: Reply | None = None

    async def _call(
        self, api: Api, max_tokens: int, *, stream: bool, stop: list[str] | None = None
    ) -> Reply | str:
        try:
            return await self.session.generate(api, PROMPT, max_tokens, stream=stream, stop=stop)
        except Exception as exc:  # the SDK's errors, and anything a broken server makes it raise
            return failure_text(self.session, exc)

    async def chat(self) -> CheckResult:
        reply = await self._call("chat", REPLY_TOKENS, stream=False)
        if isinstance(reply, str):
            return CheckResult("chat", "fail", reply, required=True)
        self.chat_reply = reply
        if not reply.text:
            return CheckResult("chat", "fail", f"a reply without text (finish {reply.finish_reason})", True)
        return CheckResult(
            "chat", "pass", f"{len(reply.text)} chars, finish {reply.finish_reason}, {_usage(reply)}", True
        )

    async def chat_streamed(self) -> CheckResult:
        reply = await self._call("chat", REPLY_TOKENS, stream=True)
        if isinstance(reply, str):
            return CheckResult("chat stream", "fail", reply, required=True)
        self.chat_stream = reply
        if reply.first_token_s is None:
            return CheckResult("chat stream", "fail", f"{reply.chunks} chunks and no text in any", True)
        if reply.finish_reason is None:
            return CheckResult("chat stream", "fail", "the stream ended without a finish_reason", True)
        why = f"{reply.chunks} chunks, finish {reply.finish_reason}, TTFT {reply.ttft_ms:.0f} ms"
        return CheckResult("chat stream", "pass", why, True, {measures.TTFT_MS: reply.ttft_ms})

    async def completions(self, stream: bool) -> CheckResult:
        name = "completions stream" if stream else "completions"
        reply = await self._call("completions", REPLY_TOKENS, stream=stream)
        if isinstance(reply, str):
            if reply.startswith(("HTTP 404", "HTTP 405")):
                return CheckResult(name, "n/a", f"{reply} (a chat-only server: use --api chat)")
            return CheckResult(name, "fail", reply)
        if not reply.text:
            return CheckResult(name, "fail", f"a reply without text (finish {reply.finish_reason})")
        return CheckResult(
            name, "pass", f"{len(reply.text)} chars, finish {reply.finish_reason}, {_usage(reply)}"
        )

    def usage_chunk(self) -> CheckResult:
        """The streamed usage is there, and counts what the same request counted without streaming."""
        name = "usage chunk"
        stream, whole = self.chat_stream, self.chat_reply
        if stream is None or whole is None:
            return CheckResult(name, "n/a", "needs both chat checks to pass", True)
        if not stream.usage_in_stream or stream.usage is None:
            return CheckResult(
                name,
                "fail",
                "no usage chunk in the stream (stream_options.include_usage ignored): ramp would estimate "
                "tokens from chunks",
                True,
            )
        if whole.usage is None:
            return CheckResult(name, "fail", "the non-streamed reply has no usage to compare with", True)
        a, b = stream.usage, whole.usage
        same = (a.prompt_tokens, a.completion_tokens) == (b.prompt_tokens, b.completion_tokens)
        figures: dict[str, object] = {
            "stream": [a.prompt_tokens, a.completion_tokens],
            "whole": [b.prompt_tokens, b.completion_tokens],
        }
        if same:
            return CheckResult(
                name, "pass", f"present and equal to the non-streamed usage ({_usage(stream)})", True, figures
            )
        if a.prompt_tokens == b.prompt_tokens and stream.finish_reason != whole.finish_reason:
            return CheckResult(
                name,
                "pass",
                f"present; prompt tokens equal ({a.prompt_tokens}), the replies differ "
                f"(finish {stream.finish_reason} vs {whole.finish_reason}: temperature 0 not deterministic)",
                True,
                figures,
            )
        return CheckResult(
            name,
            "fail",
            f"stream says {_usage(stream)}, the same request without streaming {_usage(whole)}",
            True,
            figures,
        )

    async def max_tokens(self) -> CheckResult:
        name = "max_tokens"
        reply = await self._call("chat", LIMIT_TOKENS, stream=False)
        if isinstance(reply, str):
            return CheckResult(name, "fail", reply, True)
        if reply.usage is None or reply.usage.completion_tokens is None:
            return CheckResult(name, "fail", "no usage: cannot tell how many tokens came back", True)
        got = reply.usage.completion_tokens
        if got > LIMIT_TOKENS:
            return CheckResult(name, "fail", f"asked for at most {LIMIT_TOKENS} tokens, got {got}", True)
        return CheckResult(
            name,
            "pass",
            f"asked {LIMIT_TOKENS}, got {got} (finish {reply.finish_reason})",
            True,
            {"tokens": got},
        )

    async def stop(self) -> CheckResult:
        """A word from the middle of the reference reply as the stop sequence: the same request then ends
        before it, with finish_reason "stop"."""
        name = "stop"
        ref = self.chat_reply
        words = [w for w in (ref.text.split() if ref is not None else []) if w.isalpha() and len(w) > 1]
        if ref is None or len(words) < 3:
            return CheckResult(name, "n/a", "the reference reply is too short to pick a stop word from")
        word = words[len(words) // 2]
        reply = await self._call("chat", REPLY_TOKENS, stream=False, stop=[word])
        if isinstance(reply, str):
            return CheckResult(name, "fail", f"stop=[{word!r}]: {reply}")
        if word in reply.text:
            return CheckResult(
                name, "fail", f"stop=[{word!r}] ignored: the reply contains it (finish {reply.finish_reason})"
            )
        if reply.finish_reason != "stop":
            return CheckResult(
                name,
                "n/a",
                f"stop=[{word!r}]: the reply never reached it (finish {reply.finish_reason}; not deterministic?)",
            )
        return CheckResult(
            name,
            "pass",
            f"stop=[{word!r}]: ended before it ({len(reply.text)} of {len(ref.text)} chars), finish stop",
        )

    def role_chunk(self) -> CheckResult:
        name = "role chunk"
        stream = self.chat_stream
        if stream is None:
            return CheckResult(name, "n/a", "needs the chat stream check to pass")
        if stream.first_role != "assistant":
            return CheckResult(
                name, "fail", f"the first chunk's delta has role {stream.first_role!r}, not 'assistant'"
            )
        if stream.first_content:
            return CheckResult(
                name, "pass", "the first chunk carries the role and text together (TTFT is that chunk)"
            )
        return CheckResult(
            name, "pass", "role-only first chunk; ramp times TTFT from the first chunk with text"
        )

    def reasoning(self) -> CheckResult:
        found = [
            r.reasoning_field
            for r in (self.chat_reply, self.chat_stream)
            if r is not None and r.reasoning_field
        ]
        if not found:
            return CheckResult(
                "reasoning",
                "n/a",
                "no reasoning_content / reasoning fields (not a reasoning model, or no parser)",
            )
        return CheckResult(
            "reasoning",
            "pass",
            f"'{found[0]}' present; ramp counts its text toward TTFT, not TTFAT (first answer token)",
        )
