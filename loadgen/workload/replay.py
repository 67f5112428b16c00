"""Sessions replayed from a ``Source`` instead of drawn from the profile's buckets: a dataset's
conversations (turn by turn, history resent), a trace's arrivals (prompts of the traced lengths, with the
traced prefix blocks) and a saved request file's requests (sent as they were).

Each worker replays its share of the source: items ``i, i + workers, ...`` for worker ``i``, in order, or,
for a dataset with ``sampling = "random"``, any record drawn with the session's seeded generator. A
sequential share wraps around when it runs out (a closed loop never idles); a scheduled source in open loop
(``Replay.schedule``) sends each of its items once, at its own time.

Multi-turn history (datasets): ``history = "recorded"`` (the default) resends the dataset's recorded replies
as the assistant's turns, so every server is sent the same prompts whatever it answered; ``"server"``
resends the server's own replies (a real user's conversation; the prompts then differ from server to
server). A reply that is missing (none recorded, or the server's text not kept) is stood in for by random
text of the turn's output length. A turn's ``max_tokens``: ``[dataset] max_tokens`` when given; else, with
``use_output_len`` (the default), the record's own ``max_tokens`` or its recorded reply's length in tokens
(estimated with the run's prompt sizer); else the profile's bucket output distribution.

Tool calls (a chat-like profile with ``[tools]``): a conversation answers its replies' tool calls as a
synthetic session does (``loadgen.workload.tools``): the next request resends the history with the
assistant's ``tool_calls`` and one ``tool`` message per call (the canned ``[tools] result``), no new user
text, at once, up to ``max_rounds`` in a row; then the turn's reply (recorded, or the server's) follows
and the conversation goes on with its next user turn. Tool rounds keep the turn's ``max_tokens``.

With ``--fit-context`` a dataset turn's ``max_tokens`` is lowered to fit the server's context (its recorded
text is never cut: a turn whose prompt alone does not fit ends the session); a trace's prompt is shortened
like a synthetic one.

Traces: a prompt of ``input_length`` tokens opens with one block of ``block_tokens`` tokens per hash id (the
block's text chosen from (seed, id) only, so requests that share ids share a prefix and the server's prefix
cache hits), then fresh text; ``output_length`` is sent as ``max_tokens``.
"""

from __future__ import annotations

import random
import zlib
from typing import TYPE_CHECKING, Protocol

from loadgen.config import chat_like
from loadgen.distributions import sample_seconds, sample_tokens
from loadgen.sources import Conversation, DialogTurn, RecordedRequest, Source, TraceEntry
from loadgen.types import Outcome, RequestResult, RequestSpec
from loadgen.workload.text import stable_offset
from loadgen.workload.tools import MessageExtras, ToolRounds

if TYPE_CHECKING:
    from loadgen.workload.synthetic import Workload


class RequestSession(Protocol):
    """What the load loops drive: ``next_request`` (None when over), send, ``on_result``, ``think_time_s``."""

    think_time_s: float

    def next_request(self) -> RequestSpec | None: ...

    def on_result(self, result: RequestResult) -> None: ...


class OneShot:
    """A session of one request (a trace arrival, a recorded request), or of none (it did not fit)."""

    def __init__(self, spec: RequestSpec | None) -> None:
        self.spec = spec
        self.think_time_s = 0.0

    def next_request(self) -> RequestSpec | None:
        spec, self.spec = self.spec, None
        return spec

    def on_result(self, result: RequestResult) -> None:
        self.think_time_s = 0.0


