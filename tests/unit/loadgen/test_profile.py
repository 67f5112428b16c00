"""Profiles: built-ins load, distributions sample right, every class of bad input is one clear line."""

from __future__ import annotations

import hashlib
import json
import pickle
import random
import statistics
from pathlib import Path

import pytest

from loadgen.config import SLO, RampPlan
from loadgen.distributions import (
    Distribution,
    DistributionError,
    Empirical,
    Fixed,
    LogNormal,
    Normal,
    Uniform,
    parse_distribution,
    sample_seconds,
    sample_tokens,
)
from loadgen.profile import (
    Pricing,
    ProfileError,
    builtin_profile_names,
    builtin_profile_path,
    builtin_profile_text,
    load_profile,
    parse_profile,
)

BUILTINS = {
    "chat",
    "fixed-7k-1k",
    "agent-long-context",
    "rag-prefill-heavy",
    "decode-heavy",
    "prefix-hit-vs-miss",
}

MINIMAL = """\
name = "t"
[[bucket]]
input = 100
output = 10
"""


def write(tmp_path: Path, text: str, name: str = "x.toml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def error_of(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    assert message.startswith(path + ":"), message
    return message


# ---------------------------------------------------------------------------------------------- built-ins


def test_builtin_names() -> None:
    assert BUILTINS <= set(builtin_profile_names())


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_every_builtin_loads(name: str) -> None:
    profile = load_profile(name)
    assert profile.name == name
    assert profile.description
    assert profile.buckets
    assert profile.api in ("chat", "completions")
    assert not profile.slo.is_empty()
    plan = profile.ramp
    assert isinstance(plan, RampPlan) and plan.levels and plan.warmup_s < plan.step_s
    path = builtin_profile_path(name)
    assert profile.content_hash == hashlib.sha256(path.read_bytes()).hexdigest()
    assert builtin_profile_text(name).startswith("#")
    json.dumps(profile.to_dict())  # records must be able to carry it
    assert pickle.loads(pickle.dumps(profile)) == profile  # workers receive it pickled
    assert dict(profile.sampling.extra_body())["ignore_eos"] is True


def test_builtin_specifics() -> None:
    fixed = load_profile("fixed-7k-1k")
    (bucket,) = fixed.buckets
    assert bucket.input == Fixed(7000) and bucket.output == Fixed(1024)

    hvm = load_profile("prefix-hit-vs-miss")
    assert [(b.cache, b.weight, b.input, b.output, b.prefix_group) for b in hvm.buckets] == [
        ("hit", 1.0, Fixed(256), Fixed(128), "shared"),
        ("miss", 1.0, Fixed(256), Fixed(128), "shared"),
    ]

    agent = load_profile("agent-long-context")
    assert agent.session is not None and agent.prefix_groups[0].prefix_tokens >= 4000

    rag = load_profile("rag-prefill-heavy")
    assert rag.buckets[0].input == Uniform(4096, 7680)


def test_path_and_name_both_work(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL)
    profile = load_profile(path)
    assert profile.name == "t" and profile.source == str(Path(path).resolve())
    assert profile.model == "auto" and profile.api == "chat" and profile.ramp is None


def test_unknown_builtin_name() -> None:
    with pytest.raises(ProfileError, match="unknown profile 'nope'.*chat"):
        load_profile("nope")
    with pytest.raises(ProfileError, match="no such profile file"):
        load_profile("missing/nope.toml")


# ---------------------------------------------------------------------------------------------- distributions


def draw(dist: Distribution, n: int = 20000, seed: int = 7) -> list[int]:
    rng = random.Random(seed)
    return [sample_tokens(dist, rng) for _ in range(n)]


def test_fixed() -> None:
    assert parse_distribution(512) == Fixed(512)
    assert parse_distribution({"fixed": 512}) == Fixed(512)
    assert set(draw(parse_distribution(512), 100)) == {512}


def test_uniform() -> None:
    d = parse_distribution({"min": 100, "max": 200})
    assert isinstance(d, Uniform)
    xs = draw(d)
    assert min(xs) == 100 and max(xs) == 200
    assert statistics.fmean(xs) == pytest.approx(150, abs=1.5)


def test_normal() -> None:
    d = parse_distribution({"mean": 500, "std": 50, "min": 300, "max": 700})
    assert isinstance(d, Normal)
    xs = draw(d)
    assert 300 <= min(xs) and max(xs) <= 700
    assert statistics.fmean(xs) == pytest.approx(500, abs=2)
    assert statistics.pstdev(xs) == pytest.approx(50, rel=0.05)


def test_lognormal_median_and_mean() -> None:
    by_median = parse_distribution({"median": 400, "sigma": 0.5, "min": 1, "max": 1_000_000})
    assert isinstance(by_median, LogNormal)
    xs = draw(by_median)
    assert statistics.median(xs) == pytest.approx(400, rel=0.03)
    assert statistics.fmean(xs) == pytest.approx(by_median.mean(), rel=0.03)

    by_mean = parse_distribution({"dist": "lognormal", "mean": 500, "sigma": 0.6})
    assert by_mean.mean() == pytest.approx(500)
    assert statistics.fmean(draw(by_mean)) == pytest.approx(500, rel=0.03)

    clamped = draw(parse_distribution({"median": 400, "sigma": 2.0, "min": 16, "max": 1000}))
    assert min(clamped) == 16 and max(clamped) == 1000


def test_empirical() -> None:
    d = parse_distribution({"values": [10, 20, 30], "weights": [1, 1, 2]})
    assert isinstance(d, Empirical)
    xs = draw(d)
    assert set(xs) == {10, 20, 30}
    assert statistics.fmean(xs) == pytest.approx(22.5, abs=0.3)
    assert d.mean() == pytest.approx(22.5)


def test_token_counts_clamped_to_one_and_seconds_to_zero() -> None:
    wide = Normal(1.0, 50.0)  # built directly: the parser would refuse a min below 1 for tokens
    assert min(draw(wide, 2000)) == 1
    rng = random.Random(1)
    think = parse_distribution({"mean": 0.1, "std": 1.0}, integer=False)
    assert min(sample_seconds(think, rng) for _ in range(2000)) == 0.0


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("abc", 'expected a positive integer or a distribution table, got "abc"'),
        (0, "expected a positive integer"),
        (1.5, "expected a positive integer"),
        ({"median": 500}, "needs 'sigma'"),
        ({"mean": 500, "median": 400, "sigma": 1}, "exactly one of 'median' or 'mean'"),
        ({"min": 10}, "cannot tell the distribution"),
        ({"min": 10, "max": 5}, "min (10) is greater than max (5)"),
        ({"dist": "poisson", "mean": 3}, "not a distribution"),
        ({"dist": "uniform", "min": 1, "max": 2, "mean": 3}, 'unknown key "mean"'),
        ({"values": []}, "non-empty list"),
        ({"values": [1, 2], "weights": [0, 0]}, "sum to 0"),
        ({"values": [1, 2], "weights": [1]}, "one per value"),
    ],
)
def test_bad_distributions(value: object, fragment: str) -> None:
    with pytest.raises(DistributionError) as info:
        parse_distribution(value)
    assert fragment in str(info.value)


