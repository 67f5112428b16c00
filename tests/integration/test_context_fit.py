"""Context: the pre-run check finds every profile that can ask for more than the server's max_model_len
(from the distributions' real maxima, not from a few draws), the built-in profiles fit an 8,192-token
server, and ``--fit-context`` clamps the requests that would not fit (max_tokens first, never below 1, then
the prompt) so that none is rejected."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from snapshot_watch import Watch

from loadgen.cli.commands import build_parser
from loadgen.cli.resolve import build_config
from loadgen.profile import builtin_profile_names, context_overflow, load_profile, parse_profile
from loadgen.record import read_record
from loadgen.run.engine import Engine
from loadgen.run.setup import context_warning
from loadgen.sim import SimHandle
from loadgen.types import RequestResult, RequestSpec
from loadgen.workload import PromptSizer, Workload

EXACT = PromptSizer(words_per_token=1.0, exact=True)
RARE = """
name = "rare"
[[bucket]]
input = { median = 300, sigma = 0.8, min = 16, max = 8192 }
output = { median = 200, sigma = 0.6, min = 16, max = 2048 }
"""
FIXED = "[[bucket]]\ninput = {input}\noutput = {output}\n"
SESSION = """
[[prefix_group]]
name = "tools"
prefix_tokens = {prefix}

[[bucket]]
input = {{ min = 100, max = 400 }}
output = {{ min = 50, max = 200 }}
prefix_group = "tools"

