"""The live snapshot shared read-only with ``ramp attach``: ``GET /snapshot`` on the ``--metrics-port``
server (``loadgen.observe.exporter``), for the console and headless faces alike.

What is shared is the latest ``Snapshot`` the engine published, as JSON (``loadgen.observe.snapshot_json``),
with every string scrubbed of the run's secrets (the API key, a URL's password, an Authorization header's
credentials, secret-looking headers and query parameters): the console's own numbers, never a key. It is
encoded once per snapshot however many consoles are attached (``SnapshotShare.reply`` keeps the last one),
and bounded: past ``MAX_SHARED_BYTES`` the finished steps' histogram bars go first, then the oldest steps,
and the snapshot's warnings say what was left out. An attach console polls with ``If-None-Match``: the
``ETag`` names the snapshot, so a poll between two snapshots is a 304 with no body.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import threading
import time
from collections.abc import Iterable, Sequence

from loadgen.observe.snapshot_json import FORMAT, plain
from loadgen.snapshot import Snapshot, StepSummary
from loadgen.target.http import api_key, header_secrets, scrub, target_headers, url_secrets
from loadgen.types import Target

__all__ = ["MAX_SHARED_BYTES", "SHARE_PATH", "SnapshotShare", "shared_snapshot", "target_secrets"]

SHARE_PATH = "/snapshot"
# A long ramp's snapshot (a hundred steps with their histograms, 15 min of series) is well under 1 MiB.
MAX_SHARED_BYTES = 4 << 20
KEPT_STEPS = 32  # past the limit even without their bars: the newest steps kept
# At the run's end the server waits (at most LINGER_S) until consoles that read it in the last READERS_S
# have read the last snapshot, so each one shows how the run ended (a headless ramp exits at once).
LINGER_S = 1.5
READERS_S = 3.0
SECRET_HEADER = re.compile(r"key|token|auth|secret|password|cookie|session", re.IGNORECASE)


def target_secrets(target: Target) -> tuple[str, ...]:
    """Every credential the run sends, for ``scrub``: the key, URL passwords, auth and secret headers."""
    found = [api_key(target.api_key_env), *header_secrets(target_headers(target))]
    for url in (target.url, *target.replicas):
        found += url_secrets(url)
    found += [value for name, value in target.headers if SECRET_HEADER.search(name)]
    return tuple(sorted({s for s in found if len(s) >= 4}, key=len, reverse=True))  # longest first


def dumps(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), allow_nan=False).encode()


def encode(snapshot: Snapshot | None, secrets: Iterable[str]) -> bytes:
    """The ``/snapshot`` body: ``{"ramp_snapshot": FORMAT, "snapshot": {...} | null}``, scrubbed."""
    if snapshot is None:
        return dumps({"ramp_snapshot": FORMAT, "snapshot": None})
    cache = StepCache(secrets)
    return assemble(snapshot, [cache.whole(step) for step in snapshot.steps], cache.secrets)


def assemble(snapshot: Snapshot, steps: Sequence[bytes], secrets: tuple[str, ...]) -> bytes:
    """The body of ``snapshot`` with its steps given already encoded (``StepCache``): a long run's finished
    steps are most of a snapshot, and never change once finished."""
    top = plain(dataclasses.replace(snapshot, steps=()), lambda text: scrub(text, secrets))
    assert isinstance(top, dict)
    del top["steps"]
    head = dumps(top)  # {...}: the steps go in before its closing brace
    return b'{"ramp_snapshot":%d,"snapshot":%s,"steps":[%s]}}' % (FORMAT, head[:-1], b",".join(steps))


def without_bars(step: StepSummary) -> StepSummary:
    """A finished step without its histograms' drawing bins (its percentiles, all the table shows, kept)."""
    hist = {name: dataclasses.replace(view, bins=(), le=()) for name, view in step.stats.hist.items()}
    return dataclasses.replace(step, stats=dataclasses.replace(step.stats, hist=hist))


