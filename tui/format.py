"""The console's words: metric titles, error labels, window/mode/step labels, SLO lines, n/a reasons.

Nothing here touches Textual or a Snapshot's clock: every function maps values to short strings so that
panels stay thin. Numbers inside those strings are written by ``loadgen.format`` (the one set of number
formatters, shared with the headless face); nothing here formats a number itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from loadgen import measures
from loadgen.format import fmt_duration, fmt_ms, fmt_pct, fmt_rate, fmt_setting, fmt_si
from loadgen.snapshot import METRICS, SLO, SLOVerdict

# Each histogram's title on screen, from the catalogue (``loadgen.measures``).
METRIC_TITLES: Mapping[str, str] = measures.LiveMap(
    lambda metrics, _clauses: {m.name: m.title for m in metrics if m.kind != "tokens"}
)

ERROR_LABELS: dict[str, str] = {
    "connect": "connect",
    "ttft_timeout": "TTFT timeout",
    "idle_timeout": "idle timeout",
    "total_timeout": "total timeout",
    "http_429": "HTTP 429",
    "http_status": "HTTP status",
    "stream_cut": "stream cut",
    "malformed": "malformed",
    "empty_output": "empty output",
}


def metric_title(metric: str) -> str:
    return METRIC_TITLES.get(metric, metric)


def metric_unit(metric: str) -> str:
    return METRICS.get(metric, "")


# What the current step's window holds while the step is not measuring (its samples are not the step's).
PHASE_NOTES: dict[str, str] = {"warmup": "warm-up", "closing": "closing", "settling": "settling"}


def window_label(window: str, rolling_s: float, phase: str = "measure") -> str:
    """'this step', 'this step (warm-up)', 'last 10 s', 'whole run (no warm-ups)'.

    The run window leaves warm-ups out (the engine adds only measured segments to it), while the last N s
    take every request: the labels say so, so that the two never seem to disagree without a reason.
    """
    if window == "step":
        note = PHASE_NOTES.get(phase)
        return f"this step ({note})" if note else "this step"
    if window == "rolling":
        return f"last {fmt_setting(rolling_s)} s"
    return "whole run (no warm-ups)"


def snapshot_phase(phase: str, warming_up: bool) -> str:
    """The step's phase; an engine that only says ``warming_up`` is read as in its warm-up."""
    return "warmup" if warming_up and phase == "measure" else phase


def mode_label(mode: str, level: int, rate_rps: float | None, arrival: str = "") -> str:
    """'closed loop 32' or 'open loop λ 12 req/s (poisson, cap 64)'."""
    if mode == "closed":
        return f"closed loop {level}"
    details = [arrival] if arrival and arrival != "closed" else []
    if level:
        details.append(f"cap {level}")
    suffix = f" ({', '.join(details)})" if details else ""
    return f"open loop λ {fmt_rate(rate_rps)}{suffix}"


def step_label(
    step_index: int, step_count: int | None, remaining_s: float | None, *, auto: bool = False
) -> str:
    """'step 3/8 · 0:12 left'; past the plan's last step (steps a key added) 'step 10 · plan 9/9 done',
    never 'step 10/9'; without a plan 'step 3 (auto)' while the auto-ramp drives, else 'step 3 (manual)'."""
    if step_count is None:
        return f"step {step_index + 1} ({'auto' if auto else 'manual'})"
    if step_index + 1 > step_count:
        text = f"step {step_index + 1} · plan {step_count}/{step_count} done"
    else:
        text = f"step {step_index + 1}/{step_count}"
    if remaining_s is not None:
        text += f" · {fmt_duration(remaining_s)} left"
    return text


def error_label(kind: str) -> str:
    return ERROR_LABELS.get(kind, kind)


def slo_threshold(slo: SLO, metric: str) -> tuple[float, str] | None:
    """The SLO line to draw on ``metric``'s histogram, in its display unit, with a label: its first set
    clause (``loadgen.measures.CLAUSES``) that does not yield to another set one (TTFT: p95's, else p99's)."""
    limits = slo.as_dict()
    for clause in measures.CLAUSES:
        limit = limits[clause.key]
        if clause.metric != metric or limit is None:
            continue
        if clause.yields_to and limits[clause.yields_to] is not None:
            continue
        value = limit * clause.per if clause.per != 1.0 else limit  # a limit as written (an int stays one)
        shown = fmt_ms(value) if METRICS.get(metric) == "ms" else fmt_si(value)
        return value, f"SLO {clause.point} {'≤' if clause.at_most else '≥'} {shown}"
    return None