# ---------------------------------------------------------------------------------------------- errors


def test_syntax_error_keeps_tomllib_line(tmp_path: Path) -> None:
    message = error_of(tmp_path, 'name = "x"\n\n[target\napi = "chat"\n')
    assert message.startswith(str(tmp_path / "x.toml") + ":3: TOML syntax error")


def test_unknown_key(tmp_path: Path) -> None:
    text = MINIMAL + '\n[target]\napi = "chat"\nmodle = "m"\n'
    message = error_of(tmp_path, text)
    assert ":8: [target] key 'modle': unknown key; did you mean 'model'?" in message


def test_unknown_top_level_key(tmp_path: Path) -> None:
    message = error_of(tmp_path, 'nmae = "x"\n' + MINIMAL)
    assert ":1: top level key 'nmae': unknown key; did you mean 'name'?" in message


def test_wrong_type_names_bucket_line_and_key(tmp_path: Path) -> None:
    text = MINIMAL + '\n[[bucket]]\nname = "long"\noutput = 100\ninput = "abc"\n'
    message = error_of(tmp_path, text)
    path = str(tmp_path / "x.toml")
    assert message == (
        f'{path}:9: [[bucket]] #2 "long" key \'input\': expected a positive integer or a distribution table, got "abc"'
    )


def test_bad_distribution_in_file(tmp_path: Path) -> None:
    text = MINIMAL.replace("input = 100", "input = { median = 500, min = 1 }")
    message = error_of(tmp_path, text)
    assert ":3: [[bucket]] #1 key 'input': a lognormal distribution needs 'sigma'" in message


