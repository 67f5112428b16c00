"""What ``ramp attach`` costs: the run's side (``/snapshot``'s encoding, ``loadgen.observe.share``) and the attach
console's (its decoding, ``loadgen.observe.remote``), per snapshot, as a run grows steps.

Run: ``python benchmarks/bench_share.py [--requests 20000] [--steps 1,30,120] [--hz 4]``

The snapshot is ``bench_exporter``'s (three windows over ``--requests`` requests' values drawn through the
real ``Accumulator``) with N finished steps like it (each its own histograms, as a step line has them).
"Cold" is a snapshot seen for the first time; "next" is the one after it, whose finished steps the share
and the reader already hold (the steady state of a run: one snapshot every ``1/hz`` s, a step finishing
every few hundred). CPU is ``time.process_time()``, so the numbers hold on a busy machine. Asserts nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_exporter import accumulator, cpu_per_call, snapshot  # noqa: E402

from loadgen.observe.remote import decode  # noqa: E402
from loadgen.observe.share import SnapshotShare, shared_snapshot  # noqa: E402
from loadgen.observe.snapshot_json import SnapshotReader  # noqa: E402
from loadgen.snapshot import SLOVerdict, Snapshot, StepSummary  # noqa: E402

SECRETS = ("sk-a-key-to-scrub-0123456789",)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--steps", default="1,30,120")
    parser.add_argument("--hz", type=float, default=4.0)
    opts = parser.parse_args()
    acc = accumulator(opts.requests)
    base = snapshot(acc)
    stats = acc.stats("step", 30.0)
    for count in (int(n) for n in opts.steps.split(",")):
        steps = tuple(
            StepSummary(
                index=i, mode="closed", level=2**i % 512 or 1, rate_rps=None, arrival="closed", warmup_s=5.0,
                window_s=30.0, duration_s=35.0, stats=stats, verdict=SLOVerdict(True), client_bound=False,
                window_t0_ns=i * 10**9, window_t1_ns=i * 10**9 + 30 * 10**9,
            )
            for i in range(count)
        )  # fmt: skip
        measure(dataclasses.replace(base, steps=steps), opts.hz)


def measure(snap: Snapshot, hz: float) -> None:
    """One snapshot's cold and next CPU on either side, printed on a line."""
    share, reader = SnapshotShare(SECRETS), SnapshotReader()
    body = share.reply(snap)[0]
    decode(body, "bench", reader)
    seq = [snap.seq]

    def next_encoding() -> bytes:
        seq[0] += 1
        return share.reply(dataclasses.replace(snap, seq=seq[0]))[0]

    cold_encode = cpu_per_call(lambda: shared_snapshot(snap, SECRETS))
    next_encode = cpu_per_call(next_encoding)
    cold_decode = cpu_per_call(lambda: decode(body, "bench"))
    next_decode = cpu_per_call(lambda: decode(body, "bench", reader))
    print(
        f"{len(snap.steps):4d} steps  {len(body) / 1024:6.0f} KiB   run side: cold {cold_encode * 1e3:5.1f} ms, "
        f"next {next_encode * 1e3:4.1f} ms ({next_encode * hz * 100:4.1f} % of a core at {hz:g} Hz)   "
        f"attach: cold {cold_decode * 1e3:5.1f} ms, next {next_decode * 1e3:4.1f} ms ({next_decode * hz * 100:4.1f} %)"
    )


if __name__ == "__main__":
    main()
