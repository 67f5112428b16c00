"""``--save-requests-detail``: one CSV row per request a step counted, beside the record; none without the
flag (the workers then build no row at all); and the record's 1 Hz series (``ramp replay``'s timeline).

One short real run against the simulator (a worker process over 127.0.0.1) with errors injected, read
back with ``csv.DictReader`` as a user's script would."""

from __future__ import annotations

import argparse
import csv
import io
from pathlib import Path
from typing import Any

import pytest
from snapshot_watch import Watch

from loadgen.cli.commands import main as cli_main
from loadgen.cli.flags import RunFlags, add_run_flags
from loadgen.cli.resolve import resolve
from loadgen.config import RampPlan
from loadgen.exits import UsageError
from loadgen.profile import parse_profile
from loadgen.record import read_record
from loadgen.run.config import RunConfig
from loadgen.run.detail import COLUMNS, detail_path
from loadgen.run.engine import Engine
from loadgen.run.shipping import WindowBook
from loadgen.types import Outcome, RequestResult, Target

PROFILE = """
name = "detail-small"
[[bucket]]
name = "short"
input = 24
output = 32
[sampling]
ignore_eos = true
"""


pytestmark = pytest.mark.sim("h200-llama8b", seed=7, error_rate=0.1)


def run(sim: Any, out: Path, detail: bool, plan: RampPlan) -> None:
    config = RunConfig(
        target=Target(url=sim.url),
        profile=parse_profile(PROFILE, source="<detail-small>"),
        plan=plan,
        out=str(out),
        save_requests_detail=detail,
    )
    engine = Engine(config)
    engine.start()
    outcome = engine.wait(40)
    assert outcome is not None and outcome.state == "finished", outcome


def test_one_row_per_counted_request_in_time_order(sim: Any, tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    run(sim, out, detail=True, plan=RampPlan((2, 4), step_s=1.5, warmup_s=0.3))
    record = read_record(out)
    path = Path(detail_path(str(out)))
    assert path.name == "run.requests.csv" and record.header["requests_detail"] == str(path)
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames or ()) == COLUMNS
        rows = list(reader)
    assert len(record.steps) == 2
    for step in record.steps:
        mine = [r for r in rows if int(r["step"]) == step["step"]]
        assert len(mine) == step["ok"] + step["error_count"] + step["cancelled"], step["step"]
        assert sum(r["outcome"] == "ok" for r in mine) == step["ok"]
        errors: dict[str, int] = {}
        for r in mine:
            if r["outcome"] == "error":
                errors[r["error_kind"]] = errors.get(r["error_kind"], 0) + 1
        assert errors == step["errors"]
        # every row was due inside the step's measurement window (host monotonic clock): from its start, and
        # up to its end plus the moment its worker took the closing flush (a request sent before that is the
        # step's; a loaded machine delays the flush by milliseconds, a second is far beyond it)
        t0, t1 = step["window_t0_ns"], step["window_t1_ns"] + 1_000_000_000
        assert all(t0 <= int(r["intended_ns"]) <= t1 for r in mine)
    assert any(r["outcome"] == "error" for r in rows), "the simulator injects errors: some rows say so"
    for r in rows:
        times = [int(r[k]) for k in ("intended_ns", "sent_ns", "first_token_ns", "end_ns") if r[k]]
        assert times == sorted(times), r
        assert r["bucket"] == "short" and int(r["input_tokens"] or 24) > 0
        if r["outcome"] == "ok":
            assert int(r["output_tokens"]) == 32 and r["first_token_ns"]
            ttft_ms = (int(r["first_token_ns"]) - int(r["intended_ns"])) / 1e6
            assert float(r["ttft_ms"]) == pytest.approx(ttft_ms, abs=1e-3)
    # the 1 Hz series: each step line carries the points since the one before, the end event the rest
    series = [s["series"] for s in record.steps] + [record.events[-1]["series"]]
    times = [t for columns in series for t in columns["t_s"]]
    assert len(times) >= 3 and times == sorted(times)
    assert all(len(c["out_tok_s"]) == len(c["t_s"]) == len(c["req_s"]) for c in series)
    assert max(v for c in series for v in c["out_tok_s"]) > 0
    starts = [s["started_s"] for s in record.steps]
    assert starts == sorted(starts) and starts[0] >= 0


def test_no_file_and_no_rows_without_the_flag(sim: Any, tmp_path: Path) -> None:
    out = tmp_path / "plain.jsonl"
    run(sim, out, detail=False, plan=RampPlan((2,), step_s=1.0, warmup_s=0.0))
    assert not Path(detail_path(str(out))).exists()
    assert read_record(out).header["requests_detail"] is None
    shipped: list[Any] = []
    book = WindowBook(0, shipped.append)
    book.record(book.sending(), RequestResult(Outcome.OK, 1, 2, 5, first_token_ns=3, output_tokens=1))
    assert book.rows is None  # off: no row is built at all
    book.ship(0, dict)
    assert shipped and all(m.rows == () for m in shipped)


def test_the_flag_reaches_the_config_and_refuses_an_existing_file(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    parser = argparse.ArgumentParser()
    add_run_flags(parser)

    def config(*extra: str) -> RunConfig:
        args = parser.parse_args(["http://127.0.0.1:9", "--out", str(out), *extra])
        return resolve(RunFlags.from_namespace(args), args.url)

    assert config("--save-requests-detail").save_requests_detail
    assert not config().save_requests_detail
    Path(detail_path(str(out))).write_text("taken\n")
    with pytest.raises(UsageError, match="requests.csv already exists"):
        config("--save-requests-detail")


def test_one_step_number_in_the_header_a_mark_the_record_steps_csv_and_requests_csv(
    sim: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 19 (9): the step the header names while a mark is made is the number the mark, the step line,
    the end's best step, steps.csv and requests.csv all give it — counted from 1."""
    out = tmp_path / "numbers.jsonl"
    config = RunConfig(
        target=Target(url=sim.url),
        profile=parse_profile(PROFILE, source="<detail-small>"),
        plan=RampPlan((2, 4), step_s=1.5, warmup_s=0.3),
        out=str(out),
        save_requests_detail=True,
    )
    watch = Watch()
    engine = Engine(config, on_snapshot=watch)
    engine.start()
    snap = watch.until(lambda s: s.step_index == 1 and s.phase == "measure", 30, "the second step measuring")
    header_number = snap.step_index + 1  # what the console's header and headless print: "step 2/2"
    engine.mark("at four streams")
    outcome = engine.wait(40)
    assert outcome is not None and outcome.state == "finished", outcome
    record = read_record(out)
    (mark,) = [e for e in record.events if e["kind"] == "mark"]
    line = next(s for s in record.steps if s["level"] == 4)
    assert header_number == 2 and mark["step"] == 2 and line["step"] == 2
    assert "at four streams" in line["marks"]
    assert [s["step"] for s in record.steps] == [1, 2] and "index" not in line
    best = record.events[-1]["best_step"]
    assert outcome.best_step is not None and best == outcome.steps[outcome.best_step].index + 1
    with Path(detail_path(str(out))).open(newline="") as f:
        rows = list(csv.DictReader(f))
    mine = [r for r in rows if int(r["step"]) == 2]
    assert mine and len(mine) == line["ok"] + line["error_count"] + line["cancelled"]
    assert {int(r["step"]) for r in rows} == {1, 2}
    assert cli_main(["report", str(out), "--format", "csv"]) == 0
    table = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(int(r["step"]), int(r["level"])) for r in table] == [(1, 2), (2, 4)]
    assert [r["step"] for r in table if r["best"] == "true"] == [str(best)]
