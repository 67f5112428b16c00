"""Prompt sizing: how many words make N tokens on the server under test, and what its request template
adds (``PromptSizer``), fitted to the server's ``/tokenize`` by ``calibrate_sizer`` or, when the server has
none, estimated (``exact=False``).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass

from loadgen.config import APIS, Api, chat_like
from loadgen.target.http import scrub
from loadgen.target.tokenize import TokenizeError, count_tokens, tokenize_body, tokenize_client, tokenize_url
from loadgen.types import Target
from loadgen.workload.text import VOCABULARY

# Fallback when the server has no /tokenize: the usual rule of thumb for English (~0.75 words per token);
# chat overhead is a typical Llama-3 / ChatML template (BOS + generation prompt, ~5 tokens per message).
FALLBACK_WORDS_PER_TOKEN = 0.75
FALLBACK_OVERHEAD: Mapping[str, tuple[int, int]] = {
    "chat": (8, 5),
    "completions": (1, 0),
    "responses": (8, 5),
}
TRANSCRIPT_LABEL_TOKENS = 4  # "\n\nUser: " / "\n\nAssistant:" in a completions-API session transcript

CALIBRATION_PASSES = 3  # the long calibration text holds the vocabulary this many times


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
        return self.per_message_tokens if chat_like(self.api) else 0

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


def vocabulary_passes(passes: int) -> str:
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
    short, long = vocabulary_passes(1), vocabulary_passes(CALIBRATION_PASSES)
    try:
        async with tokenize_client(target, 30.0, connect_timeout_s=target.connect_timeout_s) as client:
            if chat_like(api):

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
        return PromptSizer.estimate(api, note=f"estimate: {scrub(url)} counts did not grow with the text")
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
        note=f"fitted to {scrub(url)}",  # the note reaches the record and the screen: no credentials
    )
