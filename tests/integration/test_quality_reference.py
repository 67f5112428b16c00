"""A reference that is not this run's is refused with one line naming the mismatch (issue 34, bad input): of
another model, also when the run's model is discovered from the server (no ``--model``: refused once it is
known, before any load, exit 2); of another probe set, API or tasks setting; a reference file that does not
say its model, length or seed. And an SLO clause on the answers without answer probes is refused before the
run instead of reading n/a at every step."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from loadgen.cli.flags import RunFlags
from loadgen.cli.headless import finish
from loadgen.cli.resolve import resolve
from loadgen.cli.session import replay_session
from loadgen.config import RampPlan
from loadgen.exits import EXIT_USAGE, UsageError
from loadgen.profile import parse_profile
from loadgen.profile.quality import load_reference
from loadgen.run.config import RunConfig
from loadgen.run.engine import Engine
from loadgen.sim import build_config, run_sim_in_thread
from loadgen.types import Target

URL = "http://127.0.0.1:9"
PROFILE = """
name = "answers"
[[bucket]]
input = 16
output = 8
[sampling]
ignore_eos = true
"""


def reference(path: Path, **keys: object) -> str:
    doc = {"model": "m1", "max_tokens": 32, "seed": 1234, "reference": {"0": "a", "1": "b"}, **keys}
    path.write_text(json.dumps({k: v for k, v in doc.items() if v is not None}))
    return str(path)


def refused(tmp_path: Path, ref: str, **flags: object) -> str:
    with pytest.raises(UsageError) as caught:
        resolve(RunFlags(quality_reference=ref, out=str(tmp_path / "run.jsonl"), **flags), URL)  # type: ignore[arg-type]
    said = str(caught.value)
    assert "\n" not in said
    return said


def test_a_discovered_model_other_than_the_references_is_refused_before_the_load(tmp_path: Path) -> None:
    ref = reference(tmp_path / "ref.json", model="other-model", max_tokens=8)
    profile = parse_profile(PROFILE + "[quality]\nshare = 0.5\nmax_tokens = 8\n", source="<answers>")
    assert profile.quality is not None
    # no model named: resolve cannot check it, the server names it
    profile = replace(profile, quality=load_reference(ref, profile.quality))
    handle = run_sim_in_thread(build_config("tiny-cpu", seed=3, speed=4.0))
    try:
        out = tmp_path / "run.jsonl"
        config = RunConfig(
            target=Target(url=handle.url),
            profile=profile,
            plan=RampPlan((1,), step_s=1.0, warmup_s=0.2),
            out=str(out),
        )
        engine = Engine(config)
        engine.start()
        outcome = engine.wait(60)
        sent = len(handle.ground_truth())
    finally:
        handle.stop()
    assert outcome is not None and outcome.state == "failed" and not outcome.steps
    assert "'other-model'" in outcome.message and "'sim-llama-8b'" in outcome.message, outcome.message
    assert "\n" not in outcome.message and sent == 0  # refused before the first request
    assert finish(outcome) == EXIT_USAGE


def test_a_reference_asked_differently_is_refused_naming_the_mismatch(tmp_path: Path) -> None:
    path = tmp_path / "ref.json"
    assert resolve(RunFlags(quality_reference=reference(path), out=str(tmp_path / "r.jsonl")), URL)
    said = refused(tmp_path, reference(path, probes=4))
    assert said.endswith("ref.json: its probes were asked with probes 4, this run's with 8"), said
    said = refused(tmp_path, reference(path, api="completions"), api="chat")
    assert said.endswith("its probes were asked with api completions, this run's with chat"), said
    said = refused(tmp_path, reference(path, tasks=True))
    assert said.endswith("its probes were asked with tasks on, this run's with off"), said
    assert resolve(
        RunFlags(quality_reference=reference(path, tasks=False), out=str(tmp_path / "r.jsonl")), URL
    )
    said = refused(tmp_path, reference(path, tasks=False), quality_tasks=True)
    assert said.endswith("with tasks off, this run's with on"), said


def test_a_reference_that_does_not_say_how_it_was_asked_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ref.json"
    said = refused(tmp_path, reference(path, model=None, seed=None))
    assert said.endswith("ref.json: the reference does not say its model or seed: it cannot be checked"), said
    said = refused(tmp_path, reference(path, max_tokens=None))
    assert "does not say its max_tokens" in said, said


def test_an_slo_on_the_answers_without_probes_is_refused(tmp_path: Path) -> None:
    profile = tmp_path / "answers.toml"
    profile.write_text(PROFILE + "[slo]\nquality_agree_min = 0.95\n")
    flags = RunFlags(profile=str(profile), out=str(tmp_path / "run.jsonl"))
    with pytest.raises(UsageError, match=r"^quality_agree_min needs --quality \(answer probes\)"):
        resolve(flags, URL)
    assert resolve(replace(flags, quality=True), URL).profile.quality is not None


def test_a_replayed_sessions_slo_on_the_answers_without_probes_is_refused(tmp_path: Path) -> None:
    probed = parse_profile(
        PROFILE + "[quality]\nshare = 0.5\nmax_tokens = 8\n[slo]\nquality_agree_min = 0.9\n"
    )
    handle = run_sim_in_thread(build_config("tiny-cpu", seed=3, speed=4.0))
    try:
        record = tmp_path / "session.jsonl"
        config = RunConfig(
            target=Target(url=handle.url), profile=probed, plan=RampPlan((1,), 1.0, 0.2), out=str(record)
        )
        engine = Engine(config)
        engine.start()
        outcome = engine.wait(60)
        assert outcome is not None and outcome.state == "finished", outcome
    finally:
        handle.stop()
    plain = tmp_path / "answers.toml"
    plain.write_text(PROFILE)  # the replay's profile probes no answer; the record's SLO judges them
    flags = RunFlags(
        replay_session=str(record), profile=str(plain), headless=True, out=str(tmp_path / "r.jsonl")
    )
    with pytest.raises(UsageError, match=r"^quality_agree_min needs --quality \(answer probes\)"):
        replay_session(flags, URL)
    assert not (tmp_path / "r.jsonl").exists()
