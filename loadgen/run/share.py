"""The live snapshot shared read-only with ``ramp attach``: ``GET /snapshot`` on the ``--metrics-port``
server (``loadgen.run.exporter``), for the console and headless faces alike.

What is shared is the latest ``Snapshot`` the engine published, as JSON (``loadgen.run.snapshot_json``),
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
from collections.abc import Iterable

from loadgen.run.snapshot_json import FORMAT, plain
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


def encode(snapshot: Snapshot | None, secrets: Iterable[str]) -> bytes:
    """The ``/snapshot`` body: ``{"ramp_snapshot": FORMAT, "snapshot": {...} | null}``, scrubbed."""
    masked = tuple(secrets)
    body = {
        "ramp_snapshot": FORMAT,
        "snapshot": None if snapshot is None else plain(snapshot, lambda text: scrub(text, masked)),
    }
    return json.dumps(body, separators=(",", ":"), allow_nan=False).encode()


def without_bars(step: StepSummary) -> StepSummary:
    """A finished step without its histograms' drawing bins (its percentiles, all the table shows, kept)."""
    hist = {name: dataclasses.replace(view, bins=(), le=()) for name, view in step.stats.hist.items()}
    return dataclasses.replace(step, stats=dataclasses.replace(step.stats, hist=hist))


def shared_snapshot(snapshot: Snapshot, secrets: Iterable[str], limit: int = MAX_SHARED_BYTES) -> bytes:
    """``encode(snapshot)`` within ``limit`` bytes: the finished steps' bars, then the oldest steps, left out
    (and said among the warnings) until it fits; an empty ``null`` snapshot if nothing does."""
    masked = tuple(secrets)
    body = encode(snapshot, masked)
    if len(body) <= limit:
        return body
    lighter = dataclasses.replace(
        snapshot,
        steps=tuple(without_bars(s) for s in snapshot.steps),
        warnings=(*snapshot.warnings, "shared view: the finished steps' histogram bars left out (size)"),
    )
    body = encode(lighter, masked)
    if len(body) <= limit:
        return body
    dropped = max(0, len(snapshot.steps) - KEPT_STEPS)
    lightest = dataclasses.replace(
        lighter,
        steps=lighter.steps[dropped:],
        series=lighter.series[-KEPT_STEPS * 10 :],
        warnings=(*snapshot.warnings, f"shared view: {dropped} older steps and the bars left out (size)"),
    )
    body = encode(lightest, masked)
    return body if len(body) <= limit else encode(None, masked)


class SnapshotShare:
    """The latest snapshot's ``/snapshot`` body and ETag, encoded once per snapshot (thread-safe)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets = tuple(secrets)
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
            body = encode(None, self.secrets) if snapshot is None else shared_snapshot(snapshot, self.secrets)
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