[session]
turns = {{ min = 2, max = 12 }}
think_time_s = 0
"""


# ---------------------------------------------------------------------------------------------- the check


def test_a_rare_overflow_is_found_from_the_real_maximum() -> None:
    # prompts up to 8,192 and replies up to 2,048: the real maximum overflows 8,192, however rarely
    found = context_overflow(parse_profile(RARE), 8192)
    assert found is not None and found.largest == 8192 + 2048 and found.share < 0.001
    assert context_overflow(parse_profile(RARE), 8192 + 2048) is None


def test_fixed_lengths_overflow_every_request() -> None:
    found = context_overflow(parse_profile(FIXED.format(input=8192, output=1024)), 8192)
    assert found is not None and (found.share, found.largest) == (1.0, 9216)
    assert context_overflow(parse_profile(FIXED.format(input=7000, output=1024)), 8192) is None


def test_session_profiles_are_checked_turn_by_turn() -> None:
    # the history grows to at most prefix + turns * (input + output)
    unlimited = parse_profile(SESSION.format(prefix=2000))
    found = context_overflow(unlimited, 4096)
    assert found is not None and found.largest == 2000 + 12 * (400 + 200) and 0 < found.share < 1
    assert context_overflow(unlimited, 2000 + 12 * 600) is None
    # the workload ends a session before a turn would pass max_context_tokens
    limited = parse_profile(SESSION.format(prefix=2000) + "max_context_tokens = 8000\n")
    found = context_overflow(limited, 4096)
    assert found is not None and found.largest == 8000
    assert context_overflow(limited, 8000) is None


def test_chat_against_a_2k_server_names_the_share() -> None:
    found = context_overflow(load_profile("chat"), 2048)
    assert found is not None and 0.005 < found.share < 0.08
    text = context_warning(load_profile("chat"), 2048, fit=False)
    assert text is not None and f"{found.share * 100:.1f}" in text and "2,048" in text
    assert "use --fit-context to clamp" in text
    fitted = context_warning(load_profile("chat"), 2048, fit=True)
    assert fitted is not None and "clamped" in fitted and "use --fit-context" not in fitted


@pytest.mark.parametrize("name", sorted(builtin_profile_names()))
def test_every_builtin_profile_fits_an_8k_server(name: str) -> None:
    assert context_overflow(load_profile(name), 8192) is None
    assert context_warning(load_profile(name), 8192, fit=False) is None


# ---------------------------------------------------------------------------------------------- the clamp


def drawn(workload: Workload, seed: int, n: int) -> list[RequestSpec]:
    rng = random.Random(seed)
    out: list[RequestSpec] = []
    while len(out) < n:
        session = workload.new_session(rng)
        while (spec := session.next_request()) is not None:
            out.append(spec)
            session.on_result(ok(spec))
    return out


def ok(spec: RequestSpec) -> RequestResult:
    from loadgen.types import Outcome

    return RequestResult(
        outcome=Outcome.OK,
        intended_ns=0,
        sent_ns=0,
        end_ns=1,
        output_tokens=spec.max_tokens,
        input_tokens=spec.input_tokens_target,
        output_text="the " * spec.max_tokens,
    )


def prompt_words(spec: RequestSpec) -> int:
    return sum(len(content.split()) for _, content in spec.messages) + len(spec.prompt.split())


def test_fit_clamps_max_tokens_first_and_leaves_fitting_requests_alone() -> None:
    chat = load_profile("chat")
    plain = drawn(Workload(chat, EXACT, "m", seed=1), 2, 3000)
    fitted = drawn(Workload(chat, PromptSizer(1.0, exact=True, fit_context=1024), "m", seed=1), 2, 3000)
    clamped = 0
    for before, after in zip(plain, fitted, strict=True):
        assert after.max_tokens >= 1
        assert prompt_words(after) + after.max_tokens <= 1024  # one word = one token with this sizer
        if prompt_words(before) + before.max_tokens <= 1024 - 2 * 32:  # well inside: untouched
            assert after == before
        elif prompt_words(before) < 900:  # room for the prompt: only max_tokens is lowered
            assert after.messages == before.messages and after.max_tokens <= before.max_tokens
            clamped += after.max_tokens < before.max_tokens
    assert clamped > 30


def test_a_prompt_that_alone_overflows_is_shortened() -> None:
    profile = parse_profile(FIXED.format(input=8192, output=1024))
    (spec,) = drawn(Workload(profile, PromptSizer(1.0, exact=True, fit_context=2048), "m"), 0, 1)
    assert spec.max_tokens == 1
    assert 1800 < prompt_words(spec) <= 2047 and spec.input_tokens_target == prompt_words(spec)


def test_a_prefix_longer_than_the_context_is_cut_the_same_in_every_worker() -> None:
    profile = parse_profile(SESSION.format(prefix=3000))
    sizer = PromptSizer(1.0, exact=True, fit_context=2048)
    specs = [drawn(Workload(profile, sizer, "m", seed=4), worker, 200) for worker in range(2)]
    prefixes = {spec.messages[0][1] for worker in specs for spec in worker if spec.turn == 0}
    assert len(prefixes) == 1  # still one shared prefix, cut to fit
    for spec in specs[0] + specs[1]:
        assert prompt_words(spec) + spec.max_tokens <= 2048 and spec.max_tokens >= 1


def test_sessions_end_before_their_history_alone_overflows() -> None:
    profile = parse_profile(SESSION.format(prefix=500))
    sizer = PromptSizer(1.0, exact=True, fit_context=2048)
    specs = drawn(Workload(profile, sizer, "m", seed=4), 0, 500)
    assert max(s.turn for s in specs) >= 2
    for spec in specs:
        assert spec.input_tokens_target + spec.max_tokens <= 2048 and spec.max_tokens >= 1


def test_an_estimated_sizer_keeps_a_wider_margin() -> None:
    assert PromptSizer(1.0, exact=False).slack(4000) > PromptSizer(1.0, exact=True).slack(4000) > 0


# ---------------------------------------------------------------------------------------------- end to end


pytestmark = pytest.mark.sim("h200-llama8b", seed=4, speed=4.0, max_model_len=2048)


def run_chat(
    sim: SimHandle, out: Path, *extra: str
) -> tuple[dict[str, object], list[dict[str, object]], Watch]:
    argv = [
        "run",
        sim.url,
        "--headless",
        "--profile",
        "chat",
        "--steps",
        "16",
        "--step-seconds",
        "4",
        "--warmup",
        "0",
    ]
    config = build_config(build_parser().parse_args([*argv, "--out", str(out), *extra]), sim.url)
    watch = Watch()
    engine = Engine(config, on_snapshot=watch)
    engine.start()
    outcome = engine.wait(60)
    assert outcome is not None and outcome.state == "finished", outcome
    record = read_record(out)
    return record.header, record.events, watch


@pytest.mark.slow
def test_chat_against_a_2k_server_warns_or_fits(sim: SimHandle, tmp_path: Path) -> None:
    header, events, watch = run_chat(sim, tmp_path / "warn.jsonl")
    assert header["fit_context"] is False
    assert watch.snap is not None
    (warning,) = [w for w in watch.snap.warnings if "max_model_len" in w]
    assert "%" in warning and "use --fit-context to clamp" in warning
    assert any(e["kind"] == "warning" and e["note"] == warning for e in events)

    header, events, watch = run_chat(sim, tmp_path / "fit.jsonl", "--fit-context")
    assert header["fit_context"] is True
    assert any(e["kind"] == "warning" and "clamped" in str(e["note"]) for e in events)
    steps = read_record(tmp_path / "fit.jsonl").steps
    assert steps and all(s["error_count"] == 0 for s in steps), [s["errors"] for s in steps]
    assert sum(s["ok"] for s in steps) > 20