class Replay:
    """One worker's share of a ``Source`` and the sessions it makes of it."""

    def __init__(self, workload: Workload, source: Source, worker: int) -> None:
        self.workload = workload
        self.source = source
        n = max(1, source.workers)
        self.share: tuple[int, ...] = tuple(range(worker % n, source.count, n)) or tuple(range(source.count))
        self.next = 0
        dataset = source.dataset
        self.random = dataset is not None and dataset.sampling == "random"

    def schedule(self) -> tuple[tuple[float, int], ...] | None:
        """(seconds on the source's clock, item) of this worker's share, for a scheduled source."""
        if not self.source.scheduled:
            return None
        offsets = self.source.offsets_s()
        return tuple((offsets[i], i) for i in self.share)

    def time_scale(self, rate_rps: float) -> float:
        """The time scale an open-loop rate (this worker's share of it) stands for: rate / base rate."""
        return max(1e-9, rate_rps * max(1, self.source.workers) / self.source.base_rate_rps)

    def next_session(self, rng: random.Random, session_id: int) -> RequestSession:
        if self.random:
            index = rng.randrange(self.source.count)
        else:
            index = self.share[self.next % len(self.share)]
            self.next += 1
        return self.session(index, rng, session_id)

    def session(self, index: int, rng: random.Random, session_id: int) -> RequestSession:
        source = self.source
        if source.kind == "dataset":
            return DialogSession(self.workload, source.conversations[index], rng, session_id)
        if source.kind == "trace":
            return OneShot(trace_request(self.workload, source, source.entries[index], rng, session_id))
        return OneShot(recorded_request(self.workload, source.requests[index]))


def trace_request(
    w: Workload, source: Source, entry: TraceEntry, rng: random.Random, session_id: int
) -> RequestSpec | None:
    sizer = w.sizer
    overhead = sizer.overhead_tokens
    fitted = w.fit(entry.input_tokens, entry.input_tokens, entry.output_tokens, floor=overhead + 1)
    if fitted is None:
        return None
    target, _, max_tokens = fitted
    words = sizer.words_for(max(1, target - overhead))
    block_words = sizer.words_for(source.trace.block_tokens if source.trace is not None else 512)
    parts: list[str] = []
    for block in entry.hash_ids:
        if words <= 0:
            break
        take = min(block_words, words)
        parts.append(w.pool.window(stable_offset(w.seed, "block", block), take))
        words -= take
    if words > 0:
        parts.append(w.unique_text(rng, words))
    text = " ".join(parts)
    chat = chat_like(w.api)
    return RequestSpec(
        api=w.api,
        model=w.model,
        max_tokens=max_tokens,
        messages=(("user", text),) if chat else (),
        prompt="" if chat else text,
        input_tokens_target=target,
        bucket="trace",
        prefix_group="trace" if entry.hash_ids else None,
        session_id=zlib.crc32(entry.session.encode()) if entry.session is not None else session_id,
        extra_body=w.extra_body,
    )


def recorded_request(w: Workload, request: RecordedRequest) -> RequestSpec:
    return RequestSpec(
        api=request.api,
        model=w.model,
        max_tokens=request.max_tokens,
        messages=request.messages,
        prompt=request.prompt,
        input_tokens_target=request.input_tokens_target,
        bucket="requests",
        session_id=request.session,
        turn=request.turn,
        extra_body=w.extra_body,
    )


