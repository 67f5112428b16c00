"""Issue 20, cases 1 and 6: files that would take the host or hang the run get one line naming the file,
the line and the field, exit 2, and no traceback: a trace length of 1e12 (no prompt built: the process
stays small), lengths past the server's max_model_len (or clamped by --fit-context), JSON nested past
Python's recursion limit, a CSV field past csv's limit, trace timestamps of 1e300 / NaN / inf / negative."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fault_servers import answering
from hostile_servers import ramp_measured, serving

from loadgen.cli.commands import main
from loadgen.exits import EXIT_USAGE
from loadgen.sources import TraceOptions, load_trace

URL = "http://127.0.0.1:9"  # nothing listens: every case below is refused before the probe


def refused(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["run", URL, "--headless", *args]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "Traceback" not in err and "Error:" not in err and len(err.strip().splitlines()) == 1, err
    return err.strip()


def test_a_trace_length_of_1e12_is_refused_before_any_prompt_is_built(tmp_path: Path) -> None:
    trace = tmp_path / "huge.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 10, "output_length": 5}\n'
                     '{"timestamp": 5, "input_length": 1e12, "output_length": 5}\n')  # fmt: skip
    server = answering()
    try:
        ran = ramp_measured(
            ["run", server.url, "--headless", "--trace", str(trace), "--no-metrics"], tmp_path
        )
    finally:
        server.stop()
    assert ran.returncode == EXIT_USAGE, ran.stderr
    assert ran.stderr.strip() == (
        f"ramp: {trace}:2: input_length: 1,000,000,000,000 tokens is past any model's context "
        "(at most 10,000,000)"
    ), ran.stderr
    assert 0 < ran.peak_rss_mb < 300, ran.peak_rss_mb  # it took the host's RAM (killed at 24 GB)


def test_a_trace_past_the_servers_max_model_len_is_refused_or_clamped(tmp_path: Path) -> None:
    trace = tmp_path / "long.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 100, "output_length": 5}\n'
                     '{"timestamp": 5, "input_length": 4000, "output_length": 200}\n')  # fmt: skip
    server = serving(max_model_len=2048)
    args = ["run", server.url, "--headless", "--trace", str(trace), "--no-metrics", "--steps", "1"]
    try:
        ran = ramp_measured([*args, "--out", str(tmp_path / "r.jsonl")], tmp_path)
        fitted = ramp_measured(
            [*args, "--fit-context", "--trace-window", "0:1", "--out", str(tmp_path / "f.jsonl")], tmp_path
        )
    finally:
        server.stop()
    assert ran.returncode == EXIT_USAGE, ran.stderr
    assert (
        f"{trace}:2: input_length + output_length: 4,000 + 200 tokens is past the server's max_model_len 2,048"
        in ran.stderr
    )
    assert "Traceback" not in ran.stderr and len(ran.stderr.strip().splitlines()) == 1, ran.stderr
    assert fitted.returncode in (0, 1) and "Traceback" not in fitted.stderr, fitted.stderr  # 1: the SLO


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_json_nested_past_the_recursion_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "deep.jsonl"
    data.write_text('{"prompt": "hi"}\n{"prompt": ' + nested(200_000) + "}\n")
    assert refused(capsys, "--dataset", str(data), "--dataset-format", "openai").endswith(
        f"{data}:2: json: nested too deeply to read (thousands of levels)"
    )
    array = tmp_path / "deep.json"
    array.write_text("[" + nested(200_000) + "]")
    assert f"{array}: record #1: json: nested too deeply" in refused(
        capsys, "--dataset", str(array), "--dataset-format", "openai"
    )
    requests = tmp_path / "deep-requests.jsonl"
    requests.write_text('{"max_tokens": 4, "messages": ' + nested(200_000) + "}\n")
    assert refused(capsys, "--requests", str(requests)).endswith(
        f"{requests}:1: json: nested too deeply to read (thousands of levels)"
    )


def test_a_csv_field_past_the_csv_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "wide.csv"
    trace.write_text(
        "timestamp,input_length,output_length,hash_ids\n0,10,5,1\n1,10,5," + "7 " * 1_000_000 + "\n"
    )
    err = refused(capsys, "--trace", str(trace))
    assert f"{trace}:3: csv: cannot read the row: field larger than field limit" in err, err


@pytest.mark.parametrize(
    ("stamp", "said"),
    [
        ("1e300", "timestamp: 1e+300 s after the first arrival: longer than a week"),
        ("NaN", "timestamp: expected a number, got nan"),
        ("Infinity", "timestamp: expected a number, got inf"),
        ("-5", "timestamp: expected a number >= 0, got -5"),
    ],
)
def test_trace_timestamps_that_cannot_be_scheduled(
    stamp: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0.5, "input_length": 10, "output_length": 5}\n'
                     f'{{"timestamp": {stamp}, "input_length": 10, "output_length": 5}}\n')  # fmt: skip
    err = refused(capsys, "--trace", str(trace), "--trace-time-unit", "s")
    assert f"{trace}:2: {said}" in err, err


def test_requests_t_s_of_1e300_and_nan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = {"max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}
    for t_s, said in (
        (1e300, "t_s: 1e+300 s after the first arrival"),
        (float("nan"), "t_s: expected seconds >= 0, got nan"),
    ):
        path = tmp_path / "r.jsonl"
        path.write_text(json.dumps({**base, "t_s": 0}) + "\n" + json.dumps({**base, "t_s": t_s}) + "\n")
        assert f"{path}:2: {said}" in refused(capsys, "--requests", str(path))


def test_an_unsorted_trace_is_read_in_time_order(tmp_path: Path) -> None:
    trace = tmp_path / "unsorted.jsonl"
    rows = [(3.0, 30), (1.0, 10), (2.0, 20)]
    trace.write_text(
        "".join(json.dumps({"timestamp": t, "input_length": n, "output_length": 1}) + "\n" for t, n in rows)
    )
    source = load_trace(TraceOptions(str(trace), time_unit="s"))
    assert [(e.t_s, e.input_tokens, e.line) for e in source.entries] == [
        (0.0, 10, 2),
        (1.0, 20, 3),
        (2.0, 30, 1),
    ]