def test_missing_prefix_group(tmp_path: Path) -> None:
    text = MINIMAL + 'prefix_group = "dcos"\n\n[[prefix_group]]\nname = "docs"\nprefix_tokens = 100\n'
    message = error_of(tmp_path, text)
    assert (
        ":5: [[bucket]] #1 key 'prefix_group': no [[prefix_group]] named \"dcos\" (defined: docs)" in message
    )


def test_zero_weights(tmp_path: Path) -> None:
    text = "[[bucket]]\ninput = 1\noutput = 1\nweight = 0\n\n[[bucket]]\ninput = 1\noutput = 1\nweight = 0\n"
    message = error_of(tmp_path, text)
    assert ":4: [[bucket]] #1 key 'weight': all bucket weights are 0" in message


def test_negative_number(tmp_path: Path) -> None:
    message = error_of(tmp_path, MINIMAL + "\n[slo]\n\nttft_p95_ms = -5\n")
    assert ":8: [slo] key 'ttft_p95_ms': expected a number > 0, got -5" in message


def test_no_buckets_and_single_bracket_bucket(tmp_path: Path) -> None:
    assert ":1: top level: no [[bucket]]" in error_of(tmp_path, 'name = "x"\n')
    message = error_of(tmp_path, 'name = "x"\n[bucket]\ninput = 1\noutput = 1\n')
    assert ":2: [bucket]: write [[bucket]] (double brackets" in message


def test_cache_needs_prefix_group_and_valid_class(tmp_path: Path) -> None:
    assert "needs a prefix_group" in error_of(tmp_path, MINIMAL + 'cache = "hit"\n')
    text = MINIMAL + 'prefix_group = "p"\ncache = "warm"\n[[prefix_group]]\nname = "p"\nprefix_tokens = 10\n'
    assert "key 'cache': expected one of 'hit' | 'miss'" in error_of(tmp_path, text)


def test_wrong_api(tmp_path: Path) -> None:
    message = error_of(tmp_path, MINIMAL + '[target]\napi = "embeddings"\n')
    assert ":6: [target] key 'api': expected one of 'chat' | 'completions'" in message


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "bin.toml"
    path.write_bytes(b'name = "x"\n\xff\xfe\n')
    with pytest.raises(ProfileError, match=r":2: not UTF-8"):
        load_profile(str(path))


# ---------------------------------------------------------------------------------------------- ramp, slo, pricing


def ramp_of(text: str) -> RampPlan:
    plan = parse_profile(MINIMAL + "[ramp]\n" + text).ramp
    assert plan is not None
    return plan


def test_ramp_geometric() -> None:
    plan = ramp_of(
        "start = 1\nstop = 16\nfactor = 2\nstep_seconds = 20\nwarmup_seconds = 4\nearly_stop = true\n"
    )
    assert plan == RampPlan(levels=(1, 2, 4, 8, 16), step_s=20.0, warmup_s=4.0, early_stop=True)


def test_ramp_factor_and_step_and_rounding() -> None:
    assert ramp_of("start = 1\nstop = 10\nfactor = 1.5\n").levels == (1, 2, 3, 5, 8)
    assert ramp_of("start = 4\nstop = 20\nstep = 4\n").levels == (4, 8, 12, 16, 20)
    # geometric, but at least +4 each step
    assert ramp_of("start = 1\nstop = 40\nfactor = 2\nstep = 4\n").levels == (1, 5, 10, 20, 40)


def test_ramp_open_mode_rates() -> None:
    profile = parse_profile(MINIMAL + '[ramp]\nmode = "open"\nstart = 0.5\nstop = 4\nfactor = 2\n')
    assert profile.ramp is not None and profile.ramp.mode == "open"
    assert profile.ramp.levels == (0.5, 1.0, 2.0, 4.0)


