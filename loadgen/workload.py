"""The workload: turns a ``Profile`` into a stream of ``RequestSpec`` (prompts of the asked token length,
shared or unique prefixes, multi-turn sessions with a growing history).

Text is made of ordinary English words from a fixed vocabulary in this module (no downloads). Each
``Workload`` owns a seeded pool of random words joined into one string; a prompt is a slice of it, so making
a 16k-token prompt costs a string copy, not 12k random draws (``benchmarks/bench_workload.py`` prints the cost).
Every unique text starts with a few freshly drawn words, so two unique texts never share their first block
(no accidental prefix-cache hit), while a shared prefix is a pool slice chosen from (seed, group, index) only:
every worker process with the same seed and sizer builds byte-identical prefixes, so hits land across
workers.

Token lengths come from a ``PromptSizer``: words per token and the chat template's overhead, fitted to the
server's ``/tokenize`` by ``calibrate_sizer`` or, when the server has none, estimated (``exact=False``).
A sizer with ``fit_context`` (``--fit-context``) clamps every request to the server's context: max_tokens
is lowered first (never below 1); a prompt that alone does not fit is shortened (its fresh part; a shared
prefix longer than the context is cut once, the same in every worker); a session ends before its history
alone would overflow. The draws are the same as without clamping: a request that fits is unchanged.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import random
from array import array
from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass

from loadgen.config import APIS, Api
from loadgen.distributions import sample_seconds, sample_tokens
from loadgen.profile import Bucket, PrefixGroup, Profile
from loadgen.target.tokenize import TokenizeError, count_tokens, tokenize_body, tokenize_client, tokenize_url
from loadgen.types import Outcome, RequestResult, RequestSpec, Target

# About 400 common English words, mostly one token each in current BPE vocabularies (with the leading space).
VOCABULARY: tuple[str, ...] = tuple(
    dict.fromkeys(
        """
    the of and to in is was for on that with as by at from it his an are were which this be or had not but
    their has have one also its new after first who two they her been other when there all into more time
    during would she only over most some can years city later about such between many where then may than
    school these world under state both part year while people through made him team well used several three
    because well known found any each called number however until before since work will what early name
    against them second series high three small large family life could song water group area based local
    music season house film game story place north south east west river road town village station church
    line power army party war country history book letter table market order point light level field form
    child mother father brother sister friend woman man person member leader player writer teacher doctor
    student worker king queen lord judge officer captain farmer driver artist author singer actor engineer
    garden forest island mountain valley lake ocean beach desert bridge tower castle palace museum library
    hospital office street square park hall room door window wall floor roof kitchen table chair bed lamp
    paper pen glass plate cup bottle box bag coat shirt shoe hat ring watch phone camera radio picture
    morning evening night summer winter spring autumn today moment hour minute week month century period
    red blue green white black yellow brown grey dark bright warm cold hot cool soft hard strong weak quick
    slow long short tall low wide narrow deep heavy light clean fresh simple clear quiet loud happy kind
    good better best great little old young big different important public real free full special whole
    close open common certain recent private similar possible popular main major final general national
    natural social human political economic cultural medical legal physical central modern ancient average
    make take give find keep leave bring begin show hear play run move live believe hold turn start seem
    help talk feel try call ask need become write read learn speak spend grow win offer remember consider
    appear buy wait serve die send expect build stay fall cut reach kill remain suggest raise pass sell
    decide return explain hope develop carry break receive agree support hit produce eat cover catch draw
    choose cause follow change watch create walk travel visit plan answer report design manage share train
    idea fact case week company system program question government problem service hand eye job word
    business issue side kind head fire nature money street month night student lot right study book job
    word business side point home room mother area money story fact month lot right study book eye job
    reason result method process theory energy health science nature method report rate rule model price
    cost value size type sort range stage event effect action piece trade chance choice record voice view
    food bread rice fruit apple orange coffee tea milk sugar salt meat fish chicken egg cheese butter soup
    horse dog cat bird cow sheep animal tree flower grass leaf stone sand rock metal wood gold silver iron
    cloud rain snow wind storm sun moon star sky earth ground air wave fire smoke heat noise sound song
    very often never always sometimes usually again still already soon almost nearly quite rather just
    here there everywhere together away back down forward ahead inside outside above below near far
    """.split()
    )
)

FRESH_WORDS = 8  # freshly drawn words that open every unique text: a first block no other prompt shares
POOL_WORDS = 1 << 17  # 131,072 words (~900 KB of text): larger than any single prompt slice we expect

# Fallback when the server has no /tokenize: the usual rule of thumb for English (~0.75 words per token);
# chat overhead is a typical Llama-3 / ChatML template (BOS + generation prompt, ~5 tokens per message).
FALLBACK_WORDS_PER_TOKEN = 0.75
FALLBACK_OVERHEAD: Mapping[str, tuple[int, int]] = {"chat": (8, 5), "completions": (1, 0)}
TRANSCRIPT_LABEL_TOKENS = 4  # "\n\nUser: " / "\n\nAssistant:" in a completions-API session transcript

CALIBRATION_PASSES = 3  # the long calibration text holds the vocabulary this many times


# ---------------------------------------------------------------------------------------------- sizing


@dataclass(frozen=True, slots=True)
class PromptSizer:
    """How many words make N tokens on this server, and what the request's template adds.

    A one-message request of ``w`` words counts ``w / words_per_token + overhead_tokens`` prompt tokens; each
    further message adds ``per_message_tokens``. Frozen and small: the controller calibrates it once and every
    worker process receives a pickled copy.
    """

    words_per_token: float
    overhead_tokens: int = 0
    per_message_tokens: int = 0
    exact: bool = False  # True when fitted to the server's /tokenize
    api: Api = "chat"
    note: str = ""  # where the numbers came from, e.g. "estimate: /tokenize returned HTTP 404"
    fit_context: int | None = None  # --fit-context: every request clamped to fit this many tokens

    @classmethod
    def estimate(cls, api: Api, note: str = "estimate") -> PromptSizer:
        overhead, per_message = FALLBACK_OVERHEAD.get(api, (0, 0))
        return cls(FALLBACK_WORDS_PER_TOKEN, overhead, per_message, exact=False, api=api, note=note)

    def words_for(self, tokens: float) -> int:
        return max(1, int(round(tokens * self.words_per_token)))

    def tokens_for_words(self, words: int) -> float:
        return words / self.words_per_token

    @property
    def per_turn_tokens(self) -> int:
        """Template tokens a session turn adds to the history besides its text (chat: the reply's message)."""
        return self.per_message_tokens if self.api == "chat" else 0

    def slack(self, tokens: int) -> int:
        """Tokens kept free when a request of ``tokens`` estimated prompt tokens is clamped to fit: random
        words' token counts vary (at most ~0.5 token per word: 2·√N is four standard deviations), and an
        estimated sizer may be off by a tenth."""
        margin = 2.0 * math.sqrt(max(0, tokens))
        if not self.exact:
            margin += 0.1 * tokens
        return int(math.ceil(margin))


def as_api(value: str) -> Api:
    """``value`` as the closed set of APIs (profiles are validated, so anything else is a bug)."""
    for api in APIS:
        if value == api:
            return api
    raise ValueError(f"unknown api {value!r}: use one of {', '.join(APIS)}")


def _vocabulary_passes(passes: int) -> str:
    """Every vocabulary word exactly ``passes`` times (each pass shuffled with a fixed seed)."""
    rng = random.Random(passes)
    words: list[str] = []
    for _ in range(passes):
        block = list(VOCABULARY)
        rng.shuffle(block)
        words.extend(block)
    return " ".join(words)


async def calibrate_sizer(target: Target, model: str, api: Api) -> PromptSizer:
    """Fit words-per-token and the template overhead to the server's ``POST /tokenize``.

    The two sample texts hold every vocabulary word once and three times. Prompts draw words uniformly
    from the vocabulary, so the difference of the two counts is exactly the mean tokens per prompt word
    (for tokenizers that split on spaces first, as BPE ones do), with no sampling noise; the rest of the
    first count is the template overhead. Chat makes a third call (a system + user pair) for the cost of
    an extra message. When /tokenize is absent or fails (404/405, connection error, a reply without a
    count) this returns ``PromptSizer.estimate`` with ``exact=False`` and the reason in ``note``; it never
    raises for a server problem.
    """
    url = tokenize_url(target)
    short_words, long_words = len(VOCABULARY), CALIBRATION_PASSES * len(VOCABULARY)
    short, long = _vocabulary_passes(1), _vocabulary_passes(CALIBRATION_PASSES)
    try:
        async with tokenize_client(target, 30.0, connect_timeout_s=target.connect_timeout_s) as client:
            if api == "chat":

                def chat(*messages: tuple[str, str]) -> dict[str, object]:
                    return tokenize_body(model, messages=messages, add_generation_prompt=True)

                c_short = await count_tokens(client, url, chat(("user", short)))
                c_long = await count_tokens(client, url, chat(("user", long)))
                c_pair = await count_tokens(client, url, chat(("system", short), ("user", short)))
            else:
                c_short = await count_tokens(client, url, tokenize_body(model, short))
                c_long = await count_tokens(client, url, tokenize_body(model, long))
                c_pair = None
    except TokenizeError as exc:
        return PromptSizer.estimate(api, note=f"estimate: {exc}")
    tokens_per_word = (c_long - c_short) / (long_words - short_words)
    if tokens_per_word <= 0:
        return PromptSizer.estimate(api, note=f"estimate: {url} counts did not grow with the text")
    overhead = c_short - tokens_per_word * short_words
    per_message = 0.0
    if c_pair is not None:
        # Some templates add a default system prompt only when none is given: clamp, never negative.
        per_message = c_pair - overhead - 2 * tokens_per_word * short_words
    return PromptSizer(
        words_per_token=1.0 / tokens_per_word,
        overhead_tokens=max(0, int(round(overhead))),
        per_message_tokens=max(0, int(round(per_message))),
        exact=True,
        api=api,
        note=f"fitted to {url}",
    )


# ---------------------------------------------------------------------------------------------- text


class TextPool:
    """Seeded random words joined once; any window of words is one slice of one string."""

    __slots__ = ("size", "text", "starts")

    def __init__(self, seed: int, size: int = POOL_WORDS) -> None:
        words = random.Random(f"llm-ramp-pool:{seed}").choices(VOCABULARY, k=size)
        doubled = words + words  # a window that runs past the end continues from the start, in one slice
        self.size = size
        self.text = " ".join(doubled)
        self.starts = array("q", itertools.accumulate((len(w) + 1 for w in doubled), initial=0))

    def window(self, offset: int, words: int) -> str:
        offset %= self.size
        if words <= self.size:
            return self.text[self.starts[offset] : self.starts[offset + words] - 1]
        parts = []
        while words > 0:
            take = min(words, self.size)
            parts.append(self.text[self.starts[offset] : self.starts[offset + take] - 1])
            words -= take
        return " ".join(parts)


_POOLS: dict[int, TextPool] = {}


def text_pool(seed: int) -> TextPool:
    pool = _POOLS.get(seed)
    if pool is None:
        pool = _POOLS[seed] = TextPool(seed)
    return pool


def _stable_offset(*parts: object) -> int:
    digest = hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big")


# ---------------------------------------------------------------------------------------------- workload


class Workload:
    """Builds sessions of requests from a profile. One per worker process; not shared between threads.

    ``seed`` fixes the text pool and the shared prefixes: give every worker of a run the same seed (so prefix
    hits land across workers) and each worker its own ``rng`` in ``new_session`` (so unique texts differ).
    ``api`` overrides the profile's API (the command line may).
    """

    def __init__(
        self, profile: Profile, sizer: PromptSizer, model: str, seed: int = 0, *, api: Api | None = None
    ) -> None:
        self.profile = profile
        self.sizer = sizer
        self.model = model
        self.seed = seed
        self.api: Api = api or as_api(profile.api)
        self.extra_body = profile.sampling.extra_body()
        self._pool = text_pool(seed)
        self._buckets = profile.buckets
        self._cum_weights = tuple(itertools.accumulate(b.weight for b in profile.buckets))
        self._groups: dict[str, PrefixGroup] = {g.name: g for g in profile.prefix_groups}
        self._prefix_tokens = {g.name: self._fitted_prefix(g.prefix_tokens) for g in profile.prefix_groups}
        self._next_session_id = 0

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
        return self._pool.window(_stable_offset(self.seed, group, index), words)

    def unique_text(self, rng: random.Random, words: int) -> str:
        """Random text of ``words`` words whose first words are drawn fresh (so no two share a first block)."""
        lead = " ".join(rng.choices(VOCABULARY, k=min(words, FRESH_WORDS)))
        if words <= FRESH_WORDS:
            return lead
        return lead + " " + self._pool.window(rng.randrange(self._pool.size), words - FRESH_WORDS)

    def new_session(self, rng: random.Random, session_id: int | None = None) -> Session:
        if session_id is None:
            session_id = self._next_session_id
            self._next_session_id += 1
        return Session(self, rng, session_id)


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

    def next_request(self) -> RequestSpec | None:
        if self._pending is not None and self._multi:
            self._add_reply(
                None, self._pending.max_tokens, self._pending.input_tokens_target, self._pending.max_tokens
            )
        self._pending = None
        if self.done or self.turn >= self.turns:
            self.done = True
            return None
        w = self.workload
        sizer = w.sizer
        rng = self.rng
        new_tokens = sample_tokens(self.bucket.input, rng)
        max_tokens = sample_tokens(self.bucket.output, rng)
        chat = w.api == "chat"
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
        )
        self.turn += 1
        self._pending = spec
        return spec

    def _shape(self, body: str) -> tuple[tuple[tuple[str, str], ...], str]:
        """(messages, prompt) of this turn around its fresh ``body``: chat history or completions transcript."""
        if self.workload.api == "chat":
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
        if self.turn >= self.turns:
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
        if self.workload.api == "chat":
            self._history.append(("assistant", text))
            self._context_tokens = prompt_tokens + output_tokens + self.workload.sizer.per_message_tokens
        else:
            self._transcript = f"{self._transcript} {text}"
            self._context_tokens = prompt_tokens + output_tokens
