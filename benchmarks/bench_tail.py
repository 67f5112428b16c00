"""Where the client's first-token delay goes, stage by stage, at 64 / 256 / 1,024 streams.

Run: ``python benchmarks/bench_tail.py [--streams 64,256,1024] [--seconds 15] [--warmup 3] [--speed 0.5]
[--output 64] [--no-pin]``. Prints a table; asserts nothing.

Each level is one closed-loop step of the whole engine (controller, one worker process, deltas) against the
simulator's "fast" preset (a fixed TTFT and time per token, whatever the load, like a mock), the simulator and
this process pinned to CPU 0, the worker to CPU 1 (``--no-pin``: wherever the OS puts them). Every request
carries an ``X-Request-Id``; the worker's trace (``RAMP_TRACE_DIR``) and the simulator's ground truth are
joined through it, as ``tests/integration/test_accuracy.py`` does, and ``RAMP_TRACE_READS=1`` makes the worker keep a
timeline of its loop (``loadgen.run.readtrace``: every read callback, task step, shipment and collection).

For each request sent after the warm-up, the time from the simulator's write of its first token to the
client's stamp of it (``read delay``) is split along that timeline:

* ``idle``: the loop ran none of the work below: the byte was not readable yet, or the loop was waking (the
  kernel's socket and scheduler path; with CPU 1 to itself, this is the socket wait), or Python outside
  any traced callback (timers, the command thread's handles, uvloop itself);
* ``reads``: other connections' read callbacks (a ``recv`` and a stamp) and parses (``Pool.parse_reads``:
  httptools + SSE sink, a loop turn's reads at once) served before this one: the order a burst
  of ready sockets is served in;
* ``tasks``: task steps (a finished request's result and recording, the next request's send, the tick);
* ``ship``: interval shipments (each window's interval ended, its delta queued) and the pieces of their
  encoding (a histogram each, run between reads: ``Worker._encode``), until sent to the controller;
* ``gc``: garbage collections (under whichever of the above they interrupted);
* ``preempted``: wall time inside those callbacks while the OS ran something else (their CPU time, taken
  with ``thread_time_ns``, is what the four above count);
* ``stamp``: the read callback's entry to the stamp it records (what runs before ``monotonic_ns``);

``own work`` is their sum without ``idle`` and ``preempted``: the client's own CPU between the write and
the stamp, the read delay a machine whose worker core is not shared would show beyond the socket wait; and,
beside them, ``parse``: this read's own callback after its stamp (does not delay this request; it is
what a later socket of the same burst waits for). The rest of a client TTFT beyond the server's: ``send
delay`` (intended -> sent) and ``request leg`` (sent -> the simulator's clock start, once aiohttp has read
the request: loopback and its dispatch). ``TTFT p99 - truth`` is the client's TTFT p99 minus the
simulator's (its arrival to its write, per request); ``server late`` is the simulator's own first-token
lateness (its write minus the time its engine step made the token), the server's share of any tail.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from loadgen.config import RampPlan  # noqa: E402 - after the path, for a checkout without install
from loadgen.profile import parse_profile  # noqa: E402
from loadgen.run.config import RunConfig  # noqa: E402 - after the path, for a checkout without install
from loadgen.run.engine import Engine  # noqa: E402
from loadgen.sim import build_config, spawn_sim_process  # noqa: E402
from loadgen.types import Target  # noqa: E402

IDLE, TASK, READ, SHIP, GC = range(5)  # timeline labels, by priority: a GC inside a shipment counts as GC
LABELS = ("idle", "tasks", "reads", "ship", "gc")  # indexed by the labels above
LABEL_OF = {name: k for k, name in enumerate(LABELS)}
STAGES = (
    "read delay",
    "own work",
    "idle",
    "reads",
    "tasks",
    "ship",
    "gc",
    "preempted",
    "stamp",
    "parse",
    "send delay",
    "request leg",
)


@dataclass(frozen=True)
class Timeline:
    """One worker's loop, as disjoint segments: ``times[k]`` starts segment k, labelled ``label[k]``, its
    enclosing read or task step on CPU for ``share[k]`` of its wall time; ``cum[L][k]`` (``cum_cpu``): the
    wall (CPU) time labelled L before ``times[k]``."""

    times: np.ndarray
    label: np.ndarray
    share: np.ndarray
    cum: np.ndarray
    cum_cpu: np.ndarray
    reads: np.ndarray  # (n, 4): entry, stamp, exit, CPU

    def labelled(self, t0: np.ndarray, t1: np.ndarray, cpu: bool = False) -> np.ndarray:
        """(len(LABELS), n): how much of each [t0, t1) carried each label (of it on CPU, with ``cpu``)."""
        return self._upto(t1, cpu) - self._upto(t0, cpu)

    def _upto(self, t: np.ndarray, cpu: bool) -> np.ndarray:
        k = np.clip(np.searchsorted(self.times, t, side="right") - 1, 0, len(self.times) - 1)
        out = (self.cum_cpu if cpu else self.cum)[:, k].astype(np.float64)
        inside = np.maximum(0, t - self.times[k]) * (self.share[k] if cpu else 1.0)
        out[self.label[k], np.arange(len(t))] += inside
        before = t < self.times[0]  # before the first event: idle, counted back from it
        out[IDLE, before] += t[before] - self.times[0]
        return out


def _series(npz: Any, name: str) -> np.ndarray:
    """A series of the worker's timeline; empty when its checkout did not keep it (an older commit)."""
    return npz[name] if name in npz else np.zeros(0, np.int64)


