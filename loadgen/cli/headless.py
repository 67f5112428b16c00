"""The headless face: a run with no console. A sibling of the console (``tui``): both drive the same
``Engine`` and end with the same ``RunOutcome``; neither imports the other.

Owns the choice of face where there is no terminal (``console_refused``), the reachability check before the
load (``reachable``), the run itself (``run_headless``: start the
engine, print progress to stderr until it finishes; Ctrl-C, SIGTERM and SIGHUP stop it with the finished
steps kept), the progress line (``progress_line``), output that survives a terminal gone away (``say``) and
the end (``finish``: the step table on stdout, the record's path, the exit code). On a terminal the
progress line redraws in place; otherwise a line per step and every 10 s, so that a log file stays readable.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import re
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, TextIO

from loadgen import measures
from loadgen.analysis.diagnosis import diagnosis_line
from loadgen.config import SLO
from loadgen.exits import EXIT_OK, EXIT_SLO, EXIT_UNREACHABLE, EXIT_USAGE, EXIT_WORKER_LOST
from loadgen.format import fmt_first_wait, fmt_ms_wide, fmt_num_wide
from loadgen.record import RecordError, read_record
from loadgen.report import error_kinds
from loadgen.run.config import RunConfig, RunOutcome
from loadgen.run.signals import StopSignals, exit_code, interrupted_by, signal_label
from loadgen.target.http import scrub
from loadgen.target.refusals import refusal_text

if TYPE_CHECKING:
    from loadgen.snapshot import Snapshot, StepSummary

__all__ = [
    "WatchedRun",
    "console_refused",
    "finish",
    "progress_line",
    "reachable",
    "run_headless",
    "say",
    "under_web_driver",
    "wait_with_progress",
]

_CLEAR_LINE = "\r\033[K"
_EXCEPTION_PREFIX = re.compile(r"^(?:[A-Z]\w*(?:Error|Exception): )?(?:\[Errno \d+\] )?")
_QUIET_PRINT_S = 10.0  # off a terminal: a progress line per step, and at least this often
CLOSING_SAY_S = 5.0  # a step closing this long says for how long, and what bounds it
STOP_WAIT_S = 15.0  # how long a stopped run gets to finish its record (the streams are cancelled at once)


class WatchedRun(Protocol):
    """What the headless face needs of an engine: the outcome, the latest snapshot, a way to stop it."""

    def wait(self, timeout: float | None = None) -> RunOutcome | None: ...
    def latest(self) -> Snapshot | None: ...
    def stop(self, cancel: bool = True) -> None: ...
    def interrupt(self, signum: int) -> None: ...


def under_web_driver() -> bool:
    """Whether the console would be drawn in a browser: ``TEXTUAL_DRIVER`` names Textual's web driver, as
    textual-serve sets it for each browser tab's process (``textual.drivers.web_driver:WebDriver``; Textual
    picks its driver class from that variable)."""
    return "web" in os.environ.get("TEXTUAL_DRIVER", "").lower()


def console_refused() -> str | None:
    """Why the console cannot be drawn here (stdin or stdout is not a terminal: a pipe, a CI job, a
    Kubernetes Job), None when it can. Under a web driver (``under_web_driver``) it is drawn without a
    terminal: None then too."""
    if under_web_driver():
        return None
    missing = [name for name, stream in (("stdin", sys.stdin), ("stdout", sys.stdout)) if not _tty(stream)]
    if not missing:
        return None
    return f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not a terminal"


def _tty(stream: TextIO | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (ValueError, OSError):  # closed
        return False


def reachable(config: RunConfig) -> bool:
    """Probe the target before any load; on failure say why on stderr (one line, secrets scrubbed). A
    server that answers but cannot be load-tested as asked (no model listed, the model asked for not
    served) fails too: the exit code is then 3, like an unreachable one. A note (no model list, but
    ``--model`` given) is printed as a warning and the run goes on."""
    from loadgen.target.probe import probe

    info = asyncio.run(probe(config.target))
    if not info.ok:
        print(f"ramp: {info.error}", file=sys.stderr)
        return False
    if info.note:
        print(f"ramp: warning: {info.note}", file=sys.stderr)
    return True


def run_face(config: RunConfig, host: str, port: int | None, headless: bool) -> RunOutcome | None:
    """The run on its face, headless or the console, with ``--metrics-port``'s exporter (``host``, ``port``)
    beside it for as long as it lasts: ``ramp run``'s and ``ramp launch``'s one way to run a config."""
    from loadgen.exits import UsageError
    from loadgen.observe.exporter import with_exporter

    try:
        config, metrics = with_exporter(config, host, port, say)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        if headless:
            return run_headless(config)
        from tui.app import run_console

        return run_console(config, refresh_hz=config.snapshot_hz)  # --refresh, else 4 Hz
    finally:
        if metrics is not None:
            metrics.close()


def run_headless(config: RunConfig) -> RunOutcome | None:
    """Run ``config`` to its end with progress on stderr; None if the engine did not finish. SIGINT, SIGTERM
    and SIGHUP stop it like Ctrl-C (``loadgen.run.signals``): the outcome then carries the signal."""
    from loadgen.run.engine import Engine
    from loadgen.run.recording import planned_header

    if config.baseline is not None:
        warning = baseline_warning(config.baseline, planned_header(config))
        if warning:
            say(f"ramp: warning: {warning}\n")
    engine = Engine(config)
    with StopSignals(engine.interrupt) as stops:
        engine.start()
        return wait_with_progress(engine, stops, config.target.idle_timeout_s)


def _phase(snap: Snapshot, closing_s: float | None, idle_timeout_s: float | None) -> str:
    """The step's phase in words; a closing step that has waited a while says for how long, and what ends a
    stream that stalls (the idle timeout), so a long drain is never silent."""
    if snap.warming_up:
        return "warm-up"
    if snap.phase == "closing":
        waited = ""
        if closing_s is not None and closing_s >= CLOSING_SAY_S:
            bound = (
                f"; a stalled stream ends at the idle timeout {idle_timeout_s:g} s" if idle_timeout_s else ""
            )
            waited = f", {closing_s:.0f} s{bound}"
        return f"closing ({snap.closing_left} left{waited})"
    if snap.phase == "settling":
        return f"settling ({snap.surplus} surplus)"
    return {"measure": "measuring", "idle": "idle", "warmup": "warm-up"}[snap.phase]


def progress_line(snap: Snapshot, closing_s: float | None = None, idle_timeout_s: float | None = None) -> str:
    """One line: step, load, phase, output throughput (``~``: estimated, no usage), rolling TTFT p95,
    counts (and which errors), in flight, the streams backing off and what the server refused them with.
    ``closing_s``: how long the step has been closing; ``idle_timeout_s``: what bounds a stalled stream."""
    step = snap.windows.get("step")
    rolling = snap.windows.get("rolling")
    steps = f"{snap.step_index + 1}/{snap.step_count}" if snap.step_count else f"{snap.step_index + 1}"
    load = f"{snap.level} streams" if snap.mode == "closed" else f"{snap.rate_rps:g} req/s"
    phase = _phase(snap, closing_s, idle_timeout_s)
    remaining = f" {snap.step_remaining_s:4.0f}s left" if snap.step_remaining_s is not None else ""
    ttft = rolling.pct(measures.TTFT_MS).p95 if rolling is not None else None
    errs = step.error_count if step is not None else 0
    kinds = f" ({error_kinds(step.errors)})" if step is not None and errs else ""
    ok = step.ok if step is not None else 0
    bound = "  CLIENT-BOUND" if snap.health.client_bound else ""
    out = rolling.out_tok_s if rolling is not None else None
    estimated = "~" if rolling is not None and rolling.approx_tokens and out is not None else ""
    stuck = fmt_first_wait(snap.waiting_first, snap.first_wait_s)  # a server that answers nothing yet
    refused = f" · {stuck}" if stuck else ""
    if snap.backing_off:
        said = refusal_text(snap.latest_errors)
        refused += f" · backing off {snap.backing_off}" + (f" · {said}" if said else "")
    return (
        f"step {steps} · {load} · {phase}{remaining} · out {estimated}{fmt_num_wide(out)} tok/s · "
        f"TTFT p95 {fmt_ms_wide(ttft)} · ok {ok} err {errs}{kinds} · in flight {snap.in_flight}{refused}{bound}"
    )


class _Progress:
    """The progress on stderr: warnings once each; on a terminal one line redrawn in place, otherwise a
    line per step and every ``_QUIET_PRINT_S``."""

    def __init__(self, idle_timeout_s: float | None = None) -> None:
        self.tty = sys.stderr.isatty()
        self.idle_timeout_s = idle_timeout_s
        self.last_step = -1
        self.last_phase = ""
        self.phase_since = 0.0
        self.last_print = 0.0
        self.warned = 0
        self.told_steps = 0  # finished steps whose diagnosis was said

    def show(self, snap: Snapshot | None) -> None:
        if snap is None or snap.state == "starting":
            return
        for text in snap.warnings[self.warned :]:
            say((_CLEAR_LINE if self.tty else "") + f"ramp: warning: {scrub(text)}\n")
        self.warned = len(snap.warnings)
        self.tell_limits(snap.steps)
        now = time.monotonic()
        phase = "warmup" if snap.warming_up else snap.phase
        changed = snap.step_index != self.last_step or phase != self.last_phase
        if phase != self.last_phase:
            self.last_phase, self.phase_since = phase, now
        closing_s = now - self.phase_since if phase == "closing" else None
        line = progress_line(snap, closing_s, self.idle_timeout_s)
        if self.tty:
            say(_CLEAR_LINE + line[:200])
        elif changed or now - self.last_print > _QUIET_PRINT_S:
            say(line + "\n")
            self.last_step, self.last_print = snap.step_index, now

    def tell_limits(self, steps: Sequence[StepSummary]) -> None:
        """Each newly finished step's diagnosis, a line of its own: 'ramp: step 3 (16): Limit: queueing — ...'."""
        for step in steps[self.told_steps :]:
            line = diagnosis_line(step.diagnosis)
            if line:
                say(
                    (_CLEAR_LINE if self.tty else "")
                    + f"ramp: step {step.index + 1} ({step.level}): {line}\n"
                )
        self.told_steps = max(self.told_steps, len(steps))

    def end(self, outcome: RunOutcome | None = None) -> None:
        if self.tty:
            say("\n")
        if outcome is not None:  # the steps finished after the last snapshot shown
            self.tell_limits(outcome.steps)


