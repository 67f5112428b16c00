"""The diagnosis names an answer change (issue 34): where a step's answer probes agree less than they did
(the agreement's 95 % interval wholly below the SLO's quality_agree_min, or below 1), an evidence line and
a first check join whatever limit it names; no new kind. Full agreement, no probe compared, or no diagnosis:
as it was."""

from __future__ import annotations

from loadgen.analysis.diagnosis import ANSWER_CHECK, KINDS, diagnosis_line, with_answers
from loadgen.analysis.quality import agreement, agreement_text, step_quality

QUEUEING = {
    "kind": "queueing",
    "confidence": "high",
    "evidence": ["12 waiting"],
    "first_checks": ["KV capacity"],
}


def probes(right: int, wrong: int) -> dict[str, object]:
    return dict(step_quality([agreement("ab", "ab")] * right + [agreement("ax", "ab")] * wrong))


def test_an_interval_below_one_is_named_beside_the_limit() -> None:
    q = probes(6, 57)  # 0.10 (0.04–0.19)
    out = with_answers(QUEUEING, q)
    assert out["kind"] == "queueing" and out["kind"] in KINDS
    assert out["evidence"] == [
        "12 waiting",
        f"answers changed under load: agreement {agreement_text(q)} of 63 probes, its interval below 1",
    ]
    assert out["first_checks"] == ["KV capacity", ANSWER_CHECK]
    assert "answers changed under load: agreement 0.10 (" in diagnosis_line(out)
    assert QUEUEING["evidence"] == ["12 waiting"]  # the diagnosis given is not changed


def test_below_the_clause_says_the_clause() -> None:
    q = probes(30, 10)  # 0.75 (0.60–0.86)
    assert isinstance(q["agree_hi"], float) and q["agree_hi"] < 0.95
    out = with_answers(QUEUEING, q, 0.95)
    assert out["evidence"][-1].endswith("of 40 probes, below the SLO's 0.95")  # type: ignore[index]
    loose = with_answers(QUEUEING, q, 0.5)  # the clause met, the interval still below 1
    assert loose["evidence"][-1].endswith("its interval below 1")  # type: ignore[index]


def test_full_agreement_or_nothing_to_read_leaves_it_as_it_was() -> None:
    assert with_answers(QUEUEING, probes(40, 0)) == QUEUEING
    assert with_answers(QUEUEING, None) == QUEUEING and with_answers(QUEUEING, {}) == QUEUEING
    assert with_answers(QUEUEING, {"n": 0, "agree": None, "agree_hi": None, "errors": 3}) == QUEUEING
    assert with_answers({}, probes(0, 40)) == {}  # no diagnosis: nothing to add to
