"""How fast the followed knee re-converges on a server that slowed mid-run (issue 32: within 60 s).

Run: ``python benchmarks/bench_knee_drift.py [--seeds 3] [--slots 20] [--drift 10] [--hi 64]
[--drift-after 20] [--step-seconds 30]``. Per seed: the console's search (as ``f`` starts it, over
``1:HI``) against ``bench_knee.py``'s server — the simulator's batching engine, every step exactly 10 ms, at
most ``--slots`` sequences running, requests of 50 to 150 output tokens, SLO TTFT p95 <= 100 ms, so the
knee is the slot count — finds the first knee and follows it; ``--drift-after`` seconds later the server
drops to ``--drift`` slots (``POST /_sim/slots``, a mark in the record at that moment) and the held step
misses. Prints the first answer and when it came, when the server changed, when the run said the knee moved
(detection), when the new answer came and the re-convergence time (new answer - change), whether the new
answer holds the new slot count, and the re-search's probes; then the re-convergence times' median and
maximum. Times are on the run's clock (the record's ``elapsed_s``). Asserts nothing. A server that gains
slots (``--slots 10 --drift 20``) measures the knee followed upward: the held step meets, the probe above it
meets once the slots are there, and the knee is found again above.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # a checkout without install
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_knee import PROFILE, knee_server  # noqa: E402 - the known knee's server and profile

from loadgen.config import SLO  # noqa: E402
from loadgen.profile import parse_profile  # noqa: E402
from loadgen.run.config import RunConfig  # noqa: E402
from loadgen.run.engine import Engine  # noqa: E402
from loadgen.run.protocol import Mark, StartSearch  # noqa: E402
from loadgen.sim.handle import ProcessSimHandle  # noqa: E402
from loadgen.snapshot import Snapshot  # noqa: E402
from loadgen.types import Target  # noqa: E402

LIMIT_S = 900.0  # one seed's whole run, at most


def until(snaps: queue.Queue[Snapshot], done: Callable[[Snapshot], bool], deadline: float) -> Snapshot:
    """The first snapshot published for which ``done`` holds, by ``deadline`` (monotonic)."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise SystemExit("not within the time allowed")
        try:
            snap = snaps.get(timeout=left)
        except queue.Empty:
            continue
        if snap.state == "failed":
            raise SystemExit(f"the run failed: {snap.message}")
        if done(snap):
            return snap


def following(snap: Snapshot, other_than: float | None = None) -> bool:
    """The knee followed (not the probe of the level above it), at a level other than ``other_than``."""
    view = snap.search
    return (
        view is not None
        and view.state == "following"
        and view.why != "room above"
        and view.level != other_than
    )


def drift_run(sim: ProcessSimHandle, args: argparse.Namespace, seed: int, out: str) -> list[dict[str, Any]]:
    """One console run: search, follow, the server drops to ``args.drift`` slots, re-found; its events."""
    config = RunConfig(
        Target(sim.url),
        parse_profile(PROFILE, source="<bench_knee_drift>"),
        level=1,
        out=out,
        telemetry=False,
        seed=seed,
        slo=SLO(ttft_p95_ms=100.0),
        after_plan="idle",
        auto_step_s=args.step_seconds,  # a probe's longest, and a held step's length
    )
    snaps: queue.Queue[Snapshot] = queue.Queue()
    engine = Engine(config, on_snapshot=snaps.put)
    deadline = time.monotonic() + LIMIT_S
    engine.start()
    try:
        until(snaps, lambda s: s.state == "running", deadline)
        engine.send(StartSearch(1.0, args.hi))
        first = until(snaps, following, deadline)
        assert first.search is not None
        until(snaps, lambda s: s.elapsed_s >= first.elapsed_s + args.drift_after, deadline)
        was = sim.set_slots(args.drift)["was"]
        engine.send(Mark(f"the server drops from {was} to {args.drift} slots"))
        until(snaps, lambda s: following(s, first.search.level if first.search else None), deadline)
    finally:
        engine.stop()
        engine.wait(30)
    lines = [json.loads(line) for line in Path(out).read_text().splitlines()]
    return [x for x in lines if x.get("type") == "event"]


def report(seed: int, events: list[dict[str, Any]], drift: int) -> float | None:
    """One seed's lines; its re-convergence time (None when the run did not re-find the knee)."""
    search = [e for e in events if e["kind"] == "search"]
    (mark,) = [e for e in events if e["kind"] == "mark"]
    done = [e for e in search if e["action"] == "done"]
    moved = [e for e in search if e["action"] == "moved"]
    answers = [e for e in events if e["kind"] == "find_max"]
    if len(done) < 2 or not moved or len(answers) < 2:
        print(f"seed {seed}: NOT re-found ({[e['action'] for e in search]})")
        return None
    first, again, seen = done[0], done[1], moved[0]
    changed = mark["elapsed_s"]
    took = again["elapsed_s"] - changed
    new = answers[1]["max_level"]
    print(
        f"seed {seed}: {'holds' if new == drift else 'WRONG'}  first answer {answers[0]['max_level']:g} at "
        f"{first['elapsed_s']:.1f} s; server changed at {changed:.1f} s; moved said at {seen['elapsed_s']:.1f} s "
        f"(+{seen['elapsed_s'] - changed:.1f} s: {seen.get('figure', '?')} {seen.get('interval')}); new answer "
        f"{new:g} at {again['elapsed_s']:.1f} s: re-converged in {took:.1f} s"
    )
    for p in answers[1]["probes"]:
        why = f"  again: {p['why']}" if p["why"] else ""
        print(f"    {p['level']:>5g} {str(p['verdict']):>9}  step {p['step']}  margin {p['margin']}{why}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--slots", type=int, default=20, help="the server's slots at first: the first knee")
    parser.add_argument("--drift", type=int, default=10, help="its slots after the change: the new knee")
    parser.add_argument("--hi", type=float, default=64.0)
    parser.add_argument(
        "--drift-after", type=float, default=20.0, help="s after the first answer is followed"
    )
    parser.add_argument("--step-seconds", type=float, default=30.0)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="ramp-bench-knee-drift-")
    times: list[float] = []
    for seed in range(1, args.seeds + 1):
        sim = knee_server(seed, args.slots)
        try:
            events = drift_run(sim, args, seed, os.path.join(folder, f"seed{seed}.jsonl"))
        finally:
            sim.stop()
        took = report(seed, events, args.drift)
        if took is not None:
            times.append(took)
    if times:
        print(
            f"\n{len(times)} of {args.seeds} re-found; re-convergence: median {statistics.median(times):.1f} s, "
            f"max {max(times):.1f} s; load average {os.getloadavg()[0]:.1f}"
        )


if __name__ == "__main__":
    main()
