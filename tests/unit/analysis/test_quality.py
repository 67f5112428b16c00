"""loadgen.analysis.quality: an answer's agreement with its reference and a step's summary with its interval."""

from __future__ import annotations

import random

import pytest

from loadgen.analysis.quality import (
    agreement,
    agreement_text,
    common_prefix,
    effective_n,
    step_quality,
    wilson,
)


def test_agreement_in_characters_and_in_tokens() -> None:
    same = agreement("the cat sat", "the cat sat")
    assert (same.exact, same.prefix, same.unit) == (True, 11, "chars")
    diverged = agreement("the cat ran", "the cat sat")
    assert (diverged.exact, diverged.prefix) == (False, 8)
    truncated = agreement("the cat", "the cat sat")  # a cut reply is a prefix, not a match
    assert (truncated.exact, truncated.prefix, truncated.length) == (False, 7, 7)
    tokens = agreement([1, 2, 3, 9], [1, 2, 3, 4, 5])
    assert (tokens.exact, tokens.prefix, tokens.unit) == (False, 3, "tokens")
    assert agreement(["a", " b"], ["a", " b"]).exact
    assert agreement("", "").exact and agreement("", "x").prefix == 0
    with pytest.raises(TypeError):
        agreement("abc", [1, 2, 3])


def test_common_prefix_matches_the_naive_count() -> None:
    rng = random.Random(3)
    for _ in range(300):
        a = "".join(rng.choice("ab") for _ in range(rng.randrange(12)))
        b = "".join(rng.choice("ab") for _ in range(rng.randrange(12)))
        naive = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
        assert common_prefix(a, b) == naive, (a, b)


def test_wilson_against_known_values() -> None:
    lo, hi = wilson(62, 100)  # the textbook Wilson 95 % interval of 62/100
    assert (round(lo, 3), round(hi, 3)) == (0.522, 0.709)
    assert wilson(10, 10)[1] == 1.0 and round(wilson(10, 10)[0], 3) == 0.722
    assert wilson(0, 0) == (0.0, 1.0)


def test_step_summary_and_its_interval() -> None:
    hits = [agreement("abc", "abc")] * 31 + [agreement("abd", "abc")] * 19
    q = step_quality(hits)
    assert q["n"] == 50 and q["agree"] == 0.62 and q["prefix_chars_p50"] == 3
    assert q["agree_lo"] is not None and q["agree_hi"] is not None
    assert q["agree_lo"] < 0.62 < q["agree_hi"] and (q["tasks_ok"], q["errors"]) == (None, 0)
    assert agreement_text(q) == f"0.62 ({q['agree_lo']:.2f}–{q['agree_hi']:.2f})"
    tokens = step_quality([agreement([1, 2], [1, 3])], tasks=[True, False, True], errors=2)
    assert (
        tokens["prefix_tokens_p50"] == 1
        and tokens["tasks_ok"] == pytest.approx(2 / 3)
        and tokens["errors"] == 2
    )
    empty = step_quality([], errors=3)
    assert (empty["n"], empty["agree"], empty["agree_lo"], empty["errors"]) == (0, None, None, 3)
    assert agreement_text(empty) == "n/a"
    with pytest.raises(ValueError, match="one unit"):
        step_quality([agreement("a", "a"), agreement([1], [1])])


def test_repeats_of_one_prompt_count_as_one_observation() -> None:
    # 40 probes, 4 prompts, each prompt always agreeing or always not: the information is in the 4 prompts
    hits = [p < 2 for p in range(4) for _ in range(10)]
    prompts = [p for p in range(4) for _ in range(10)]
    assert effective_n(hits, prompts) == 4
    assert effective_n(hits, None) == 40
    # independent draws within prompts: about n
    rng = random.Random(1)
    mixed = [rng.random() < 0.5 for _ in range(400)]
    assert effective_n(mixed, [i % 40 for i in range(400)]) > 200
    assert effective_n([True] * 30, [i % 3 for i in range(30)]) == 3
    wide = step_quality([agreement("a", "a" if h else "b") for h in hits], clusters=prompts)
    narrow = step_quality([agreement("a", "a" if h else "b") for h in hits])
    assert wide["agree"] == narrow["agree"] == 0.5
    assert wide["agree_lo"] < narrow["agree_lo"] and wide["agree_hi"] > narrow["agree_hi"]  # type: ignore[operator]


def test_the_step_quality_line() -> None:
    from loadgen.analysis.quality import quality_line

    q = {"n": 40, "agree": 0.62, "agree_lo": 0.55, "agree_hi": 0.69, "prefix_chars_p50": 12, "errors": 2}
    assert quality_line(q) == "agreement 0.62 (0.55–0.69) · 40 probes · prefix 12 chars (median) · 2 failed"
    assert quality_line({"n": 0, "agree": None, "errors": 3}) == "agreement n/a · 0 probes · 3 failed"
