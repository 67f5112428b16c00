"""How the SLA search (``loadgen.run.search``) ends besides its answer: in one line when it has none as asked
(``search_failure``: a client too weak for the range, a server that failed every request, an SLO that judged
nothing, a range whose low end misses), and the ``--hold`` step's outcome (``held_outcome``, ``held_text``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loadgen.snapshot import StepSummary

if TYPE_CHECKING:
    from loadgen.run.search import Search


def held_outcome(step: StepSummary, hold_s: float | None, integer: bool) -> dict[str, object]:
    """The confirmation step's outcome (``--hold``): confirmed when it met the SLO on its intervals; not when
    it missed, or could not tell (undecided, or not usable: cut, flagged)."""
    usable = step.clean and step.ended_by != "stop"
    verdict = step.verdict.on_intervals if usable else "unusable"
    if verdict is None and step.verdict.met is not None:
        verdict = "met" if step.verdict.met else "missed"  # no interval: its point value
    return {
        "level": float(step.level) if integer else float(step.rate_rps or 0.0),
        "step": step.index + 1,
        "seconds": hold_s,
        "window_s": step.window_s,
        "verdict": verdict,
        "confirmed": usable and step.verdict.met is True and step.verdict.on_intervals == "met",
        "client_bound": step.client_bound,
        "failures": list(step.verdict.failures[:2]),
    }


def held_text(held: dict[str, object] | None) -> str:
    """The confirmation step in the summary's last words ("" without one)."""
    if held is None:
        return ""
    said = f"; held {held['level']:g} for {held['window_s']:g} s (step {held['step']}): "
    if held["confirmed"]:
        return said + "confirmed (met on its intervals)"
    failures = held["failures"]
    why = f": {'; '.join(failures)}" if isinstance(failures, list) and failures else ""
    if held["verdict"] == "missed":
        return said + f"NOT confirmed (missed{why})"
    return said + f"not confirmed ({held['verdict']}: its intervals did not decide)"


def search_failure(search: Search) -> tuple[str, bool] | None:
    """``Search.failure``."""
    unit = "streams" if search.integer else "req/s"
    if search.client_limit is not None:
        bound = search.client_limit
        why = f" (step {bound.step}: {bound.bound_reason})" if bound.bound_reason else ""
        return (
            f"find-max: the client is the limit at {bound.level:g} {unit}: add --workers (or a bigger "
            f"machine) before probing further{why}",
            False,
        )
    if not search.probes or search.answer() is not None:
        return None
    levels = ", ".join(f"{x:g}" for x in sorted({p.level for p in search.probes}))
    if all(p.errors_only for p in search.probes):
        return (
            f"find-max: the server answered no request successfully at any level probed ({levels} {unit}): "
            "nothing to search; see why with ramp check URL",
            True,
        )
    if not any(p.judged for p in search.probes):
        return (
            f"find-max: the SLO judged nothing at any level probed ({levels} {unit}): each of its clauses "
            "had nothing to judge (n/a); set a limit on TTFT, ITL, e2e, decode speed or the error rate",
            False,
        )
    low = next(p for p in search.probes if p.level == min(q.level for q in search.probes))
    why = f" ({low.failures})" if low.failures else ""
    return (
        f"--find-max {search.lo:g}:{search.hi:g} cannot be met: even {low.level:g} {unit} misses the SLO{why}; "
        "lower the range's low end or loosen the SLO",
        False,
    )