def timeline(npz: Any) -> Timeline:
    """The worker's segments: at every instant the highest-priority kind of work active then."""
    reads, steps = npz["reads"].reshape(-1, 4), npz["steps"].reshape(-1, 3)
    ships, gcs = npz["ships"].reshape(-1, 2), npz["gcs"].reshape(-1, 3)
    encodes = _series(npz, "encodes").reshape(-1, 2)
    parses = _series(npz, "parses").reshape(-1, 3)
    spans = [(reads[:, 0], reads[:, 2], READ), (parses[:, 0], parses[:, 1], READ)]
    spans += [(steps[:, 0], steps[:, 1], TASK)]
    spans += [(ships[:, 0], ships[:, 1], SHIP), (encodes[:, 0], encodes[:, 1], SHIP)]
    spans += [(gcs[:, 0], gcs[:, 1], GC)]
    times = np.concatenate([np.concatenate([a, b]) for a, b, _ in spans])
    kinds = np.concatenate([np.full(2 * len(a), k) for a, _, k in spans])
    deltas = np.concatenate([np.concatenate([np.ones(len(a)), -np.ones(len(a))]) for a, _, _ in spans])
    order = np.argsort(times, kind="stable")
    times, kinds, deltas = times[order], kinds[order], deltas[order]
    label = np.zeros(len(times), dtype=np.int64)
    for k in (TASK, READ, SHIP, GC):  # later kinds win: the priority order
        active = np.cumsum(np.where(kinds == k, deltas, 0)) > 0
        label[active] = k
    # Reads, parses and task steps never overlap (each is one loop callback): the one a segment lies in says how
    # much of its wall time the thread was on CPU; the rest, the OS ran something else.
    top = np.concatenate([reads[:, [0, 2, 3]], parses, steps])
    top = top[np.argsort(top[:, 0], kind="stable")]
    at = np.searchsorted(top[:, 0], times, side="right") - 1
    within = (at >= 0) & (times < top[np.maximum(at, 0), 1])
    wall = np.maximum(1, top[:, 1] - top[:, 0])
    share = np.where(within, np.clip(top[np.maximum(at, 0), 2] / wall[np.maximum(at, 0)], 0, 1), 1.0)
    length = np.diff(times, append=times[-1])
    cum = np.zeros((len(LABELS), len(times)), dtype=np.int64)
    cum_cpu = np.zeros((len(LABELS), len(times)), dtype=np.float64)
    for k in range(len(LABELS)):
        cum[k, 1:] = np.cumsum(np.where(label == k, length, 0))[:-1]
        cum_cpu[k, 1:] = np.cumsum(np.where(label == k, length * share, 0))[:-1]
    return Timeline(times, label, share, cum, cum_cpu, reads)


def _profile(output: int) -> Any:
    return parse_profile(
        f'name = "tail"\n[[bucket]]\ninput = 32\noutput = {output}\n[sampling]\nignore_eos = true\n',
        source="<bench_tail>",
    )


def run_level(streams: int, args: argparse.Namespace) -> dict[str, Any]:
    """One closed-loop step at ``streams``: the joined requests' stages (ms) and the run's context."""
    trace_dir = tempfile.mkdtemp(prefix="ramp-bench-tail-")
    os.environ["RAMP_TRACE_DIR"] = trace_dir
    os.environ["RAMP_TRACE_READS"] = "1"
    interval = args.stream_interval or max(1, streams // 64)
    sim = spawn_sim_process(build_config("fast", speed=args.speed, stream_interval=interval))
    pinned = args.pin and hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) >= 2
    if pinned:
        os.sched_setaffinity(sim.pid, {0})
        os.sched_setaffinity(0, {0})
        os.environ["RAMP_WORKER_CPUS"] = "1"
    try:
        config = RunConfig(
            target=Target(url=sim.url),
            profile=_profile(args.output),
            plan=RampPlan((streams,), step_s=args.warmup + args.seconds + 120, warmup_s=args.warmup),
            out=os.path.join(trace_dir, "run.jsonl"),
            telemetry=False,
        )
        engine = Engine(config)
        t_start = time.monotonic_ns()
        engine.start()
        time.sleep(args.warmup + args.seconds)  # a benchmark's clock, not a synchronisation
        t_end = time.monotonic_ns()
        engine.stop(cancel=False)
        outcome = engine.wait(120)
        truth = {g["request_id"]: g for g in sim.ground_truth() if g.get("request_id")}
    finally:
        sim.stop()
        if pinned:
            os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
    if outcome is None:
        raise SystemExit(f"{streams} streams: the engine did not stop within 120 s")
    since = t_start + int((args.warmup + 1.0) * 1e9)  # the warm-up and the first second of ramping out
    return analyse(Path(trace_dir), truth, since, t_end) | {"streams": streams, "interval": interval}


