"""Workload: prompts of the asked length, shared vs unique prefixes, multi-turn sessions, /tokenize calibration."""

from __future__ import annotations

import pickle
import random
import socket
from collections.abc import AsyncIterator, Callable

import pytest
from aiohttp import web

from loadgen.profile import load_profile, parse_profile
from loadgen.types import Outcome, RequestResult, RequestSpec, Target
from loadgen.workload import (
    FALLBACK_WORDS_PER_TOKEN,
    FRESH_WORDS,
    VOCABULARY,
    PromptSizer,
    Workload,
    calibrate_sizer,
)

EXACT = PromptSizer(words_per_token=1.0, overhead_tokens=0, per_message_tokens=0, exact=True)

HIT_MISS = """
[[prefix_group]]
name = "docs"
prefix_tokens = 300
count = 3

[[bucket]]
name = "hit"
input = { min = 20, max = 200 }
output = 16
prefix_group = "docs"

[[bucket]]
name = "miss"
input = { min = 20, max = 200 }
output = 16
prefix_group = "docs"
cache = "miss"

[[bucket]]
name = "plain"
input = { median = 300, sigma = 0.5, min = 50, max = 2000 }
output = 16
"""

SESSION = """
[[prefix_group]]
name = "tools"
prefix_tokens = 500

[[bucket]]
input = 100
output = { min = 10, max = 50 }
prefix_group = "tools"

[session]
turns = 3
think_time_s = 1.5
"""


def words(text: str) -> int:
    return len(text.split())


def spec_words(spec: RequestSpec) -> int:
    if spec.api == "chat":
        return sum(words(content) for _, content in spec.messages)
    return words(spec.prompt)


def ok(spec: RequestSpec, text: str | None, prompt_tokens: int | None = None) -> RequestResult:
    return RequestResult(
        outcome=Outcome.OK,
        intended_ns=0,
        sent_ns=0,
        end_ns=1,
        output_tokens=words(text) if text else spec.max_tokens,
        input_tokens=prompt_tokens,
        output_text=text,
        session_id=spec.session_id,
        turn=spec.turn,
    )


def single_requests(workload: Workload, rng: random.Random, n: int) -> list[RequestSpec]:
    out = []
    for _ in range(n):
        session = workload.new_session(rng)
        spec = session.next_request()
        assert spec is not None
        out.append(spec)
        assert session.next_request() is None  # single-turn: one request per session
    return out


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_prompts_hit_the_asked_length(api: str) -> None:
    workload = Workload(parse_profile(HIT_MISS), EXACT, "m", seed=3, api=api)
    specs = single_requests(workload, random.Random(1), 300)
    assert {s.bucket for s in specs} == {"hit", "miss", "plain"}
    for spec in specs:
        assert spec.api == api and spec.model == "m" and spec.max_tokens == 16
        assert spec_words(spec) == spec.input_tokens_target  # 1 word = 1 token, no template overhead
        if spec.bucket != "plain":
            assert 320 <= spec.input_tokens_target <= 500
        assert not spec.keep_text
        hash(spec)


def test_prefix_in_the_user_message() -> None:
    profile = parse_profile('[target]\nprefix_role = "user"\n' + HIT_MISS)
    workload = Workload(profile, EXACT, "m", seed=3)
    specs = single_requests(workload, random.Random(1), 100)
    shared = {workload.shared_prefix("docs", i) for i in range(3)}
    for spec in specs:
        ((role, content),) = spec.messages
        assert role == "user" and words(content) == spec.input_tokens_target
        if spec.cache_class == "hit":
            assert content.split("\n\n")[0] in shared


def test_template_overhead_is_taken_off_the_body() -> None:
    sizer = PromptSizer(words_per_token=0.5, overhead_tokens=10, per_message_tokens=4, exact=True)
    profile = parse_profile(HIT_MISS)
    workload = Workload(profile, sizer, "m")
    for spec in single_requests(workload, random.Random(2), 100):
        counted = sum(words(c) / 0.5 for _, c in spec.messages) + 10 + 4 * (len(spec.messages) - 1)
        assert counted == pytest.approx(spec.input_tokens_target, abs=2)


