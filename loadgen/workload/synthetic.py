"""The synthetic workload: turns a ``Profile``'s buckets into sessions of ``RequestSpec`` (prompts of the
asked token length, shared or unique prefixes, multi-turn sessions with a growing history), or, when the
profile replays a ``Source`` (a dataset, a trace, a request file), hands each session to
``loadgen.workload.replay``.

Every unique text starts with a few freshly drawn words, so two unique texts never share their first block
(no accidental prefix-cache hit), while a shared prefix is a pool slice chosen from (seed, group, index) only:
every worker process with the same seed and sizer builds byte-identical prefixes, so hits land across
workers.

A sizer with ``fit_context`` (``--fit-context``) clamps every request to the server's context: max_tokens
is lowered first (never below 1); a prompt that alone does not fit is shortened (its fresh part; a shared
prefix longer than the context is cut once, the same in every worker); a session ends before its history
alone would overflow. The draws are the same as without clamping: a request that fits is unchanged.
"""

from __future__ import annotations

import itertools
import random
from bisect import bisect_right

from loadgen.config import Api, chat_like
from loadgen.distributions import sample_seconds, sample_tokens
from loadgen.profile import Bucket, PrefixGroup, Profile
from loadgen.sources import Source
from loadgen.types import Outcome, RequestResult, RequestSpec
from loadgen.workload.probes import Probes
from loadgen.workload.replay import OneShot, Replay, RequestSession
from loadgen.workload.sizing import TRANSCRIPT_LABEL_TOKENS, PromptSizer, as_api
from loadgen.workload.text import FRESH_WORDS, VOCABULARY, TextPool, stable_offset, text_pool
from loadgen.workload.tools import MessageExtras, ToolRounds


class Workload:
    """Builds sessions of requests from a profile. One per worker process; not shared between threads.

    ``seed`` fixes the text pool and the shared prefixes: give every worker of a run the same seed (so prefix
    hits land across workers) and each worker its own ``rng`` in ``new_session`` (so unique texts differ).
    ``api`` overrides the profile's API (the command line may). ``worker``: this worker's number, which
    picks its share of a replayed source (``loadgen.workload.replay``).
    """

    def __init__(
        self,
        profile: Profile,
        sizer: PromptSizer,
        model: str,
        seed: int = 0,
        *,
        api: Api | None = None,
        worker: int = 0,
    ) -> None:
        self.profile = profile
        self.sizer = sizer
        self.model = model
        self.seed = seed
        self.api: Api = api or as_api(profile.api)
        tools = profile.tools
        offered = tools.extra_body(self.api) if tools is not None and chat_like(self.api) else ()
        self.extra_body = profile.sampling.extra_body() + offered
        self._pool = text_pool(seed)
        self._buckets = profile.buckets
        self._cum_weights = tuple(itertools.accumulate(b.weight for b in profile.buckets))
        self._groups: dict[str, PrefixGroup] = {g.name: g for g in profile.prefix_groups}
        self._prefix_tokens = {g.name: self._fitted_prefix(g.prefix_tokens) for g in profile.prefix_groups}
        self._next_session_id = 0
        self.source: Source | None = profile.replay
        self.replay = Replay(self, profile.replay, worker) if profile.replay is not None else None
        q = profile.quality
        self.probes = Probes(q, self.api, model, self.extra_body) if q is not None else None

    @property
    def pool(self) -> TextPool:
        return self._pool

    def _fitted_prefix(self, tokens: int) -> int:
        """A prefix's length, cut (with ``fit_context``) so that the template, one token of fresh text and
        one of reply still fit after it."""
        limit = self.sizer.fit_context
        if limit is None:
            return tokens
        sizer = self.sizer
        template = sizer.overhead_tokens + sizer.per_message_tokens + TRANSCRIPT_LABEL_TOKENS
        return max(1, min(tokens, limit - sizer.slack(limit) - template - 2))

    def prefix_tokens(self, group: str) -> int:
        """Tokens of each prefix of ``group`` (the profile's, or less when cut to fit the context)."""
        return self._prefix_tokens[group]

    def fit(self, target: int, new_tokens: int, max_tokens: int, floor: int) -> tuple[int, int, int] | None:
        """(target, new_tokens, max_tokens) of a request clamped to ``fit_context``: max_tokens first, down to
        1; then the fresh text, to no fewer than ``floor`` tokens. None when even that does not fit."""
        limit = self.sizer.fit_context
        if limit is None:
            return target, new_tokens, max_tokens
        room = limit - self.sizer.slack(min(target, limit))
        if target + max_tokens <= room:
            return target, new_tokens, max_tokens
        if target + 1 <= room:
            return target, new_tokens, room - target
        cut = target + 1 - room
        if new_tokens - cut < floor:
            return None
        return target - cut, new_tokens - cut, 1

    def choose_bucket(self, rng: random.Random) -> Bucket:
        x = rng.random() * self._cum_weights[-1]
        return self._buckets[min(bisect_right(self._cum_weights, x), len(self._buckets) - 1)]

    def shared_prefix(self, group: str, index: int) -> str:
        """The text of prefix ``index`` of ``group``: identical in every process with the same seed and sizer."""
        words = self.sizer.words_for(self._prefix_tokens[group])
        return self._pool.window(stable_offset(self.seed, group, index), words)

    def unique_text(self, rng: random.Random, words: int) -> str:
        """Random text of ``words`` words whose first words are drawn fresh (so no two share a first block)."""
        lead = " ".join(rng.choices(VOCABULARY, k=min(words, FRESH_WORDS)))
        if words <= FRESH_WORDS:
            return lead
        return lead + " " + self._pool.window(rng.randrange(self._pool.size), words - FRESH_WORDS)

    def new_session(self, rng: random.Random, session_id: int | None = None) -> RequestSession:
        if session_id is None:
            session_id = self._next_session_id
            self._next_session_id += 1
        if self.probes is not None and self.probes.due():
            return OneShot(self.probes.next_spec(session_id))
        if self.replay is not None:
            return self.replay.next_session(rng, session_id)
        return Session(self, rng, session_id)

    def schedule(self) -> tuple[tuple[float, int], ...] | None:
        """(seconds on the source's clock, item) of this worker's arrivals when the source has its own
        times (a trace, a request file); None: arrivals come from the rate."""
        return self.replay.schedule() if self.replay is not None else None

    def scheduled_session(self, item: int, rng: random.Random, session_id: int) -> RequestSession:
        """The session of item ``item`` of a scheduled source."""
        assert self.replay is not None
        return self.replay.session(item, rng, session_id)

    def time_scale(self, rate_rps: float) -> float:
        """The time scale an open-loop rate stands for when replaying a schedule (1.0 without one)."""
        return self.replay.time_scale(rate_rps) if self.replay is not None else 1.0