class DialogSession:
    """A dataset conversation, replayed turn by turn with its history resent (module docstring)."""

    def __init__(self, workload: Workload, conversation: Conversation, rng: random.Random, session_id: int):
        self.workload = workload
        self.conversation = conversation
        self.rng = rng
        self.session_id = session_id
        dataset = workload.source.dataset if workload.source is not None else None
        self.server_history = dataset is not None and dataset.history == "server"
        self.turn = 0
        self.think_time_s = 0.0
        self.done = False
        system = conversation.system
        self.history: list[tuple[str, str]] = [("system", system)] if system else []
        self.transcript = system
        self.pending: tuple[DialogTurn, int] | None = None  # the turn sent, and its max_tokens
        tools = workload.profile.tools
        self.tools = ToolRounds(tools) if tools is not None and chat_like(workload.api) else None
        self.extras: MessageExtras = []  # the tool rounds' extra message keys (RequestSpec.message_extras)
        self.answering: tuple[DialogTurn, int] | None = None  # the turn whose tool calls the next answers
        self.requests = 0  # requests sent: a tool round is one too (RequestSpec.turn)

    def next_request(self) -> RequestSpec | None:
        if self.pending is not None:  # sent without on_result: the recorded reply (or a stand-in) follows
            self.add_reply(None)
        if self.tools is not None and self.tools.pending and not self.done:
            return self.tool_round(self.tools)
        turns = self.conversation.turns
        if self.done or self.turn >= len(turns):
            self.done = True
            return None
        w = self.workload
        turn = turns[self.turn]
        max_tokens = self.max_tokens(turn)
        messages, prompt, words = self.shape(turn.user)
        target = self.target(words, len(messages))
        fitted = w.fit(
            target, target, max_tokens, floor=target
        )  # recorded text is never cut: only max_tokens
        if fitted is None:
            self.done = True
            return None
        spec = RequestSpec(
            api=w.api,
            model=w.model,
            max_tokens=fitted[2],
            messages=messages,
            prompt=prompt,
            input_tokens_target=target,
            bucket="dataset",
            session_id=self.session_id,
            turn=self.requests,
            # a reply's tool calls are read only from a reply whose text is kept
            keep_text=self.tools is not None or (self.server_history and self.turn + 1 < len(turns)),
            extra_body=w.extra_body,
            message_extras=tuple(self.extras),
        )
        self.pending = (turn, fitted[2])
        self.turn += 1
        self.requests += 1
        return spec

    def target(self, words: int, messages: int) -> int:
        """The prompt's estimated tokens: its words, the template's overhead, each message's."""
        sizer = self.workload.sizer
        return int(
            round(
                sizer.tokens_for_words(words)
                + sizer.overhead_tokens
                + sizer.per_message_tokens * (messages - 1)
            )
        )

    def tool_round(self, tools: ToolRounds) -> RequestSpec | None:
        """The request that answers the last reply's tool calls: the history as it stands (the calls and
        their canned results last), no new user text, the turn's ``max_tokens``."""
        assert self.answering is not None
        turn, max_tokens = self.answering
        self.answering = None
        w = self.workload
        messages = tuple(self.history)
        target = self.target(sum(len(text.split()) for _, text in messages), len(messages))
        spec = tools.request(
            w,
            messages,
            self.extras,
            target,
            max_tokens,
            bucket="dataset",
            session_id=self.session_id,
            turn=self.requests,
        )
        if spec is None:  # the calls and results filled the context: the conversation ends here
            self.done = True
            return None
        self.pending = (turn, spec.max_tokens)
        self.requests += 1
        return spec

    def shape(self, user: str) -> tuple[tuple[tuple[str, str], ...], str, int]:
        """(messages, prompt, words of text) of this turn, the history before it included."""
        if chat_like(self.workload.api):
            self.history.append(("user", user))
            return tuple(self.history), "", sum(len(text.split()) for _, text in self.history)
        if self.conversation.raw and not self.transcript:
            self.transcript = user
        else:
            opening = f"{self.transcript}\n\n" if self.transcript else ""
            self.transcript = f"{opening}User: {user}\n\nAssistant:"
        return (), self.transcript, len(self.transcript.split())

    def max_tokens(self, turn: DialogTurn) -> int:
        w = self.workload
        dataset = w.source.dataset if w.source is not None else None
        if dataset is not None and dataset.max_tokens is not None:
            return dataset.max_tokens
        if dataset is None or dataset.use_output_len:
            if turn.max_tokens is not None:
                return turn.max_tokens
            if turn.reply:
                return max(1, int(round(w.sizer.tokens_for_words(len(turn.reply.split())))))
        return sample_tokens(w.choose_bucket(self.rng).output, self.rng)

    def on_result(self, result: RequestResult) -> None:
        self.think_time_s = 0.0
        if self.pending is None:
            return
        if result.outcome is not Outcome.OK:
            self.pending = None
            self.done = True
            return
        if self.tools is not None and self.tools.on_reply(result, self.history, self.extras) is not None:
            self.answering, self.pending = self.pending, None  # the next request answers the calls, at once
            return
        self.add_reply(result.output_text if self.server_history else None)
        spec = self.workload.profile.session
        if spec is not None and self.turn < len(self.conversation.turns):
            self.think_time_s = sample_seconds(spec.think_time_s, self.rng)

    def add_reply(self, server_text: str | None) -> None:
        assert self.pending is not None
        turn, max_tokens = self.pending
        self.pending = None
        text = server_text or turn.reply
        if text is None:
            text = self.workload.unique_text(self.rng, self.workload.sizer.words_for(max_tokens))
        if chat_like(self.workload.api):
            self.history.append(("assistant", text))
        else:
            self.transcript = f"{self.transcript} {text}"


__all__ = ["DialogSession", "OneShot", "Replay", "RequestSession"]
