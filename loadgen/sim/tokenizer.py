"""The simulator's deterministic fake tokenizer, its ChatML-like chat template and its output vocabulary.

One token is a run of up to 12 letters, a group of up to 3 digits, or one punctuation character; whitespace
is free. Token ids come from CRC-32, so they are the same in every process and every run (``hash()`` of a
``str`` is salted per process). The same tokenizer counts ``/tokenize``, ``usage.prompt_tokens`` and the
prefix-cache blocks, and the output vocabulary is built so that ``n`` generated tokens tokenize back to
exactly ``n`` tokens (multi-turn histories keep their counts).
"""

from __future__ import annotations

import functools
import random
import re
import zlib
from collections.abc import Sequence

VOCAB_SIZE = 128_256
_FIRST_ORDINARY_ID = 1_000  # ids below are reserved for the template's special tokens
IM_START = 1
IM_END = 2
NEWLINE = 3

_PIECE = re.compile(r"[^\W\d_]{1,12}|\d{1,3}|[^\w\s]|_")

# Plain lowercase words (no JSON escaping needed, each one token) and a little punctuation.
_WORDS = (
    "the of and to in is that for it as was with be by on not he this are or his from at which but have an "
    "they you were her she there one all we their been has when who will more no if out so said what up its "
    "about into than them can only other new some could time these two may then do first any my now such "
    "like our over man me even most made after also did many before must through back years where much your "
    "way well down should because each just those people how too little state good very make world still "
    "own see men work long get here between both life being under never day same another know while last "
    "might us great old year off come since against go came right used take three house model token cache "
    "batch queue stream server memory latency window engine kernel tensor layer prompt output decode "
    "prefill request signal river mountain garden window bridge forest music paper light water"
).split()
_PUNCT = (",", ".")


def _piece_id(piece: str) -> int:
    return _FIRST_ORDINARY_ID + zlib.crc32(piece.encode()) % (VOCAB_SIZE - _FIRST_ORDINARY_ID)


@functools.lru_cache(maxsize=8192)
def encode(text: str) -> tuple[int, ...]:
    """Token ids of ``text``. Cached: shared system prompts and prefixes repeat across requests."""
    return tuple(_piece_id(p) for p in _PIECE.findall(text))


def count(text: str) -> int:
    return len(encode(text))


def encode_chat(messages: Sequence[tuple[str, str]], add_generation_prompt: bool = True) -> list[int]:
    """ChatML: ``<|im_start|>role\\ncontent<|im_end|>\\n`` per message (5 tokens of overhead each), then
    ``<|im_start|>assistant\\n`` (3 tokens) when a reply is to be generated."""
    ids: list[int] = []
    for role, content in messages:
        ids.append(IM_START)
        ids.extend(encode(role))
        ids.append(NEWLINE)
        ids.extend(encode(content))
        ids.append(IM_END)
        ids.append(NEWLINE)
    if add_generation_prompt:
        ids.append(IM_START)
        ids.extend(encode("assistant"))
        ids.append(NEWLINE)
    return ids


def block_hashes(ids: Sequence[int], block_size: int) -> tuple[int, ...]:
    """Chained hashes of the full blocks of ``ids``: block i's hash covers every token before its end, so
    two prompts share block i only if they share the whole prefix (as in vLLM's prefix cache)."""
    hashes: list[int] = []
    prev = 0
    for start in range(0, len(ids) - block_size + 1, block_size):
        prev = hash((prev, tuple(ids[start : start + block_size])))
        hashes.append(prev)
    return tuple(hashes)


def output_stream(seed: int, length: int = 4096) -> tuple[bytes, ...]:
    """A fixed, readable token stream (already UTF-8 and JSON-safe) that requests read from at an offset.

    Every entry is exactly one token of the fake tokenizer: a word with a leading space, or a punctuation
    mark right after a word.
    """
    rng = random.Random(seed)
    out: list[bytes] = []
    since_punct = 0
    while len(out) < length:
        if since_punct >= 4 and rng.random() < 0.12:
            out.append(rng.choice(_PUNCT).encode())
            since_punct = 0
            continue
        out.append((" " + rng.choice(_WORDS)).encode())
        since_punct += 1
    return tuple(out)