class Session:
    """One user: a single request, or a multi-turn conversation whose history is resent each turn.

    Protocol: ``spec = next_request()`` (None when over), send it, ``on_result(result)``, wait
    ``think_time_s``, repeat. Turns are numbered from 0. A multi-turn session ends early when a turn fails or
    is cancelled (a real agent would not continue on a broken history), or before a turn that would exceed
    ``[session] max_context_tokens``. If ``next_request`` is called again without ``on_result``, the missing
    reply is stood in for by random text of ``max_tokens`` tokens.
    """

    __slots__ = (
        "workload",
        "rng",
        "session_id",
        "bucket",
        "turns",
        "turn",
        "think_time_s",
        "done",
        "_multi",
        "_prefix",
        "_prefix_tokens",
        "_system_prefix",
        "_history",
        "_transcript",
        "_context_tokens",
        "_pending",
        "_tools",
        "_extras",
        "_tool_requests",
    )

    def __init__(self, workload: Workload, rng: random.Random, session_id: int) -> None:
        self.workload = workload
        self.rng = rng
        self.session_id = session_id
        self.bucket = workload.choose_bucket(rng)
        spec = workload.profile.session
        self.turns = sample_tokens(spec.turns, rng) if spec is not None else 1
        self._multi = spec is not None
        self.turn = 0  # index of the next request
        self.think_time_s = 0.0
        self.done = False
        self._prefix = ""
        self._prefix_tokens = 0
        group = self.bucket.prefix_group
        if group is not None:
            g = workload._groups[group]
            self._prefix_tokens = workload.prefix_tokens(group)
            if self.bucket.cache == "miss":
                self._prefix = workload.unique_text(rng, workload.sizer.words_for(self._prefix_tokens))
            else:
                self._prefix = workload.shared_prefix(group, rng.randrange(g.count))
        # Chat: the prefix is its own system message, or (prefix_role = "user") opens the first user message.
        self._system_prefix = bool(self._prefix) and workload.profile.prefix_role == "system"
        self._history: list[tuple[str, str]] = [("system", self._prefix)] if self._system_prefix else []
        self._transcript = self._prefix  # completions API: the running prompt text
        self._context_tokens = 0.0  # estimated prompt tokens of the last request plus its reply
        self._pending: RequestSpec | None = None
        tools = workload.profile.tools
        # answering tool calls: a multi-turn chat-like session whose profile offers tools (loadgen.workload.tools)
        self._tools = (
            ToolRounds(tools) if tools is not None and self._multi and chat_like(workload.api) else None
        )
        self._extras: MessageExtras = []
        self._tool_requests = 0  # requests that answered tool calls: not user turns

    def next_request(self) -> RequestSpec | None:
        if self._pending is not None and self._multi:
            self._add_reply(
                None, self._pending.max_tokens, self._pending.input_tokens_target, self._pending.max_tokens
            )
        self._pending = None
        if self._tools is not None and self._tools.pending and not self.done:
            return self._tool_round(self._tools)
        if self.done or self.turn - self._tool_requests >= self.turns:
            self.done = True
            return None
        w = self.workload
        sizer = w.sizer
        rng = self.rng
        new_tokens = sample_tokens(self.bucket.input, rng)
        max_tokens = sample_tokens(self.bucket.output, rng)
        chat = chat_like(w.api)
        if self.turn == 0:
            overhead = sizer.overhead_tokens + (
                sizer.per_message_tokens if self._system_prefix and chat else 0
            )
            target = self._prefix_tokens + new_tokens
        else:
            overhead = sizer.per_message_tokens if chat else TRANSCRIPT_LABEL_TOKENS
            target = int(round(self._context_tokens)) + new_tokens
            limit = w.profile.session.max_context_tokens if w.profile.session else None
            if limit is not None and target + max_tokens > limit:
                self.done = True
                return None
        if self._multi and not chat and self.turn == 0:
            overhead += TRANSCRIPT_LABEL_TOKENS
        fitted = w.fit(target, new_tokens, max_tokens, floor=overhead + 1)
        if fitted is None:  # the history alone fills the context
            self.done = True
            return None
        target, new_tokens, max_tokens = fitted
        messages, prompt = self._shape(w.unique_text(rng, sizer.words_for(max(1, new_tokens - overhead))))
        spec = RequestSpec(
            api=w.api,
            model=w.model,
            max_tokens=max_tokens,
            messages=messages,
            prompt=prompt,
            input_tokens_target=target,
            bucket=self.bucket.name,
            prefix_group=self.bucket.prefix_group,
            cache_class=self.bucket.cache,
            session_id=self.session_id,
            turn=self.turn,
            keep_text=self._multi,
            extra_body=w.extra_body,
            message_extras=tuple(self._extras),
        )
        self.turn += 1
        self._pending = spec
        return spec

    def _tool_round(self, tools: ToolRounds) -> RequestSpec | None:
        """The request that answers the last reply's tool calls: the history as it stands (the calls and
        their canned results last), no new user text."""
        w = self.workload
        max_tokens = sample_tokens(self.bucket.output, self.rng)
        target = int(round(self._context_tokens))
        limit = w.profile.session.max_context_tokens if w.profile.session else None
        spec = None
        if limit is None or target + max_tokens <= limit:
            spec = tools.request(
                w,
                tuple(self._history),
                self._extras,
                target,
                max_tokens,
                bucket=self.bucket.name,
                session_id=self.session_id,
                turn=self.turn,
                prefix_group=self.bucket.prefix_group,
                cache_class=self.bucket.cache,
            )
        if spec is None:
            self.done = True
            return None
        self.turn += 1
        self._tool_requests += 1
        self._pending = spec
        return spec

    def _shape(self, body: str) -> tuple[tuple[tuple[str, str], ...], str]:
        """(messages, prompt) of this turn around its fresh ``body``: chat history or completions transcript."""
        if chat_like(self.workload.api):
            if self.turn == 0 and self._prefix and not self._system_prefix:
                body = f"{self._prefix}\n\n{body}"
            self._history.append(("user", body))
            messages = tuple(self._history)
            if not self._multi:
                self._history.pop()
            return messages, ""
        if self._multi:
            self._transcript = (
                f"{self._transcript}\n\nUser: {body}\n\nAssistant:"
                if self._transcript
                else f"User: {body}\n\nAssistant:"
            )
            return (), self._transcript
        return (), f"{self._prefix}\n\n{body}" if self._prefix else body

    def on_result(self, result: RequestResult) -> None:
        spec = self._pending
        self._pending = None
        self.think_time_s = 0.0
        if spec is None:
            return
        if result.outcome is not Outcome.OK:
            self.done = True
            return
        if self._tools is not None:
            added = self._tools.on_reply(result, self._history, self._extras)
            if added is not None:  # the next request answers its tool calls
                prompt = result.input_tokens if result.input_tokens is not None else spec.input_tokens_target
                per_message = self.workload.sizer.per_message_tokens
                calls = len(result.tool_calls)
                self._context_tokens = prompt + result.output_tokens + per_message * (1 + calls) + added / 4
                return
        if self.turn - self._tool_requests >= self.turns:
            self.done = True
            return
        if self._multi:
            prompt_tokens = (
                result.input_tokens if result.input_tokens is not None else spec.input_tokens_target
            )
            self._add_reply(
                result.output_text, result.output_tokens or spec.max_tokens, prompt_tokens, spec.max_tokens
            )
            session_spec = self.workload.profile.session
            assert session_spec is not None
            self.think_time_s = sample_seconds(session_spec.think_time_s, self.rng)

    def _add_reply(self, text: str | None, output_tokens: int, prompt_tokens: float, max_tokens: int) -> None:
        if text is None:
            text = self.workload.unique_text(
                self.rng, self.workload.sizer.words_for(output_tokens or max_tokens)
            )
        if chat_like(self.workload.api):
            self._history.append(("assistant", text))
            self._context_tokens = prompt_tokens + output_tokens + self.workload.sizer.per_message_tokens
        else:
            self._transcript = f"{self._transcript} {text}"
            self._context_tokens = prompt_tokens + output_tokens
