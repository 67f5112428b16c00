"""Seeds: a fresh seed per run unless ``--seed N`` is given, written to the record header, so run after run
sends new prompts and the server's prefix cache cannot warm across runs (the ``chat`` profile has no shared
prefix); the same ``--seed`` replays the same prompts."""

from __future__ import annotations

import random
import re
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from loadgen.cli.commands import build_parser
from loadgen.cli.flags import RunFlags
from loadgen.cli.resolve import build_config, resolve
from loadgen.profile import load_profile, parse_profile
from loadgen.record import read_record
from loadgen.run.engine import Engine
from loadgen.sim import SimHandle
from loadgen.types import RequestSpec
from loadgen.workload import PromptSizer, Workload

URL = "http://127.0.0.1:8000"
EXACT = PromptSizer(words_per_token=1.0, exact=True)
SHARED = """
[[prefix_group]]
name = "docs"
prefix_tokens = 64
count = 2

[[bucket]]
input = 32
output = 8
prefix_group = "docs"
"""


def test_without_seed_each_run_draws_a_fresh_one() -> None:
    seeds = {resolve(RunFlags(), URL).seed for _ in range(5)}
    assert len(seeds) == 5
    assert resolve(RunFlags(), URL).seed_source == "fresh"
    parsed = build_config(build_parser().parse_args(["run", URL]), URL)
    assert parsed.seed_source == "fresh"


def test_a_given_seed_is_kept() -> None:
    cfg = build_config(build_parser().parse_args(["run", URL, "--seed", "7"]), URL)
    assert (cfg.seed, cfg.seed_source) == (7, "given")
    cfg = build_config(build_parser().parse_args(["run", URL, "--seed", "0"]), URL)
    assert (cfg.seed, cfg.seed_source) == (0, "given")


def requests(seed: int, stream: int, n: int = 40) -> list[RequestSpec]:
    """What one user of a run with ``seed`` sends: a worker's workload and a user's rng, as the loops make
    them (both from the run's seed)."""
    workload = Workload(load_profile("chat"), EXACT, "m", seed=seed)
    rng = random.Random(seed * 1_000_003 + stream)
    out: list[RequestSpec] = []
    while len(out) < n:
        session = workload.new_session(rng)
        while (spec := session.next_request()) is not None:
            out.append(spec)
    return out


def test_the_same_seed_replays_the_prompts_and_another_does_not() -> None:
    assert requests(5, 0) == requests(5, 0)
    texts = {s.messages for s in requests(5, 0)}
    others = {s.messages for s in requests(6, 0)}
    assert not texts & others
    # within a run: every request is unique (chat has no shared prefix)
    within = [s.messages for stream in range(4) for s in requests(5, stream)]
    assert len(set(within)) == len(within)
    first_words = {tuple(m[-1][1].split()[:8]) for m in within}
    assert len(first_words) == len(within)  # not even a first cache block in common


def test_shared_prefixes_are_identical_across_workers_of_a_run_only() -> None:
    profile = parse_profile(SHARED)

    def prefixes(seed: int, worker: int) -> set[str]:
        workload = Workload(profile, EXACT, "m", seed=seed)
        rng = random.Random(seed * 7919 + worker)
        specs = [workload.new_session(rng).next_request() for _ in range(30)]
        return {spec.messages[0][1] for spec in specs if spec is not None}

    run_a = prefixes(11, 0)
    assert len(run_a) == 2 and prefixes(11, 1) == run_a  # same run, other worker: the same two prefixes
    assert not prefixes(12, 0) & run_a  # another run: other prefixes


# ---------------------------------------------------------------------------------------------- end to end


@dataclass
class Run:
    seed: int
    seed_source: str
    hit_rate: float  # the server's prefix-cache hits / queries over the run (its /metrics counters)
    queries: float


pytestmark = pytest.mark.sim("h200-llama8b", seed=3, speed=4.0)


def prefix_counters(url: str) -> tuple[float, float]:
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    values = {}
    for name in ("hits", "queries"):
        found = re.search(rf"^vllm:prefix_cache_{name}(?:_total)?(?:\{{[^}}]*\}})? (\S+)$", text, re.M)
        assert found, f"no vllm:prefix_cache_{name} in /metrics"
        values[name] = float(found.group(1))
    return values["hits"], values["queries"]


def run_chat(sim: SimHandle, out: Path, *seed: str) -> Run:
    argv = [
        "run",
        sim.url,
        "--headless",
        "--profile",
        "chat",
        "--steps",
        "16",
        "--step-seconds",
        "2",  # some 70 requests (4-5 a stream): the same seed replayed found 98 % of its tokens cached
        "--warmup",
        "0",
    ]
    config = build_config(build_parser().parse_args([*argv, "--out", str(out), *seed]), sim.url)
    hits0, queries0 = prefix_counters(sim.url)
    engine = Engine(config)
    engine.start()
    outcome = engine.wait(60)
    assert outcome is not None and outcome.state == "finished", outcome
    hits1, queries1 = prefix_counters(sim.url)
    header = read_record(out).header
    assert queries1 > queries0
    return Run(
        header["seed"], header["seed_source"], (hits1 - hits0) / (queries1 - queries0), queries1 - queries0
    )


@pytest.mark.slow
def test_a_second_run_finds_no_warm_prefix_cache_unless_the_seed_is_given(
    sim: SimHandle, tmp_path: Path
) -> None:
    first = run_chat(sim, tmp_path / "1.jsonl")
    second = run_chat(sim, tmp_path / "2.jsonl")
    print(f"\nfresh seeds: run 1 hit rate {first.hit_rate:.1%}, run 2 {second.hit_rate:.1%}")
    assert first.seed_source == second.seed_source == "fresh"
    assert first.seed != second.seed
    assert second.hit_rate < 0.10

    given_1 = run_chat(sim, tmp_path / "3.jsonl", "--seed", "12345")
    given_2 = run_chat(sim, tmp_path / "4.jsonl", "--seed", "12345")
    print(f"--seed 12345 twice: run 1 hit rate {given_1.hit_rate:.1%}, run 2 {given_2.hit_rate:.1%}")
    assert (given_2.seed, given_2.seed_source) == (12345, "given")
    assert given_1.hit_rate < 0.10  # a new seed on this server: nothing cached yet
    assert given_2.hit_rate > 0.5  # the same prompts again: the replay finds them cached
