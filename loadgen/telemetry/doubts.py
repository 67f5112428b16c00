"""Why a window's server figures cannot be read as the server's over that window: its telemetry stopped
answering before the window's end, its counters went back (a server restart), or its histograms changed
buckets between two scrapes. Pure arithmetic over copied readings, like ``window``; the diagnosis
(``loadgen.analysis.diagnosis``) says ``unknown`` with the doubt instead of reading the figures.

A server that never answered (no /metrics) raises no doubt: its window has no server figures at all, and the
diagnosis says what telemetry would have told.
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Sequence

from loadgen.format import fmt_setting
from loadgen.telemetry.reading import Reading, well_formed
from loadgen.telemetry.window import NS, Series, preferred

# The last server sample more than this many of its polls before the window's end, and more than this many
# seconds: the telemetry stopped answering (a poll or two late is a slow scrape, not a loss).
LOST_POLLS = 3.0
LOST_S = 2.0
POLLS_READ = 16  # the last this many samples tell the usual poll


def window_doubt(entries: Sequence[Series], t0_ns: int, t1_ns: int) -> str | None:
    """What makes the server's figures over ``[t0_ns, t1_ns]`` unreadable, in words; None: nothing."""
    server = next(
        (rs for rs in ([r for r in rs if r.has_server] for rs in preferred(entries, "server")) if rs),
        None,
    )
    if server is None:
        return None  # never answered: no server figures, not doubtful ones
    times = [r.t_ns for r in server]  # in time order, as the hub keeps them
    end = bisect.bisect_right(times, t1_ns)
    if not end:
        return None  # its first answer came after the window
    begin = bisect.bisect_left(times, t0_ns, hi=end)
    gap_s = (t1_ns - times[end - 1]) / NS
    if gap_s > max(LOST_S, LOST_POLLS * _poll_s(times[max(0, end - POLLS_READ) : end])):
        where = (
            "before the step began" if begin == end else f"{fmt_setting(round(gap_s, 1))} s before its end"
        )
        return f"the server's telemetry stopped answering {where}"
    # the sample at or just before the window's start, then every one inside: what its figures differ
    span = server[max(0, begin - 1) : end]
    for r in span:
        broken = next((k for k, h in r.histograms.items() if not well_formed(h)), None)
        if broken:
            return f"the server's histogram {broken} is malformed (a bucket missing, or counts falling)"
    for a, b in zip(span, span[1:], strict=False):
        went_back = _went_back(a, b)
        if went_back:
            return f"the server's {went_back} went back during the step (a restart?)"
        changed = _rebucketed(a, b)
        if changed:
            return f"the server's histogram {changed} changed its buckets during the step"
    return None


def _poll_s(times: list[int]) -> float:
    """The usual time between two samples (the median: a gap after a loss does not stretch it)."""
    gaps = [(b - a) / NS for a, b in zip(times, times[1:], strict=False)]
    return statistics.median(gaps) if gaps else 1.0


def _went_back(a: Reading, b: Reading) -> str | None:
    """The first counter, or histogram count, that is lower in ``b`` than in ``a``."""
    for key, value in b.counters.items():
        if key in a.counters and value < a.counters[key]:
            return f"counter {key}"
    for key, hist in b.histograms.items():
        before = a.histograms.get(key)
        if (
            before is not None
            and before.bounds == hist.bounds
            and (
                hist.count < before.count or hist.sum < before.sum  # observations are never negative
            )
        ):
            return f"histogram {key}"
    return None


def _rebucketed(a: Reading, b: Reading) -> str | None:
    for key, hist in b.histograms.items():
        before = a.histograms.get(key)
        if before is not None and before.bounds != hist.bounds:
            return key
    return None
