"""Following the knee (issue 32): once a search the console started has its answer, the load holds the knee's
level in steps judged like the search's probes, and a held step that misses says the limit moved.

What a held step must show to say so (``moved``): it was usable (clean, not cut), its SLO verdict on the
intervals is *missed* — one judged figure's whole 95 % interval lies past its limit — and a faster client
could not flip it (not client-bound, or missed by ``WIDE`` of the limit or more, as a probe that stands).
The evidence is the failing figure with its interval and limit, the step and the level. A held step that
met, or whose intervals did not decide, or that was judged on its point value alone, holds on: a knee is
re-found on a decided miss only, never on noise.

Where the knee is looked for again (``refind_bounds``): below the held level, down to 1 stream in closed
loop (a server that slowed may have lost most of its room) or, in open loop, the first search's low end
(half the held rate where that is lower). The held step is the new search's first probe, at its high end.
A limit that moved up (``rose``): a held step that meets on its intervals is not taken as room above the
knee by itself (a cliff's knee meets with wide room, so room says nothing about the next level); it is
followed by one probe of the level above, the bracket's side that missed (``LiveSearch.above``), ended as a
search's probe is, as soon as its intervals decide. Only that probe meeting on its intervals says the limit
moved up, and the knee is searched for again from it up to the first search's high end, the probe as the
new search's first. A held step that is undecided or read at the limit (a slope's knee) is not followed by a
probe above: only a knee that clearly meets is checked for room, and the load spends a probe's few seconds
past the SLO each time it is.
"""

from __future__ import annotations

from loadgen.config import SLO
from loadgen.measures import CLAUSES
from loadgen.metrics.slices import figure_name
from loadgen.run.search import WIDE
from loadgen.slo import margin
from loadgen.snapshot import StepSummary


def moved(summary: StepSummary, slo: SLO, integer: bool) -> dict[str, object] | None:
    """The evidence that the held step at the knee missed the SLO on its intervals (the knee moved down), or
    None when it holds: met, undecided, judged on its point value alone, unusable, or a narrow client-bound
    miss."""
    usable = summary.clean and summary.ended_by != "stop"
    if not usable or summary.verdict.on_intervals != "missed":
        return None
    room = margin(slo, summary.stats)
    if summary.client_bound and (room is None or room > -WIDE):
        return None
    evidence = seen(summary, room, integer, "down", "held_step")
    return evidence | {"failures": list(summary.verdict.failures[:2])} | past_limit(summary, slo)


def rose(summary: StepSummary, slo: SLO, integer: bool) -> dict[str, object] | None:
    """The evidence that the probe above the knee met the SLO on its intervals (the knee moved up), or None:
    missed, undecided, judged on its point value alone, or unusable. A client-bound probe that met still
    meets: a faster client would only read it better."""
    usable = summary.clean and summary.ended_by != "stop"
    if not usable or summary.verdict.on_intervals != "met":
        return None
    evidence = seen(summary, margin(slo, summary.stats), integer, "up", "probe_step")
    return evidence | past_limit(summary, slo, within=True)


def seen(
    summary: StepSummary, room: float | None, integer: bool, direction: str, step_key: str
) -> dict[str, object]:
    """What every move's evidence says: the level, the direction, the step (``step_key``), how it ended and
    its margin."""
    return {
        "level": float(summary.level) if integer else float(summary.rate_rps or 0.0),
        "direction": direction,
        step_key: summary.index + 1,
        "ended_by": summary.ended_by,
        "margin": None if room is None else round(room, 4),
    }


def past_limit(summary: StepSummary, slo: SLO, *, within: bool = False) -> dict[str, object]:
    """The first judged figure whose 95 % interval lies wholly past its limit (``within``: wholly inside it):
    its label, value, interval and limit, in the limit's unit ({} when none is found: the verdict's
    ``failures`` still say what missed)."""
    limits = slo.as_dict()
    for clause in CLAUSES:
        limit = limits.get(clause.key)
        iv = summary.margins.get(figure_name(clause.metric, clause.point)) if clause.metric else None
        if limit is None or iv is None or iv.lo is None:
            continue
        scale = clause.scale
        lo, hi = iv.lo * scale, None if iv.hi is None else iv.hi * scale
        past = lo > limit if clause.at_most else (hi is not None and hi < limit)
        # open above (a tail too thin to bound), a met verdict looks at the largest value seen
        top = hi if hi is not None else (None if iv.top is None else iv.top * scale)
        inside = (top is not None and top <= limit) if clause.at_most else lo >= limit
        if inside if within else past:
            return {
                "figure": clause.label,
                "value": round(iv.value * scale, 4),
                "interval": [round(lo, 4), None if hi is None else round(hi, 4)],
                "limit": limit,
                "unit": clause.unit,
                "past": ("≤" if clause.at_most else "≥") if within else (">" if clause.at_most else "<"),
            } | ({"largest": round(top, 4)} if within and hi is None and top is not None else {})
    return {}


def refind_bounds(level: float, lo: float, integer: bool) -> tuple[float, float]:
    """Where the knee is searched for again once the held ``level`` missed: 1 (closed loop) or the first
    search's low end ``lo`` (open loop; half the held rate where that is lower) up to ``level`` itself, the
    new search's first probe (the held step)."""
    if integer:
        return 1.0, max(1.0, level)
    return min(lo, level / 2), level


def evidence_text(evidence: dict[str, object], unit: str) -> str:
    """'the knee moved: 20 streams now misses (TTFT p95 412 ms, 95 %: 380–450 > 100 ms)', or up: 'the knee
    moved up: 21 streams now meets (TTFT p95 41 ms, 95 %: 38–45 ≤ 100 ms)'."""
    up = evidence.get("direction") == "up"
    said = (
        f"the knee moved{' up' if up else ''}: {evidence['level']:g} {unit} now {'meets' if up else 'misses'}"
    )
    figure, interval = evidence.get("figure"), evidence.get("interval")
    if figure is not None and isinstance(interval, list):
        lo, hi = interval
        span = f"{lo:g}–{hi:g}" if hi is not None else f"≥{lo:g}"
        if hi is None and isinstance(largest := evidence.get("largest"), float):
            span += f", every value ≤{largest:g}"
        value, limit, unit_of = evidence["value"], evidence["limit"], evidence["unit"]
        return said + f" ({figure} {value:g} {unit_of}, 95 %: {span} {evidence['past']} {limit:g})"
    failures = evidence.get("failures")
    return said + (f" ({failures[0]})" if isinstance(failures, list) and failures else "")