def test_ramp_explicit_levels_and_errors(tmp_path: Path) -> None:
    assert ramp_of("levels = [1, 3, 9]\n").levels == (1, 3, 9)
    assert "not both" in error_of(tmp_path, MINIMAL + "[ramp]\nlevels = [1]\nstart = 1\n")
    assert "concurrency (a positive integer)" in error_of(tmp_path, MINIMAL + "[ramp]\nlevels = [1, 2.5]\n")
    assert "must be shorter than step_seconds" in error_of(
        tmp_path, MINIMAL + "[ramp]\nlevels = [1]\nstep_seconds = 5\nwarmup_seconds = 5\n"
    )
    assert "factor' (geometric" in error_of(tmp_path, MINIMAL + "[ramp]\nstart = 1\nstop = 8\n")


def test_slo_mapping(tmp_path: Path) -> None:
    text = MINIMAL + (
        "[slo]\nttft_p95_ms = 500\nttft_p99_ms = 900\ndecode_p50_tok_s = 30\n"
        "itl_p99_ms = 80\ne2e_p95_s = 12.5\nmax_error_rate = 0.02\n"
    )
    assert parse_profile(text).slo == SLO(
        ttft_p95_ms=500,
        ttft_p99_ms=900,
        decode_p50_tok_s=30,
        itl_p99_ms=80,
        e2e_p95_s=12.5,
        max_error_rate=0.02,
    )
    assert parse_profile(MINIMAL).slo.is_empty()
    assert "<= 1" in error_of(tmp_path, MINIMAL + "[slo]\nmax_error_rate = 5\n")


def test_sampling_extra_body() -> None:
    text = MINIMAL + '[sampling]\ntemperature = 0.7\ntop_p = 0.9\nignore_eos = true\nstop = "###"\n'
    body = parse_profile(text).sampling.extra_body()
    assert body == (("temperature", 0.7), ("top_p", 0.9), ("ignore_eos", True), ("stop", ("###",)))
    hash(body)  # RequestSpec stays hashable


def test_pricing() -> None:
    pricing = parse_profile(MINIMAL + "[pricing]\ngpu_usd_per_hour = 3.6\ngpus = 2\n").pricing
    assert pricing == Pricing(gpu_usd_per_hour=3.6, gpus=2)
    # 7.2 $/h = 0.002 $/s; at 1,000 tok/s that is 2 $ per 1M output tokens
    assert pricing.cost_per_1m_output_tokens(1000.0) == pytest.approx(2.0)
    assert pricing.cost_per_1m_output_tokens(0.0) is None
    per_token = Pricing(usd_per_1m_input=1.0, usd_per_1m_output=2.0, usd_per_1m_cache_read=0.1)
    assert per_token.cost_per_1m_output_tokens(1000.0) is None
    assert per_token.cost_usd(1_000_000, 1_000_000, cached_tokens=500_000) == pytest.approx(0.5 + 0.05 + 2.0)


def test_context_overflow_estimates_what_the_server_will_reject() -> None:
    from loadgen.profile import context_overflow, load_profile

    # chat: lognormal prompts (to 6,000) + replies (to 2,048); against a 2,048-token server a few percent
    found = context_overflow(load_profile("chat"), 2048)
    assert found is not None and 0.005 < found.share < 0.08 and found.largest == 6000 + 2048
    # fixed 7,000 in / 1,024 out never fits 4,096 and always fits 8,192
    found = context_overflow(load_profile("fixed-7k-1k"), 4096)
    assert found is not None and (found.share, found.largest) == (1.0, 8024)
    assert context_overflow(load_profile("fixed-7k-1k"), 8192) is None
    # A session's context grows turn by turn, to at most its max_context_tokens
    found = context_overflow(load_profile("agent-long-context"), 512)
    assert found is not None and found.share == 1.0 and found.largest == 8000


def test_ramp_mode_travels_with_the_plan() -> None:
    open_plan = parse_profile(MINIMAL + '[ramp]\nmode = "open"\nlevels = [0.5, 2]\n').ramp
    assert open_plan is not None and open_plan.mode == "open" and open_plan.levels == (0.5, 2.0)
    closed_plan = parse_profile(MINIMAL + "[ramp]\nlevels = [1, 2]\n").ramp
    assert closed_plan is not None and closed_plan.mode == "closed"