class StepCache:
    """Each finished step encoded once (scrubbed), whole and without its bars, kept while it is shown."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self.secrets = tuple(secrets)
        self._steps: dict[int, tuple[StepSummary, bytes, bytes | None]] = {}  # id -> (step, whole, bare)

    def _text(self, text: str) -> str:
        return scrub(text, self.secrets)

    def whole(self, step: StepSummary) -> bytes:
        entry = self._steps.get(id(step))
        if entry is None or entry[0] is not step:
            entry = self._steps[id(step)] = (step, dumps(plain(step, self._text)), None)
        return entry[1]

    def bare(self, step: StepSummary) -> bytes:
        whole = self.whole(step)
        entry = self._steps[id(step)]
        if entry[2] is None:
            entry = self._steps[id(step)] = (step, whole, dumps(plain(without_bars(step), self._text)))
        assert entry[2] is not None
        return entry[2]

    def keep(self, steps: Sequence[StepSummary]) -> None:
        """Forget the steps no longer shown (a restarted run's)."""
        shown = {id(step) for step in steps}
        self._steps = {key: entry for key, entry in self._steps.items() if key in shown}


def shared_snapshot(
    snapshot: Snapshot, secrets: Iterable[str], limit: int = MAX_SHARED_BYTES, cache: StepCache | None = None
) -> bytes:
    """``encode(snapshot)`` within ``limit`` bytes: the finished steps' bars, then the oldest steps, left out
    (and said among the warnings) until it fits; an empty ``null`` snapshot if nothing does."""
    steps = cache if cache is not None else StepCache(secrets)
    masked = steps.secrets
    body = assemble(snapshot, [steps.whole(s) for s in snapshot.steps], masked)
    if len(body) <= limit:
        return body
    bare = [steps.bare(s) for s in snapshot.steps]
    said = (*snapshot.warnings, "shared view: the finished steps' histogram bars left out (size)")
    body = assemble(dataclasses.replace(snapshot, warnings=said), bare, masked)
    if len(body) <= limit:
        return body
    dropped = max(0, len(snapshot.steps) - KEPT_STEPS)
    lightest = dataclasses.replace(
        snapshot,
        steps=snapshot.steps[dropped:],
        series=snapshot.series[-KEPT_STEPS * 10 :],
        warnings=(*snapshot.warnings, f"shared view: {dropped} older steps and the bars left out (size)"),
    )
    body = assemble(lightest, bare[dropped:], masked)
    return body if len(body) <= limit else encode(None, masked)


class SnapshotShare:
    """The latest snapshot's ``/snapshot`` body and ETag, encoded once per snapshot (thread-safe)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets = tuple(secrets)
        self.steps = StepCache(self.secrets)
        self._lock = threading.Condition()
        self._last: tuple[Snapshot | None, bytes, str] | None = None
        self._read_at = -math.inf  # monotonic time of the last read

    def reply(self, snapshot: Snapshot | None) -> tuple[bytes, str]:
        """(body, ETag) for ``snapshot``; the same object twice is encoded once."""
        with self._lock:
            self._read_at = time.monotonic()
            self._lock.notify_all()
            last = self._last
            if last is not None and last[0] is snapshot:
                return last[1], last[2]
            if snapshot is None:
                body = encode(None, self.secrets)
            else:
                if self.steps.secrets != self.secrets:  # set after the server started (with_exporter)
                    self.steps = StepCache(self.secrets)
                body = shared_snapshot(snapshot, self.secrets, cache=self.steps)
                self.steps.keep(snapshot.steps)
            etag = '"none"' if snapshot is None else f'"{snapshot.seq}-{id(snapshot):x}"'
            self._last = (snapshot, body, etag)
            return body, etag

    def linger(self, final: Snapshot | None, timeout_s: float = LINGER_S) -> bool:
        """Wait, at most ``timeout_s``, until ``final`` has been read, when a console read lately; whether
        it was (or nobody was reading)."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            if time.monotonic() - self._read_at > READERS_S:
                return True
            while not (self._last is not None and self._last[0] is final):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(left)
            return True