def _worker_stages(
    trace_path: Path, truth: dict[str, Any], since: int, until: int
) -> tuple[dict[str, np.ndarray], list[tuple[dict[str, Any], dict[str, Any]]], Any]:
    """One worker's joined requests: each stage's ms per request, the (trace, truth) pairs, its timeline."""
    wid = trace_path.stem.split("-", 1)[1]
    npz = np.load(trace_path.parent / f"reads-{wid}.npz")
    if npz["full"].any():
        print(f"  (worker {wid}: a timeline series hit its limit; later events are missing)")
    line = timeline(npz)
    rows = [json.loads(s) for s in trace_path.read_text().splitlines()]
    pairs = [
        (t, truth[t["request_id"]])
        for t in rows
        if "cut" not in t
        and t["outcome"] == "ok"
        and since <= t["intended_ns"] < until
        and t["request_id"] in truth
        and truth[t["request_id"]]["first_token_ns"] is not None
    ]
    stamp = np.asarray([t["first_token_ns"] for t, _ in pairs], dtype=np.int64)
    k = np.clip(np.searchsorted(line.reads[:, 1], stamp), 0, max(0, len(line.reads) - 1))
    found = line.reads[k, 1] == stamp if len(line.reads) else np.zeros(len(stamp), bool)
    if not found.all():
        print(f"  (worker {wid}: {int((~found).sum())} first tokens not in the read timeline, left out)")
    pairs = [p for p, f in zip(pairs, found, strict=True) if f]
    stamp, k = stamp[found], k[found]
    write = np.asarray([g["first_token_ns"] for _, g in pairs], dtype=np.int64)
    entry, done = line.reads[k, 0], line.reads[k, 2]
    # [write, entry): what the loop did meanwhile, on CPU; the rest of its callbacks' time was preempted
    wall = line.labelled(np.minimum(write, entry), entry) / 1e6
    cpu = line.labelled(np.minimum(write, entry), entry, cpu=True) / 1e6
    stages = {name: cpu[idx] for name, idx in LABEL_OF.items()}
    stages["preempted"] = (wall - cpu).sum(axis=0)
    stages["read delay"] = (stamp - write) / 1e6
    stages["stamp"] = (stamp - entry) / 1e6
    stages["own work"] = sum(stages[name] for name in LABELS if name != "idle") + stages["stamp"]
    stages["parse"] = (done - stamp) / 1e6
    stages["send delay"] = np.asarray([(t["sent_ns"] - t["intended_ns"]) / 1e6 for t, _ in pairs])
    stages["request leg"] = np.asarray([(g["arrival_ns"] - t["sent_ns"]) / 1e6 for t, g in pairs])
    return stages, pairs, npz


def _spans(npz: Any, name: str, width: int, since: int, until: int) -> np.ndarray:
    spans = _series(npz, name).reshape(-1, width)
    return spans[(spans[:, 0] >= since) & (spans[:, 0] < until)]


def analyse(trace_dir: Path, truth: dict[str, Any], since: int, until: int) -> dict[str, Any]:
    stages: dict[str, list[np.ndarray]] = {s: [] for s in STAGES}
    ttft, ttft_truth, late = [], [], []
    cpu: list[np.ndarray] = [np.zeros((0, 3), np.int64)]
    gcs: list[np.ndarray] = [np.zeros((0, 3), np.int64)]
    ships: list[np.ndarray] = [np.zeros((0, 2), np.int64)]
    encodes: list[np.ndarray] = [np.zeros((0, 2), np.int64)]
    for trace_path in sorted(trace_dir.glob("trace-*.jsonl")):
        worker, pairs, npz = _worker_stages(trace_path, truth, since, until)
        for name, values in worker.items():
            stages[name].append(values)
        gcs.append(_spans(npz, "gcs", 3, since, until))
        ships.append(_spans(npz, "ships", 2, since, until))
        encodes.append(_spans(npz, "encodes", 2, since, until))
        cpu.append(np.diff(_spans(npz, "cpu", 3, since, until), axis=0).sum(axis=0, keepdims=True))
        for t, g in pairs:
            ttft.append((t["first_token_ns"] - t["intended_ns"]) / 1e6)
            ttft_truth.append((g["first_token_ns"] - g["arrival_ns"]) / 1e6)
            if g.get("first_due_ns") is not None:
                late.append((g["first_token_ns"] - g["first_due_ns"]) / 1e6)
    return {
        "stages": {s: np.concatenate(v) if v else np.zeros(0) for s, v in stages.items()},
        "n": len(ttft),
        "ttft": np.asarray(ttft),
        "ttft_truth": np.asarray(ttft_truth),
        "excess": np.asarray(ttft) - np.asarray(ttft_truth),
        "late": np.asarray(late),
        "gcs": np.concatenate(gcs),
        "ships": np.concatenate(ships),
        "encodes": np.concatenate(encodes),
        "cpu": np.concatenate(cpu).sum(axis=0),  # wall, CPU, run-queue wait of the loops' threads (ns)
        "span_s": (until - since) / 1e9,
    }


