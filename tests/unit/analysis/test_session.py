"""A recorded session read as a script for ``--replay-session`` (issue 32): its steps in order with their
levels or rates, lengths, warm-ups, ends and verdicts, the plan that replays them, the SLO and the gate; and
each record that cannot be replayed refused as one line, exit 2, the record untouched, no new record."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from analysis_fakes import Fig, base_header, step_of

from loadgen.analysis.session import SessionError, gate, read_session
from loadgen.cli.commands import build_parsers, main
from loadgen.config import SLO
from loadgen.exits import EXIT_USAGE
from loadgen.record import RecordWriter
from loadgen.snapshot import SLOVerdict, StepSummary


def write(
    path: Path,
    steps: list[StepSummary],
    *,
    header: dict[str, object] | None = None,
    end: bool = True,
    command_after: int | None = None,
) -> Path:
    with RecordWriter(path) as writer:
        writer.write_header(header if header is not None else base_header())
        for at, step in enumerate(steps):
            writer.write_step(step, {})
            if at == command_after:
                writer.write_event("command", {"command": "set_level", "level": 8, "elapsed_s": 5.0})
        if end:
            writer.write_event("end", {"state": "stopped"})
    return path


def step(
    index: int, level: int, window_s: float, ended_by: str, met: bool | None, **changes: object
) -> StepSummary:
    made = step_of(index, Fig(level=level, window_s=window_s, met=met))
    return dataclasses.replace(made, ended_by=ended_by, **changes)


SESSION = [
    step(0, 2, 4.0, "level", True),
    step(1, 8, 7.4, "level", None, warmup_s=0.5, duration_s=7.9),
    step(2, 4, 10.0, "stop", False),
]


def test_the_steps_read_in_order_with_their_lengths_warmups_ends_and_verdicts(tmp_path: Path) -> None:
    session = read_session(str(write(tmp_path / "s.jsonl", SESSION, command_after=0)))
    # header line 1, step 1 on line 2, the command on line 3, then steps 2 and 3
    assert [s.line for s in session.steps] == [2, 4, 5]
    assert [s.step for s in session.steps] == [1, 2, 3]
    assert [s.level for s in session.steps] == [2, 8, 4]
    assert [s.duration_s for s in session.steps] == [5.0, 7.9, 11.0]
    assert [s.warmup_s for s in session.steps] == [1.0, 0.5, 1.0]
    assert [s.window_s for s in session.steps] == [4.0, 7.4, 10.0]
    assert [s.ended_by for s in session.steps] == ["level", "level", "stop"]
    assert [s.met for s in session.steps] == [True, None, False]
    assert session.commands == 1 and not session.searched
    plan = session.plan()
    assert plan.mode == "closed" and plan.levels == (2.0, 8.0, 4.0) and not plan.early_stop
    assert [plan.step_s_at(p) for p in range(3)] == [5.0, 7.9, 11.0]
    assert [plan.warmup_s_at(p) for p in range(3)] == [1.0, 0.5, 1.0]
    assert plan.as_dict()["warmup_seconds"] == [1.0, 0.5, 1.0]
    assert session.slo() == SLO(ttft_p95_ms=1000.0)
    assert session.replay_of()["steps"] == 3 and session.replay_of()["started_at"] is not None


def test_an_open_loop_session_replays_its_rates_and_arrivals(tmp_path: Path) -> None:
    open_step = dataclasses.replace(
        step_of(0, Fig(level=16, mode="open", rate_rps=3.5)), arrival="gamma(0.5)"
    )
    header = {**base_header(), "mode": "open", "arrival": "gamma(0.5)"}
    session = read_session(str(write(tmp_path / "o.jsonl", [open_step], header=header)))
    assert session.plan().mode == "open" and session.plan().levels == (3.5,)
    assert session.steps[0].level == 16  # the concurrency cap
    assert session.arrival() == ("gamma", 0.5)
    traced = write(tmp_path / "t.jsonl", [open_step], header={**header, "arrival": "trace"})
    with pytest.raises(SessionError, match="arrivals 'trace'.*--trace or --requests"):
        read_session(str(traced)).arrival()


def test_under_another_slo_the_original_steps_are_judged_again(tmp_path: Path) -> None:
    session = read_session(str(write(tmp_path / "s.jsonl", SESSION)))
    assert session.judged(SLO(ttft_p95_ms=1000.0), "record") == (True, None, False)  # as recorded
    assert session.judged(SLO(ttft_p95_ms=150.0), "profile") == (False, False, False)  # TTFT p95 200 ms
    assert session.judged(SLO(ttft_p95_ms=250.0), "profile") == (True, True, True)


def replayed(met: bool | None, **changes: object) -> StepSummary:
    made = step_of(0, Fig(level=2, met=met))
    return dataclasses.replace(made, **changes)


def test_the_gate_holds_the_replay_where_the_original_met_the_slo() -> None:
    held, line = gate((True, None, True), [replayed(True), replayed(False), replayed(True)])
    assert held is True and line == "met the SLO at each of the 2 steps where the original met it"
    held, line = gate((True, True), [replayed(True), replayed(False)])
    assert held is False and line == "missed the SLO at step 2 of 2, where the original met it"
    held, line = gate((True, True), [replayed(True)])  # the replay ended before its second step
    assert held is False and "step 2 of 2" in line
    missed_on_intervals = replayed(True, verdict=SLOVerdict(met=True, on_intervals="missed"))
    assert gate((True,), [missed_on_intervals])[0] is False
    undecided = replayed(True, verdict=SLOVerdict(met=True, on_intervals="undecided"))
    held, line = gate((True,), [undecided])
    assert held is True and "(1 undecided on their intervals: longer steps decide)" in line
    assert gate((True,), [replayed(True, carried_share=0.2)])[0] is False  # not under its own load
    assert gate((True,), [replayed(True, ended_by="stop")])[0] is False  # stopped part-way
    assert gate((False, None), [replayed(True), replayed(True)])[0] is None  # nothing to hold it to


def edit_line(number: int, edit: Callable[[dict[str, object]], object]) -> Callable[[Path], None]:
    def change(path: Path) -> None:
        lines = path.read_text().split("\n")
        obj = json.loads(lines[number - 1])
        edit(obj)
        lines[number - 1] = json.dumps(obj)
        path.write_text("\n".join(lines))

    return change


def cut_last_line(path: Path) -> None:
    text = path.read_text()
    path.write_text(text[: text.rindex("\n", 0, len(text) - 1) + 1] + text.split("\n")[-2][:40])


def drop_end(path: Path) -> None:
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:-1]))


def garble(number: int) -> Callable[[Path], None]:
    def change(path: Path) -> None:
        lines = path.read_text().split("\n")
        lines[number - 1] = "{not json"
        path.write_text("\n".join(lines))

    return change


def no_steps(path: Path) -> None:
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(lines[0] + lines[-1])


def not_a_record(path: Path) -> None:
    path.write_text('{"model": "llama", "messages": []}\n')


def open_second(path: Path) -> None:
    lines = path.read_text().split("\n")
    obj = json.loads(lines[2])
    obj.update(mode="open", rate_rps=2.0)
    lines[2] = json.dumps(obj)
    path.write_text("\n".join(lines))


BAD = [
    ("newer schema", edit_line(1, lambda o: o.update(schema=99)), "record schema 99 is newer than this ramp reads"),
    ("no schema", edit_line(1, lambda o: o.pop("schema")), "line 1: record schema None is not one this ramp reads"),
    ("cut short", cut_last_line, "line 5: cut short (the run was killed while writing it)"),
    ("no end line", drop_end, "line 4: the last line, and no end line"),
    ("not JSON", garble(3), "line 3: not JSON"),
    ("no steps", no_steps, "no step to replay"),
    ("not a record", not_a_record, "line 1: expected the header line first"),
    ("modes mixed", open_second, "line 3: step 2 ran in open loop after closed loop steps"),
    ("no duration", edit_line(2, lambda o: o.pop("duration_s")), "line 2: the step line has no number 'duration_s'"),
    ("unknown clause", edit_line(1, lambda o: o.update(slo={"ttft_p42_ms": 9})), "SLO clause 'ttft_p42_ms' is unknown"),
]  # fmt: skip


@pytest.mark.parametrize(("damage", "said"), [(d, s) for _, d, s in BAD], ids=[n for n, _, _ in BAD])
def test_a_record_that_cannot_be_replayed_is_one_line_exit_2_and_left_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: Callable[[Path], None], said: str
) -> None:
    record = write(tmp_path / "s.jsonl", SESSION[:3])
    damage(record)
    before = record.read_bytes()
    out = tmp_path / "replay.jsonl"
    code = main(
        ["run", "http://127.0.0.1:9", "--replay-session", str(record), "--headless", "--out", str(out)]
    )
    err = capsys.readouterr().err
    assert code == EXIT_USAGE, err
    assert err.count("\n") == 1 and err.startswith("ramp: --replay-session: ") and said in err, err
    assert record.read_bytes() == before and not out.exists()


def test_a_missing_record_and_flags_that_set_the_steps_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "http://127.0.0.1:9", "--headless", "--replay-session"]
    assert main([*argv, str(tmp_path / "none.jsonl")]) == EXIT_USAGE
    assert "none.jsonl: no such file" in capsys.readouterr().err
    record = write(tmp_path / "s.jsonl", SESSION)
    assert main([*argv, str(record), "--steps", "1,2", "--warmup", "3"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "runs the record's own steps (levels, lengths, warm-ups): drop --steps, --warmup" in err


def test_run_help_lists_the_flags() -> None:
    text = " ".join(build_parsers()[1]["run"].format_help().split())
    assert "--replay-session RECORD" in text and "--replay-slo {record,profile}" in text
