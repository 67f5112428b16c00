"""Answer probes: the [quality] table, which sessions are probes and what they ask, the recorder shipping
only probes' texts (bounded), and the run's reference book comparing each step with the first answers."""

from __future__ import annotations

import json
import random

import pytest

from loadgen.analysis.quality import QualityBook
from loadgen.metrics.recorder import PROBE_TEXT_LIMIT, Recorder
from loadgen.profile import ProfileError, Quality, parse_profile
from loadgen.types import ErrorKind, Outcome, RequestResult
from loadgen.workload import PromptSizer, Workload
from loadgen.workload.probes import MIN_EVERY_S, Probes, probe_prompt

BASE = 'name = "q"\n[[bucket]]\ninput = 40\noutput = 8\n[sampling]\ntemperature = 0.7\n'


def test_the_quality_table() -> None:
    assert parse_profile(BASE, source="<t>").quality is None
    q = parse_profile(BASE + "[quality]\n", source="<t>").quality
    assert q == Quality() and q.share == 0.05
    q = parse_profile(BASE + "[quality]\nshare = 0.5\nprobes = 3\nseed = 7\n", source="<t>").quality
    assert q is not None and (q.share, q.probes, q.seed) == (0.5, 3, 7)
    for bad, word in (
        ("share = 0", "share"),
        ("share = 2", "share"),
        ("probes = 65", "probes"),
        ("x = 1", "x"),
    ):
        with pytest.raises(ProfileError, match=word):
            parse_profile(BASE + f"[quality]\n{bad}\n", source="<t>")


def test_every_nth_session_is_a_probe_at_temperature_zero() -> None:
    profile = parse_profile(BASE + "[quality]\nshare = 0.25\nprobes = 3\n", source="<t>")
    workload = Workload(profile, PromptSizer.estimate("chat"), "m", 1)
    rng = random.Random(1)
    specs = [workload.new_session(rng).next_request() for _ in range(40)]
    probes = [s for s in specs if s is not None and s.probe >= 0]
    assert len(probes) == 10 and [p.probe for p in probes[:4]] == [0, 1, 2, 0]
    body = dict(probes[0].extra_body)
    assert body["temperature"] == 0.0 and body["seed"] == 1234 and probes[0].keep_text
    assert probes[0].messages == (("user", probe_prompt(0)),)
    others = [s for s in specs if s is not None and s.probe < 0]
    assert all(dict(s.extra_body)["temperature"] == 0.7 and not s.keep_text for s in others)
    assert Workload(parse_profile(BASE, source="<t>"), PromptSizer.estimate("chat"), "m", 1).probes is None


def test_a_probe_at_least_every_few_seconds() -> None:
    now = [0.0]
    probes = Probes(Quality(share=0.01), "completions", "m", clock=lambda: now[0])
    assert [probes.due() for _ in range(3)] == [True, False, False]
    now[0] += MIN_EVERY_S
    assert probes.due() and not probes.due()
    spec = probes.next_spec(5)
    assert spec.prompt == probe_prompt(0) and spec.messages == () and spec.session_id == 5


def result(probe: int, text: str | None, outcome: Outcome = Outcome.OK) -> RequestResult:
    return RequestResult(
        outcome=outcome, intended_ns=0, sent_ns=1, end_ns=2, output_text=text, probe=probe,
        error_kind=ErrorKind.CONNECT if outcome is Outcome.ERROR else None,
    )  # fmt: skip


def test_the_recorder_ships_probes_texts_only() -> None:
    rec = Recorder()
    rec.record(result(-1, "not a probe"))
    rec.record(result(0, "x" * (PROBE_TEXT_LIMIT + 10)))
    rec.record(result(1, None, Outcome.ERROR))
    rec.record(result(1, None, Outcome.CANCELLED))
    delta = rec.take(0, 1)
    assert [(i, None if t is None else len(t)) for i, t in delta.probes] == [(0, PROBE_TEXT_LIMIT), (1, None)]
    assert delta.ok == 2 and delta.error_count == 1  # probes count as requests
    assert rec.take(1, 2).probes == ()


def test_the_book_takes_the_first_answers_as_reference() -> None:
    book = QualityBook()
    first = book.step([(0, "a b c"), (1, "x y"), (0, "a b c"), (1, None)])
    assert first is not None
    assert (first["n"], first["agree"], first["errors"]) == (3, 1.0, 1)
    assert first["reference"] == {"0": "a b c", "1": "x y"}
    later = book.step([(0, "a b d"), (1, "x y")])
    assert later is not None and (later["n"], later["agree"]) == (2, 0.5)
    assert "reference" not in later and later["prefix_chars_p50"] == 3.5
    new = book.step([(2, "new"), (0, "a b c")])  # a probe first answered under load is no reference
    assert new is not None and new["unreferenced"] == 1 and "reference" not in new and new["n"] == 1
    assert book.step([]) is None
    empty = QualityBook().step([(0, ""), (0, "text"), (0, "")])  # an empty reply is never the reference
    assert (
        empty is not None
        and empty["reference"] == {"0": "text"}
        and (empty["n"], empty["agree"]) == (3, 1 / 3)
    )
    loaded = QualityBook({0: "a b c"})
    step = loaded.step([(0, "a b c"), (1, "x y")])
    assert step is not None and step["n"] == 1 and step["unreferenced"] == 1 and "reference" not in step
    json.dumps(step)


def test_the_agreement_clause() -> None:
    from loadgen.config import SLO
    from loadgen.slo import judge_quality
    from loadgen.snapshot import SLOVerdict

    slo = SLO(quality_agree_min=0.95)
    nothing = SLOVerdict(met=None)  # what evaluate gives with this clause alone
    assert judge_quality(slo, nothing, {"n": 40, "agree": 1.0}).met is True
    missed = judge_quality(slo, nothing, {"n": 40, "agree": 0.62})
    assert missed.met is False and missed.failures == ("answer agreement 0.62 < 0.95",)
    assert missed.three_valued == "missed"
    on_iv = judge_quality(slo, SLOVerdict(met=True, on_intervals="met"), {"n": 40, "agree": 0.5})
    assert on_iv.three_valued == "missed"
    na = judge_quality(slo, SLOVerdict(met=True), None)
    assert na.met is True and na.not_judged[0].startswith("answer agreement n/a")
    assert judge_quality(SLO(), SLOVerdict(met=True), {"n": 1, "agree": 0.0}).met is True  # no clause
    few = SLOVerdict(met=None, failures=("not enough data: 0 requests finished, need 1",))
    assert judge_quality(slo, few, {"n": 1, "agree": 0.0}) == few