def wait_with_progress(
    engine: WatchedRun, stops: StopSignals | None = None, idle_timeout_s: float | None = None
) -> RunOutcome | None:
    """Wait for ``engine`` to finish, printing warnings and progress to stderr. A stop signal that ``stops``
    caught (its handler has interrupted the engine), or Ctrl-C raised as ``KeyboardInterrupt`` when there
    is no ``stops``, stops the run with the finished steps kept. ``idle_timeout_s``: the streams' idle
    timeout, named while a step closes (it bounds how long a stalled stream holds it)."""
    view = _Progress(idle_timeout_s)
    try:
        while True:
            outcome = engine.wait(timeout=0.5)
            if stops is not None and stops.signum is not None:
                outcome = _stopping(engine, stops.signum)
                break
            if outcome is not None:
                break
            view.show(engine.latest())
    except KeyboardInterrupt as exc:
        signum = interrupted_by(exc)
        engine.interrupt(signum)
        outcome = _stopping(engine, signum)
    view.end(outcome)
    return outcome


def _stopping(engine: WatchedRun, signum: int) -> RunOutcome:
    say(f"\nramp: stopping ({signal_label(signum)}): finished steps are in the record\n")
    outcome = engine.wait(timeout=STOP_WAIT_S)
    if outcome is not None:
        return outcome
    # Still the signal's exit code, not "unreachable": the operator stopped it; the record may lack its end.
    snap = engine.latest()
    steps = tuple(snap.steps) if snap is not None else ()
    message = f"the run did not stop within {STOP_WAIT_S:.0f} s of {signal_label(signum)}"
    return RunOutcome("stopped", steps, None, snap.record_path if snap else None, message, signum=signum)