def test_hits_share_prefixes_across_workers_and_misses_do_not() -> None:
    profile = parse_profile(HIT_MISS)
    # Two worker processes: same seed and sizer, their own rngs.
    specs_a = single_requests(Workload(profile, EXACT, "m", seed=42), random.Random(1), 200)
    specs_b = single_requests(Workload(profile, EXACT, "m", seed=42), random.Random(2), 200)

    def prefixes(specs: list[RequestSpec], cache_class: str) -> list[str]:
        out = []
        for spec in specs:
            if spec.cache_class == cache_class:
                role, content = spec.messages[0]
                assert role == "system" and words(content) == 300
                assert spec.prefix_group == "docs"
                out.append(content)
        return out

    hits_a, hits_b = prefixes(specs_a, "hit"), prefixes(specs_b, "hit")
    assert len(set(hits_a)) == 3 and set(hits_a) == set(hits_b)  # count = 3 distinct prefixes, shared

    misses = prefixes(specs_a, "miss") + prefixes(specs_b, "miss")
    assert len(misses) > 50 and len(set(misses)) == len(misses)
    openings = {tuple(m.split()[:FRESH_WORDS]) for m in misses}
    assert len(openings) == len(misses)  # not even the first block is shared
    assert not set(misses) & set(hits_a)

    # The user part of hit requests is unique: only the prefix is cacheable.
    bodies = [s.messages[-1][1] for s in specs_a if s.cache_class == "hit"]
    assert len(set(bodies)) == len(bodies)

    other_seed = single_requests(Workload(profile, EXACT, "m", seed=43), random.Random(1), 200)
    assert not set(prefixes(other_seed, "hit")) & set(hits_a)


def test_text_uses_the_builtin_vocabulary() -> None:
    workload = Workload(parse_profile(HIT_MISS), EXACT, "m")
    text = workload.unique_text(random.Random(0), 5000)
    assert words(text) == 5000 and set(text.split()) <= set(VOCABULARY)


def test_huge_prompt_longer_than_the_pool() -> None:
    workload = Workload(parse_profile(HIT_MISS), EXACT, "m")
    assert words(workload.unique_text(random.Random(0), 300_000)) == 300_000


def test_session_grows_history_and_stops_after_its_turns() -> None:
    profile = parse_profile(SESSION)
    workload = Workload(profile, EXACT, "m", seed=1)
    session = workload.new_session(random.Random(5))
    assert session.turns == 3
    seen: list[RequestSpec] = []
    while (spec := session.next_request()) is not None:
        assert spec.turn == len(seen) and spec.keep_text and spec.session_id == session.session_id
        if seen:
            previous = seen[-1]
            # Everything sent last turn, then the reply, then one new user message.
            assert spec.messages[: len(previous.messages)] == previous.messages
            assert spec.messages[len(previous.messages)] == ("assistant", f"reply {spec.turn - 1} " * 3)
            assert spec.messages[-1][0] == "user" and len(spec.messages) == len(previous.messages) + 2
            assert spec.input_tokens_target > previous.input_tokens_target
        else:
            assert [r for r, _ in spec.messages] == ["system", "user"]
            assert spec.input_tokens_target == 600
        seen.append(spec)
        session.on_result(ok(spec, f"reply {spec.turn} " * 3, prompt_tokens=spec_words(spec)))
        assert session.think_time_s == (1.5 if len(seen) < 3 else 0.0)
    assert len(seen) == 3 and session.done
    # The shared prefix opens every turn, and it is the group's shared one.
    assert seen[-1].messages[0] == ("system", workload.shared_prefix("tools", 0))
    # Target of the last turn: previous prompt + reply + new input, all counted in words here.
    assert seen[2].input_tokens_target == spec_words(seen[1]) + 6 + 100


def test_session_target_tracks_real_history_length() -> None:
    workload = Workload(parse_profile(SESSION), EXACT, "m", seed=1)
    session = workload.new_session(random.Random(5))
    for _ in range(3):
        spec = session.next_request()
        assert spec is not None
        assert spec_words(spec) == spec.input_tokens_target
        session.on_result(ok(spec, "a b c d e", prompt_tokens=spec_words(spec)))


def test_completions_session_transcript() -> None:
    workload = Workload(parse_profile(SESSION), EXACT, "m", api="completions")
    session = workload.new_session(random.Random(5))
    first = session.next_request()
    assert first is not None and first.prompt.endswith("Assistant:") and not first.messages
    session.on_result(ok(first, "the reply"))
    second = session.next_request()
    assert second is not None and second.prompt.startswith(first.prompt + " the reply\n\nUser: ")


def test_session_ends_on_error_and_on_context_limit() -> None:
    workload = Workload(parse_profile(SESSION), EXACT, "m")
    session = workload.new_session(random.Random(5))
    spec = session.next_request()
    assert spec is not None
    session.on_result(RequestResult(outcome=Outcome.ERROR, intended_ns=0, sent_ns=0, end_ns=1))
    assert session.done and session.next_request() is None

    limited = parse_profile(SESSION + "max_context_tokens = 800\n")
    session = Workload(limited, EXACT, "m").new_session(random.Random(5))
    spec = session.next_request()
    assert spec is not None
    session.on_result(ok(spec, "x " * 200, prompt_tokens=600))  # 600 + 200 already at the limit
    assert session.next_request() is None and session.done


