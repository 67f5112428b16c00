"""Issue 20, case 5: a big input file is indexed, not held whole per worker. A 50 MB text dataset cost
~600 MB of RSS (its bytes, text, lines and records, in the main process and again in each worker); now
the main process and each worker hold 16 bytes a line and read the lines they replay."""

from __future__ import annotations

import json
import pickle
import random
from pathlib import Path

from hostile_servers import WORDS, big_text, ramp_measured, serving

from loadgen.sources import DatasetOptions, load_dataset

RSS_BOUND_MB = 200  # measured ~80 MB (main process and workers alike), ~600 MB before


def test_a_50_mb_dataset_run_stays_small_with_two_workers(tmp_path: Path) -> None:
    data = big_text(tmp_path / "big.txt", 50)
    server = serving()
    args = ["--dataset", str(data), "--steps", "1", "--step-seconds", "2", "--warmup", "0", "--no-metrics"]
    try:
        ran = ramp_measured(
            ["run", server.url, "--headless", *args, "--workers", "2", "--out", str(tmp_path / "r.jsonl")],
            tmp_path,
            timeout_s=120,
        )
    finally:
        server.stop()
    assert ran.returncode in (0, 1), ran.stderr  # 1: the default profile's SLO (no decode figure)
    lines = [json.loads(x) for x in (tmp_path / "r.jsonl").read_text().splitlines()]
    steps = [x for x in lines if x.get("type") == "step"]
    assert steps and steps[0]["ok"] > 0, steps
    assert ran.peak_rss_mb < RSS_BOUND_MB, ran.peak_rss_mb


def test_an_indexed_dataset_reads_the_same_records_and_pickles_small(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    rows = [
        {"messages": [{"role": "user", "content": f"q{i} é"}, {"role": "assistant", "content": "a"}]}
        for i in range(3000)
    ]
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n\n")
    source = load_dataset(DatasetOptions(str(path)))
    copy = pickle.loads(pickle.dumps(source))
    assert len(copy.conversations) == 3000 and copy.conversations[2999].turns[0].user == "q2999 é"
    assert copy.conversations[0].line == 1 and copy.conversations[0].turns[0].reply == "a"
    assert len(pickle.dumps(source)) < 3000 * 40  # offsets, not the text
    path.write_text("changed\n")
    fresh = pickle.loads(pickle.dumps(source))
    try:
        fresh.conversations[0]
    except ValueError as exc:
        assert "changed since the run read it" in str(exc)
    else:
        raise AssertionError("a changed file was replayed")


def big_trace(path: Path, megabytes: int) -> Path:
    ids = list(range(40))  # ~200 bytes a row: a Mooncake-like row with its prefix blocks
    with path.open("w") as f:
        t = 0
        while f.tell() < megabytes * 1_000_000:
            rows = (
                {"timestamp": (t := t + 10), "input_length": 512, "output_length": 4, "hash_ids": ids}
                for _ in range(1000)
            )
            f.write("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_50_mb_trace_holds_only_its_window(tmp_path: Path) -> None:
    trace = big_trace(tmp_path / "big.jsonl", 50)  # an arrival every 10 ms: 0:3 s is 300 of ~250k rows
    server = serving()
    args = [
        "--trace",
        str(trace),
        "--trace-window",
        "0:3",
        "--no-metrics",
        "--out",
        str(tmp_path / "r.jsonl"),
    ]
    try:
        ran = ramp_measured(["run", server.url, "--headless", *args], tmp_path, timeout_s=120)
    finally:
        server.stop()
    assert ran.returncode in (0, 1), ran.stderr
    header = json.loads((tmp_path / "r.jsonl").read_text().splitlines()[0])
    assert "300 arrivals over 3 s" in json.dumps(header), ran.stderr
    assert ran.peak_rss_mb < RSS_BOUND_MB, ran.peak_rss_mb


def test_a_50_mb_request_file_is_read_on_demand(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    rng = random.Random(2)
    with path.open("w") as f:
        seq = 0
        while f.tell() < 50_000_000:
            for _ in range(500):
                seq += 1
                text = " ".join(rng.choices(WORDS, k=80))
                row = {
                    "t_s": seq / 1000,
                    "seq": seq,
                    "max_tokens": 2,
                    "messages": [{"role": "user", "content": text}],
                }
                f.write(json.dumps(row) + "\n")
    server = serving()
    # --level 1: one closed-loop user takes the requests in order (the file's times, 100 s, ignored)
    args = [
        "--requests",
        str(path),
        "--level",
        "1",
        "--steps",
        "1",
        "--step-seconds",
        "2",
        "--warmup",
        "0",
        "--no-metrics",
    ]
    try:
        ran = ramp_measured(
            ["run", server.url, "--headless", *args, "--out", str(tmp_path / "r.jsonl")],
            tmp_path,
            timeout_s=120,
        )
    finally:
        server.stop()
    assert ran.returncode in (0, 1), ran.stderr
    assert ran.peak_rss_mb < RSS_BOUND_MB, ran.peak_rss_mb