def _pct(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q)) if len(values) else float("nan")


def _cell(values: np.ndarray) -> str:
    return f"{_pct(values, 50):6.3f} / {_pct(values, 99):6.3f} / {np.max(values) if len(values) else float('nan'):7.3f}"


def report(r: dict[str, Any]) -> None:
    n = r["n"]
    print(
        f"\n{r['streams']} streams ({n} requests joined, stream_interval {r['interval']}): ms, p50 / p99 / max"
    )
    for stage in STAGES:
        print(f"  {stage:11s} {_cell(r['stages'][stage])}")
    delay = r["stages"]["read delay"]
    tail = delay >= _pct(delay, 99)
    shares = ", ".join(
        f"{name} {np.mean(r['stages'][name][tail]):.3f}" for name in LABELS + ("preempted", "stamp")
    )
    print(f"  the slowest 1% (read delay >= p99), mean ms: {shares}")
    gcs, ships = r["gcs"], r["ships"]
    gc_ms = (gcs[:, 1] - gcs[:, 0]) / 1e6
    gens = {g: int((gcs[:, 2] == g).sum()) for g in (0, 1, 2)}
    print(
        f"  gc: {len(gcs)} passes in {r['span_s']:.0f} s (gen0/1/2 {gens[0]}/{gens[1]}/{gens[2]}), "
        f"max {np.max(gc_ms) if len(gc_ms) else 0:.2f} ms; ship: {len(ships)} shipments, "
        f"p50 {_pct((ships[:, 1] - ships[:, 0]) / 1e6, 50):.2f} max "
        f"{np.max((ships[:, 1] - ships[:, 0]) / 1e6) if len(ships) else 0:.2f} ms"
    )
    pieces = (r["encodes"][:, 1] - r["encodes"][:, 0]) / 1e6
    if len(pieces):
        print(
            f"  encoding: {len(pieces)} pieces between reads, p50 {_pct(pieces, 50):.3f} p99 "
            f"{_pct(pieces, 99):.3f} max {np.max(pieces):.3f} ms"
        )
    wall, used, waited = r["cpu"]
    print(
        f"  the worker loop's thread: CPU {100 * used / max(wall, 1):.0f} % of the measured wall time, "
        f"runnable but waiting for a core {100 * waited / max(wall, 1):.1f} %"
    )
    print(
        f"  TTFT p99 client {_pct(r['ttft'], 99):.2f}, truth {_pct(r['ttft_truth'], 99):.2f}: "
        f"p99 - truth {_pct(r['ttft'], 99) - _pct(r['ttft_truth'], 99):+.2f} ms "
        f"(per request client - truth p99 {_pct(r['excess'], 99):.2f}); "
        f"server late p50 / p99 / max {_cell(r['late']).strip()} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", default="64,256,1024", help="comma-separated levels")
    parser.add_argument("--seconds", type=float, default=15.0, help="measured seconds per level")
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--speed", type=float, default=0.5, help="the fast preset's speed (1: 50 ms / 10 ms)")
    parser.add_argument("--output", type=int, default=64, help="output tokens per request")
    parser.add_argument("--stream-interval", type=int, default=0, help="tokens per chunk (0: streams / 64)")
    parser.add_argument("--no-pin", dest="pin", action="store_false", help="leave CPU placement to the OS")
    args = parser.parse_args()
    levels = [int(s) for s in args.streams.split(",") if s.strip()]
    if not levels or min(levels) < 1 or max(levels) > 4096 or not 1 <= args.seconds <= 600:
        raise SystemExit("--streams wants levels in 1..4096, --seconds 1..600")
    print(
        f"bench_tail: fast preset at speed {args.speed:g}, {args.output} output tokens, "
        f"{args.seconds:g} s per level after {args.warmup:g} s warm-up, pinned={args.pin}"
    )
    for streams in levels:
        report(run_level(streams, args))


if __name__ == "__main__":
    main()
