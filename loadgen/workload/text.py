"""The text prompts are made of: ordinary English words from a fixed vocabulary (no downloads), joined
once into a seeded pool per seed, so that a prompt is one slice of one string (a 16k-token prompt costs a
string copy, not 12k random draws; ``benchmarks/bench_workload.py`` prints the cost), and the stable offsets
that make a shared text identical in every worker process with the same seed.
"""

from __future__ import annotations

import hashlib
import itertools
import random
from array import array

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


def stable_offset(*parts: object) -> int:
    """A pool offset chosen from ``parts`` only: the same in every process."""
    digest = hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big")