def test_missing_reply_text_is_stood_in_for() -> None:
    workload = Workload(parse_profile(SESSION), EXACT, "m")
    session = workload.new_session(random.Random(5))
    first = session.next_request()
    assert first is not None
    second = session.next_request()  # no on_result: the reply is made up, the history still grows
    assert second is not None and second.turn == 1
    assert second.messages[2][0] == "assistant" and words(second.messages[2][1]) == first.max_tokens


def test_builtin_profiles_generate_requests() -> None:
    rng = random.Random(0)
    for name in ("chat", "agent-long-context", "rag-prefill-heavy", "prefix-hit-vs-miss"):
        profile = load_profile(name)
        workload = Workload(profile, PromptSizer.estimate(profile.api), "m")
        spec = workload.new_session(rng).next_request()
        assert spec is not None and dict(spec.extra_body)["ignore_eos"] is True


def test_sizer_pickles() -> None:
    sizer = PromptSizer.estimate("chat", note="x")
    assert pickle.loads(pickle.dumps(sizer)) == sizer
    assert sizer.words_per_token == FALLBACK_WORDS_PER_TOKEN and not sizer.exact


# ---------------------------------------------------------------------------------------------- calibration


def whitespace_count(text: str) -> int:
    return len(text.split())


def ratio_count(text: str) -> int:
    # 1.3 tokens per word: the fitted words-per-token must be 1 / 1.3.
    return round(1.3 * len(text.split()))


def long_words_count_double(text: str) -> int:
    # Long words take two tokens: the count of a prompt now varies with the words drawn.
    return sum(2 if len(w) > 6 else 1 for w in text.split())


CHAT_BASE, CHAT_PER_MESSAGE, COMPLETIONS_BASE = 7, 4, 1


def tokenize_app(count: Callable[[str], int]) -> web.Application:
    async def tokenize(request: web.Request) -> web.Response:
        body = await request.json()
        if "messages" in body:
            n = CHAT_BASE + sum(CHAT_PER_MESSAGE + count(m["content"]) for m in body["messages"])
        else:
            n = COMPLETIONS_BASE + count(body["prompt"])
        return web.json_response({"count": n, "max_model_len": 1 << 20, "tokens": []})

    app = web.Application()
    app.router.add_post("/tokenize", tokenize)
    return app


async def serve(app: web.Application) -> AsyncIterator[str]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    try:
        yield f"http://{host}:{port}/v1"
    finally:
        await runner.cleanup()


def server_count(spec: RequestSpec, count: Callable[[str], int]) -> int:
    if spec.api == "chat":
        return CHAT_BASE + sum(CHAT_PER_MESSAGE + count(c) for _, c in spec.messages)
    return COMPLETIONS_BASE + count(spec.prompt)


@pytest.mark.parametrize(
    ("count", "tolerance"), [(whitespace_count, 0.02), (ratio_count, 0.02), (long_words_count_double, 0.08)]
)
@pytest.mark.parametrize("api", ["chat", "completions"])
async def test_calibrated_prompts_hit_their_length(
    api: str, count: Callable[[str], int], tolerance: float
) -> None:
    async for url in serve(tokenize_app(count)):
        sizer = await calibrate_sizer(Target(url=url), "m", api)
    assert sizer.exact and sizer.api == api and "tokenize" in sizer.note
    if count is not long_words_count_double:
        assert sizer.words_per_token == pytest.approx(1.0 if count is whitespace_count else 1 / 1.3, rel=1e-3)
        expected = CHAT_BASE + CHAT_PER_MESSAGE if api == "chat" else COMPLETIONS_BASE
        assert sizer.overhead_tokens == expected
        assert sizer.per_message_tokens == (CHAT_PER_MESSAGE if api == "chat" else 0)
    workload = Workload(parse_profile(HIT_MISS), sizer, "m", api=api)
    errors = []
    for spec in single_requests(workload, random.Random(9), 300):
        real = server_count(spec, count)
        assert real == pytest.approx(spec.input_tokens_target, rel=tolerance), spec.bucket
        errors.append(real / spec.input_tokens_target - 1)
    # Per prompt the draw of words varies (a few % on ~400-token prompts here); on average there is no bias.
    assert abs(sum(errors) / len(errors)) < 0.01


async def test_fallback_when_tokenize_is_absent() -> None:
    app = web.Application()  # no routes: /tokenize is a 404
    async for url in serve(app):
        sizer = await calibrate_sizer(Target(url=url), "m", "chat")
    assert not sizer.exact and sizer.words_per_token == FALLBACK_WORDS_PER_TOKEN
    assert "HTTP 404" in sizer.note


async def test_fallback_when_nothing_listens() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # The port was free a moment ago and nothing listens on it now: connection refused.
    sizer = await calibrate_sizer(
        Target(url=f"http://127.0.0.1:{port}", connect_timeout_s=2.0), "m", "completions"
    )
    assert not sizer.exact and sizer.api == "completions" and "ConnectError" in sizer.note