def verdict_label(verdict: SLOVerdict) -> str:
    if verdict.met is None:
        return "–"
    if verdict.three_valued == "undecided":  # an interval straddles a limit (loadgen.stats.decide)
        return "undecided"
    return "met" if verdict.met else "miss"


def slo_clause(failure: str) -> str:
    """The clause a failure line names: 'ITL p99 128 ms > 100 ms' -> 'ITL p99', 'error rate 5 % > 1 %' ->
    'error rate', 'not enough data: 3 requests...' -> 'not enough data'."""
    words: list[str] = []
    for word in failure.split():
        if word[:1].isdigit() or word in ("n/a", ">", "<") or word.startswith("("):
            break
        words.append(word.rstrip(":"))
        if word.endswith(":"):
            break
    return " ".join(words) or failure


SHORT_CLAUSES = {"no successful request": "no success", "not enough data": "few data"}


def verdict_cell(verdict: SLOVerdict, compact: int = 0) -> str:
    """The steps table's SLO cell: 'met', 'miss ITL p99 +1' (one more clause failed), or '–' (no SLO).
    ``compact`` 1 leaves out the count of the other clauses, 2 writes 'miss' as '✕'."""
    label = verdict_label(verdict)
    if label != "miss" or not verdict.failures:
        return label
    more = len(verdict.failures) - 1
    clause = slo_clause(verdict.failures[0])
    if compact >= 1:  # the long clauses, in as few cells as the others ('✕ no successful reque' was cut)
        clause = SHORT_CLAUSES.get(clause, clause)
    if compact >= 2:
        return f"✕ {clause}"
    return f"miss {clause}" + (f" +{more}" if more and compact == 0 else "")


STEP_FLAG_NOTES = {"worker_lost": "worker lost", "closing_cut": "stopped closing"}


def step_note_parts(client_bound: bool, carried_share: float, flags: Sequence[str] = ()) -> list[str]:
    """A step's notes, most telling first: 'cut 23%' (a manual change cut it: that share of its requests
    finished under the next load), '⚠bound' (the client was the bottleneck), then 'worker lost' and
    'stopped closing' (``StepSummary.flags``: its load was not held). A narrow cell keeps the first."""
    notes = []
    if carried_share > 0:
        notes.append(f"cut {fmt_pct(carried_share, 0)}")
    if client_bound:
        notes.append("⚠bound")
    notes.extend(STEP_FLAG_NOTES.get(flag, flag) for flag in flags)
    return notes


def step_notes(client_bound: bool, carried_share: float, flags: Sequence[str] = ()) -> str:
    """What a step's figures stand on, in a few cells (``step_note_parts``, joined)."""
    return " ".join(step_note_parts(client_bound, carried_share, flags))


def fit_notes(parts: Sequence[str], room: int | None) -> str:
    """As many whole notes as ``room`` holds, in order; the first alone is cut ("…") only when it is all
    there is room for, so that "cut 23%" never gives way to the tail of another note."""
    if room is None:
        return " ".join(parts)
    shown = ""
    for part in parts:
        joined = f"{shown} {part}" if shown else part
        if len(joined) > room:
            break
        shown = joined
    if not shown and parts:
        return parts[0] if len(parts[0]) <= room else parts[0][: max(0, room - 1)] + "…"
    return shown


def source_reasons(sources: Mapping[str, str], *, gpu: bool | None = None) -> str:
    """'nvml: library not found; dcgm: connection refused' for the sources that are not 'ok'.

    ``gpu`` picks GPU sources (nvml, dcgm, nvidia-smi) or server ones; ``None`` takes both.
    """
    reasons = []
    for name, state in sources.items():
        if state == "ok":
            continue
        if gpu is not None and is_gpu_source(name) != gpu:
            continue
        reasons.append(f"{name}: {state}")
    return "; ".join(reasons)


def is_gpu_source(name: str) -> bool:
    lowered = name.lower()
    return any(key in lowered for key in ("nvml", "dcgm", "nvidia", "smi", "gpu"))


def ellipsize(text: str, width: int) -> str:
    """Cut ``text`` to ``width`` cells with a trailing '…' (one cell per character)."""
    if width <= 0:
        return ""
    return text if len(text) <= width else text[: width - 1] + "…"
