"""A multi-turn session that answers tool calls (the agentic shape): when a turn's reply calls tools, the
next request carries the assistant message with its ``tool_calls`` and one ``role: "tool"`` message per call
(its ``tool_call_id``, the profile's canned ``[tools] result``), and no new user text: the model goes on from
the results. At most ``[tools] max_rounds`` such rounds in a row; past them the session goes on to its next
user turn (or ends), as an agent loop with a step cap does. Tool rounds are requests of the same user turn:
they do not use up the session's ``turns``, and go out at once (no think time: the agent, not the user, answers).

``ToolRounds`` keeps one session's count and writes the round into its history (chat's shape, the extra keys
in ``RequestSpec.message_extras``; ``loadgen.tool_messages`` turns it into Responses input items).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loadgen.profile import Tools
from loadgen.tool_messages import assistant_tool_calls
from loadgen.types import RequestResult, RequestSpec

if TYPE_CHECKING:
    from loadgen.workload.synthetic import Workload

__all__ = ["MessageExtras", "ToolRounds"]

# The extra keys of some messages, by index in the history (RequestSpec.message_extras' shape)
MessageExtras = list[tuple[int, tuple[tuple[str, object], ...]]]


class ToolRounds:
    """One session's tool rounds: whether its next request answers tool calls, and how many in a row."""

    __slots__ = ("tools", "in_a_row", "pending", "answered")

    def __init__(self, tools: Tools) -> None:
        self.tools = tools
        self.in_a_row = 0  # tool rounds since the last user turn
        self.pending = False  # the next request answers the last reply's tool calls
        self.answered = 0  # tool rounds sent in the whole session

    def on_reply(
        self, result: RequestResult, history: list[tuple[str, str]], extras: MessageExtras
    ) -> int | None:
        """After a successful reply: when it called tools and the cap allows one more round, append the
        assistant message with its calls and a tool message per call to ``history`` (their extra keys to
        ``extras``) and return the canned results' size in characters; else None (the reply is added as
        usual by the caller)."""
        calls = result.tool_calls
        if not calls or self.in_a_row >= self.tools.max_rounds:
            self.in_a_row = 0
            self.pending = False
            return None
        history.append(("assistant", result.output_text or ""))
        extras.append((len(history) - 1, (("tool_calls", assistant_tool_calls(calls)),)))
        for call in calls:
            history.append(("tool", self.tools.result))
            extras.append((len(history) - 1, (("tool_call_id", call.id),)))
        self.in_a_row += 1
        self.answered += 1
        self.pending = True
        return len(self.tools.result) * len(calls)

    def request(
        self,
        w: Workload,
        messages: tuple[tuple[str, str], ...],
        extras: MessageExtras,
        target: int,
        max_tokens: int,
        *,
        bucket: str,
        session_id: int,
        turn: int,
        prefix_group: str | None = None,
        cache_class: str | None = None,
    ) -> RequestSpec | None:
        """The round's request (a synthetic session's or a replayed conversation's): ``messages`` as they
        stand, no new user text, ``max_tokens`` lowered to fit the context (the history is never cut);
        None when the history alone fills it (the session ends)."""
        fitted = w.fit(target, 0, max_tokens, floor=0)
        if fitted is None:
            return None
        self.sent()
        return RequestSpec(
            api=w.api,
            model=w.model,
            messages=messages,  # the history with the calls and their results last
            message_extras=tuple(extras),
            keep_text=True,  # the reply may call tools again
            max_tokens=fitted[2],
            input_tokens_target=target,
            extra_body=w.extra_body,
            session_id=session_id,
            turn=turn,
            bucket=bucket,
            prefix_group=prefix_group,
            cache_class=cache_class,
        )

    def sent(self) -> None:
        """The round's request was built: the next one is a user turn unless its reply calls tools again."""
        self.pending = False
