"""A target that rejects every request the same way: a permanent 4xx (400, 404, 401, 403, 422 ...) on
every answer since the last success. Load cannot measure anything then, and a managed API would see a
flood: the users back off (``loadgen.run.loops.Backoff``) and, once it has lasted ``REJECTED_AFTER_S``,
the run ends and says which status and what the server said (its text scrubbed, quoted as data).

``RejectionStreak`` reads the workers' deltas (their error counters and the last few messages of each
interval); ``LiveFigures`` feeds it, the controller's health check asks it.
"""

from __future__ import annotations

import re

from loadgen.metrics import IntervalDelta
from loadgen.target.http import scrub

REJECTED_AFTER_S = 10.0  # no success for this long, every answer the same rejection: the run ends
QUOTED_CHARS = 300  # of the server's message, in the run's message
HTTP_STATUS_KEY = "err:http_status"
_STATUS = re.compile(r"^HTTP (\d{3})\b")
_TRANSIENT = (408, 425, 429)  # a 4xx that says "later", not "never" (429 and 5xx are refusals: backoff)


def permanent_status(message: str) -> int | None:
    """The status of an ``HTTP NNN: ...`` error message when it is a permanent 4xx, else None."""
    found = _STATUS.match(message)
    if found is None:
        return None
    status = int(found.group(1))
    return status if 400 <= status <= 499 and status not in _TRANSIENT else None


class RejectionStreak:
    """Since the last success: whether every error was one permanent 4xx status, since when, how many."""

    def __init__(self) -> None:
        self.status: int | None = None
        self.since_ns = 0
        self.count = 0
        self.message = ""

    def add(self, delta: IntervalDelta) -> None:
        if delta.ok:
            self.status, self.count = None, 0
            return
        errors = delta.error_count
        if not errors:
            return
        messages = [line.partition(": ")[2] for line in delta.recent_errors]
        statuses = {permanent_status(m) for m in messages}
        same = delta.counters.get(HTTP_STATUS_KEY, 0) == errors and len(statuses) == 1
        status = statuses.pop() if same else None
        if status is None:
            self.status, self.count = None, 0  # mixed, or not a permanent rejection: no streak
            return
        if status != self.status:
            self.status, self.since_ns, self.count = status, delta.t0_ns, 0
        self.count += errors
        self.message = messages[-1]

    def verdict(self, now_ns: int, url: str) -> str | None:
        """The run's message once the streak has lasted ``REJECTED_AFTER_S``, else None."""
        if self.status is None or now_ns - self.since_ns < REJECTED_AFTER_S * 1e9:
            return None
        text = scrub(self.message)
        said = text[:QUOTED_CHARS] + ("…" if len(text) > QUOTED_CHARS else "")
        return (
            f"target {url} rejected every request the same way for {REJECTED_AFTER_S:.0f} s "
            f'({self.count} requests, HTTP {self.status}, no success): "{said}"; '
            "fix the request (model, API, profile) or the key; finished steps are in the record"
        )
