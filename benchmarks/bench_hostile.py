"""ramp's memory against hostile input (issue 20): the main process's peak RSS, and the peak of any of its
processes, for a run against an endless ``/metrics``, a 50 MB ``/metrics``, an SSE line that never ends, a
50 MB text dataset and a 50 MB ShareGPT JSON array (two workers each) and a 50 MB trace of which the window uses 300 rows.

Run: ``python benchmarks/bench_hostile.py [--bound-mb 300] [--step-s 3] [--only NAME]``. Each case is one ``ramp run
--headless`` of one step against a fault server of the test suite's own (``tests/hostile_servers.py``) in
this process. Peaks are each process's ``VmHWM`` (the kernel's high-water mark), read every 20 ms while
it runs (``hostile_servers.ramp_measured``): "main" is ramp's own, "any" the largest of ramp and its
workers. Prints a table; exits 1 when a main process went past the bound.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from fault_servers import Handler, stream_ok  # noqa: E402
from hostile_servers import (  # noqa: E402
    WORDS,
    big_text,
    endless_line,
    endless_metrics,
    huge_metrics,
    ramp_measured,
    serving,
)


def big_sharegpt(path: Path, megabytes: int) -> Path:
    """A ShareGPT-style JSON array (one line, as ShareGPT's own files are)."""
    rng = random.Random(2)
    with path.open("w") as f:
        f.write("[")
        first = True
        while f.tell() < megabytes * 1_000_000:
            for _ in range(1000):
                turns = [
                    {"from": who, "value": " ".join(rng.choices(WORDS, k=40))} for who in ("human", "gpt") * 2
                ]
                f.write(
                    ("" if first else ", ") + json.dumps({"id": str(rng.random()), "conversations": turns})
                )
                first = False
        f.write("]")
    return path


def big_trace(path: Path, megabytes: int) -> Path:
    with path.open("w") as f:
        t = 0
        while f.tell() < megabytes * 1_000_000:
            for _ in range(1000):
                t += 10
                row = {"timestamp": t, "input_length": 512, "output_length": 4, "hash_ids": list(range(40))}
                f.write(json.dumps(row) + "\n")
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bound-mb", type=float, default=300.0, help="the main process's bound")
    parser.add_argument("--step-s", type=float, default=3.0, help="seconds of the one step each case runs")
    parser.add_argument("--only", default="", help="run only the cases whose name holds this text")
    opts = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-hostile-"))
    profile = folder / "tiny.toml"
    profile.write_text("[[bucket]]\ninput = 8\noutput = 2\n")
    run = ["--headless", "--steps", "1", "--step-seconds", f"{opts.step_s:g}", "--warmup", "0"]
    text, trace = big_text(folder / "big.txt", 50), big_trace(folder / "big.jsonl", 50)
    array = big_sharegpt(folder / "sharegpt.json", 50)
    tiny, off = ["--profile", str(profile)], ["--no-metrics"]
    cases: list[tuple[str, Handler | None, Handler, list[str]]] = [
        ("endless /metrics", endless_metrics(), stream_ok, tiny),
        ("50 MB /metrics", huge_metrics(50), stream_ok, tiny),
        ("endless SSE line", None, endless_line, [*tiny, *off]),
        ("50 MB dataset, 2 workers", None, stream_ok, ["--dataset", str(text), "--workers", "2", *off]),
        ("50 MB JSON array, 2 workers", None, stream_ok, ["--dataset", str(array), "--workers", "2", *off]),
        ("50 MB trace, 300 rows", None, stream_ok, ["--trace", str(trace), "--trace-window", "0:3", *off]),
    ]
    print(f"ramp's peak RSS against hostile input (bound for the main process: {opts.bound_mb:g} MB)")
    print(f"  {'case':<26} {'exit':>4} {'main MB':>8} {'any MB':>7} {'wall s':>7}  verdict")
    worst = 0.0
    for at, (name, page, completions, extra) in enumerate(cases):
        if opts.only not in name:
            continue
        server = serving(metrics=page, completions=completions)
        try:
            args = ["run", server.url, *run, *extra, "--out", str(folder / f"r{at}.jsonl")]
            started = time.monotonic()
            ran = ramp_measured(args, folder, 120)
            wall = time.monotonic() - started
        finally:
            server.stop()
        worst = max(worst, ran.main_rss_mb)
        verdict = "ok" if ran.main_rss_mb < opts.bound_mb else "OVER"
        print(
            f"  {name:<26} {ran.returncode:>4} {ran.main_rss_mb:>8.0f} {ran.peak_rss_mb:>7.0f} {wall:>7.1f}  {verdict}"
        )
    return 0 if worst < opts.bound_mb else 1


if __name__ == "__main__":
    sys.exit(main())