def say(text: str, stream: TextIO | None = None) -> None:
    """Write to stderr (or ``stream``) and flush. A terminal that went away (SIGHUP: writes fail with EIO)
    or a closed pipe must not end the run before its record is finished: the stream is pointed at
    /dev/null instead, and the run goes on to its end and its exit code."""
    out = stream if stream is not None else sys.stderr
    try:
        out.write(text)
        out.flush()
    except OSError:
        _to_devnull(out)
    except ValueError:  # closed
        pass


def _to_devnull(stream: TextIO) -> None:
    with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)


def plain(message: str) -> str:
    """A message without the exception names and errno codes Python puts before the words
    (``FileExistsError: [Errno 17] File exists: 'x'`` -> ``File exists: 'x'``)."""
    return _EXCEPTION_PREFIX.sub("", message, count=1)


def baseline_warning(path: str, header: Mapping[str, object]) -> str | None:
    """The conditions check of a run (its ``header``) against the baseline record at ``path``."""
    from loadgen.analysis.baseline import live_differences, load_baseline, mismatch_warning
    from loadgen.analysis.runs import AnalysisError

    try:
        run = load_baseline(path)
    except AnalysisError as exc:
        return f"baseline not used: {exc}"
    return mismatch_warning(path, live_differences(run, header))


