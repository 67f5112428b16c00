"""The headless face: a run with no console. A sibling of the console (``tui``): both drive the same
``Engine`` and end with the same ``RunOutcome``; neither imports the other.

Owns the reachability check before the load (``reachable``), the run itself (``run_headless``: start the
engine, print progress to stderr until it finishes, Ctrl-C stops it with the finished steps kept), the
progress line (``progress_line``) and the end (``finish``: the step table on stdout, the record's path,
the exit code). On a terminal the progress line redraws in place; otherwise a line per step and every
10 s, so that a log file stays readable.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import time
from typing import TYPE_CHECKING, Protocol

from loadgen.config import RunConfig, RunOutcome
from loadgen.format import fmt_ms_wide, fmt_num_wide
from loadgen.runargs import EXIT_OK, EXIT_SLO, EXIT_UNREACHABLE

if TYPE_CHECKING:
    from loadgen.snapshot import Snapshot

__all__ = ["WatchedRun", "finish", "progress_line", "reachable", "run_headless", "wait_with_progress"]

_CLEAR_LINE = "\r\033[K"
_QUIET_PRINT_S = 10.0  # off a terminal: a progress line per step, and at least this often


class WatchedRun(Protocol):
    """What the headless face needs of an engine: the outcome, the latest snapshot, a way to stop it."""

    def wait(self, timeout: float | None = None) -> RunOutcome | None: ...
    def latest(self) -> Snapshot | None: ...
    def stop(self, cancel: bool = True) -> None: ...


def reachable(config: RunConfig) -> bool:
    """Probe the target before any load; on failure say why on stderr (one line, secrets scrubbed)."""
    from loadgen.target.probe import probe

    info = asyncio.run(probe(config.target))
    if not info.reachable:
        print(f"ramp: {info.error}", file=sys.stderr)
    return info.reachable


def run_headless(config: RunConfig) -> RunOutcome | None:
    """Run ``config`` to its end with progress on stderr; None if the engine did not finish."""
    from loadgen.engine import Engine

    engine = Engine(config)
    engine.start()
    return wait_with_progress(engine)


def progress_line(snap: Snapshot) -> str:
    """One line: step, load, phase, output throughput, rolling TTFT p95, counts, in flight."""
    step = snap.windows.get("step")
    rolling = snap.windows.get("rolling")
    steps = f"{snap.step_index + 1}/{snap.step_count}" if snap.step_count else f"{snap.step_index + 1}"
    load = f"{snap.level} streams" if snap.mode == "closed" else f"{snap.rate_rps:g} req/s"
    phase = "warm-up" if snap.warming_up else "measuring"
    remaining = f" {snap.step_remaining_s:4.0f}s left" if snap.step_remaining_s is not None else ""
    ttft = rolling.pct("ttft_ms").p95 if rolling is not None else None
    errs = step.error_count if step is not None else 0
    ok = step.ok if step is not None else 0
    bound = "  CLIENT-BOUND" if snap.health.client_bound else ""
    out = rolling.out_tok_s if rolling is not None else None
    return (
        f"step {steps} · {load} · {phase}{remaining} · out {fmt_num_wide(out)} tok/s · "
        f"TTFT p95 {fmt_ms_wide(ttft)} · ok {ok} err {errs} · in flight {snap.in_flight}{bound}"
    )


def wait_with_progress(engine: WatchedRun) -> RunOutcome | None:
    """Wait for ``engine`` to finish, printing warnings and progress to stderr; Ctrl-C stops the run."""
    tty = sys.stderr.isatty()
    last_step = -1
    last_print = 0.0
    warned = 0
    try:
        while True:
            outcome = engine.wait(timeout=0.5)
            if outcome is not None:
                break
            snap = engine.latest()
            if snap is None or snap.state == "starting":
                continue
            for text in snap.warnings[warned:]:
                print((_CLEAR_LINE if tty else "") + f"ramp: warning: {text}", file=sys.stderr, flush=True)
            warned = len(snap.warnings)
            now = time.monotonic()
            if tty:
                sys.stderr.write(_CLEAR_LINE + progress_line(snap)[:200])
                sys.stderr.flush()
            elif snap.step_index != last_step or now - last_print > _QUIET_PRINT_S:
                print(progress_line(snap), file=sys.stderr, flush=True)
                last_step, last_print = snap.step_index, now
    except KeyboardInterrupt:
        print("\nramp: stopping (Ctrl-C): finished steps are in the record", file=sys.stderr)
        engine.stop(cancel=True)
        outcome = engine.wait(timeout=10)
    if tty:
        sys.stderr.write("\n")
    return outcome


def finish(outcome: RunOutcome | None) -> int:
    """Print the step table and the record's path; the exit code: 0 = the SLO was met at some step,
    1 = at none, 3 = the target was unreachable (or the run never finished)."""
    from loadgen.report import format_step_table

    if outcome is None:
        return EXIT_UNREACHABLE
    if outcome.steps:
        width = max(80, shutil.get_terminal_size((120, 24)).columns)
        print(format_step_table(list(outcome.steps), outcome.best_step, width=width))
    if outcome.record_path:
        print(f"record: {outcome.record_path}")
    if outcome.message:
        print(f"ramp: {outcome.message}", file=sys.stderr)
    if outcome.unreachable and (not outcome.steps or outcome.state == "failed"):
        return EXIT_UNREACHABLE
    if outcome.best_step is None:
        return EXIT_SLO
    return EXIT_OK