def baseline_lines(
    path: str, steps: Sequence[StepSummary], slo: SLO, header: Mapping[str, object]
) -> list[str]:
    """Each step against the baseline at its level (out tok/s and the SLO's figure: better, worse or within
    noise), after the conditions check with what the run's record says it ran under."""
    from loadgen.analysis.baseline import (
        THROUGHPUT,
        live_differences,
        load_baseline,
        mismatch_warning,
        slo_figure,
        step_verdict,
    )
    from loadgen.analysis.baseline_words import verdict_cell
    from loadgen.analysis.runs import AnalysisError

    try:
        run = load_baseline(path)
    except AnalysisError as exc:
        return [f"baseline not used: {exc}"]
    lines = [f"vs baseline {path} (out tok/s · {slo_figure(slo).label}):"]
    for position, step in enumerate(steps):
        found = step_verdict(run, steps, position, (THROUGHPUT, slo_figure(slo)))
        said = verdict_cell(found) if found.verdicts else f"no verdict ({found.reason})"
        lines.append(f"  step {step.index + 1} ({found.key.label}): {said}")
    warning = mismatch_warning(path, live_differences(run, header))
    return [*lines, f"  ⚠ {warning}"] if warning else lines


def _written_header(path: str | None) -> Mapping[str, object] | None:
    """The header the run wrote (the server's model and runtime known by then), None without a record."""
    if path is None:
        return None
    try:
        return read_record(path).header
    except RecordError:
        return None


def _baseline_text(outcome: RunOutcome, config: RunConfig | None) -> str:
    if config is None or config.baseline is None:
        return ""
    from loadgen.run.recording import planned_header

    slo = config.slo if config.slo is not None else config.profile.slo
    header = _written_header(outcome.record_path) or planned_header(config)
    return "\n" + "\n".join(baseline_lines(config.baseline, list(outcome.steps), slo, header)) + "\n"


def step_tables(outcome: RunOutcome, config: RunConfig | None, width: int) -> str:
    """The step table (priced when the run is: ``ramp report``'s cost columns) and, when a level ran more than
    once, its repeats as "median (min–max)"."""
    from loadgen.analysis.cost import step_cost, task_turns
    from loadgen.analysis.replicas import replica_table
    from loadgen.report import format_repeats, format_step_table

    steps = list(outcome.steps)
    pricing = None if config is None else config.pricing
    turns = None if config is None else task_turns({"profile_content": config.profile.to_dict()})
    costs = {} if pricing is None else {s.index: step_cost(s, pricing, turns) for s in steps}
    task = "req" if turns is None else "session"
    out = format_step_table(steps, outcome.best_step, width=width, costs=costs, task=task) + "\n"
    repeats = format_repeats(steps, width=width)
    replicas = replica_table(steps)  # several replicas as one target: each one's share of each step
    return out + (f"\n{repeats}\n" if repeats else "") + (f"\n{replicas}\n" if replicas else "")


def finish(outcome: RunOutcome | None, config: RunConfig | None = None) -> int:
    """Print the step tables (``config``: the run's, for its prices) and the record's path; the exit code:
    0 = the SLO was met at some step,
    1 = at none, 2 = the run failed before its first step (it could not start as given), 3 = the target
    was unreachable (or the run never finished), 4 = a load worker died during a step (its figures are
    partial: the step is flagged ``worker_lost``), 128 + N = signal N stopped the run (130 Ctrl-C,
    143 SIGTERM, 129 SIGHUP: whatever its steps say, a stopped run claims nothing)."""
    if outcome is None:
        return EXIT_UNREACHABLE
    if outcome.steps:
        width = max(80, shutil.get_terminal_size((120, 24)).columns)
        say(step_tables(outcome, config, width) + _baseline_text(outcome, config), sys.stdout)
    if outcome.record_path:
        say(f"record: {outcome.record_path}\n", sys.stdout)
    if outcome.message:
        say(f"ramp: {plain(scrub(outcome.message))}\n")
    if outcome.signum is not None:
        return exit_code(outcome.signum)
    if outcome.unreachable and (not outcome.steps or outcome.state == "failed"):
        return EXIT_UNREACHABLE
    if outcome.state == "failed" and (not outcome.steps or outcome.usage):
        return EXIT_USAGE  # it could not start as given (no model to ask for, no record...): no SLO verdict
    if any("worker_lost" in step.flags for step in outcome.steps):
        return EXIT_WORKER_LOST
    if outcome.best_step is None:
        return EXIT_SLO
    return EXIT_OK
