"""A running ramp seen from outside, read-only: ``RemoteRun`` polls its ``/snapshot`` (``loadgen.observe.share``)
and answers ``EngineControl`` with what it read, so the console (``tui.attach``) draws it like its own run.

Nothing here can steer the run: the share has no command to receive, ``send`` drops every command, and
``stop`` ends only the polling. Everything read is bounded: the body to ``MAX_READ_BYTES`` (decoded, so a
gzip bomb counts as what it inflates to), the exchange to ``POLL_TOTAL_S`` (a reply that trickles in is cut),
and the JSON is checked field by field against the snapshot's own types (``loadgen.observe.snapshot_json``).

Two kinds of trouble, told apart: the ramp cannot be reached now (``LinkDown``: refused, reset, a timeout;
the run ended and its ramp exited) — the poll goes on, slower, and says so in ``problem``; or what answers is
not a ramp's snapshot (``AttachError``: another HTTP status, not JSON, too big, another format, a field of
the wrong type) — the poll stops, ``fatal`` says why, and the console exits with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import httpx

from loadgen.exits import UsageError
from loadgen.observe.share import SHARE_PATH
from loadgen.observe.snapshot_json import FORMAT, SnapshotFormatError, SnapshotReader
from loadgen.run.config import RunOutcome
from loadgen.run.protocol import ControlCommand
from loadgen.snapshot import Snapshot
from loadgen.target.bounded import ReplyTooLarge, ReplyTooSlow, read_capped
from loadgen.target.http import describe_error, scrub

__all__ = [
    "MAX_READ_BYTES",
    "POLL_TOTAL_S",
    "AttachError",
    "Fetched",
    "LinkDown",
    "RemoteRun",
    "fetch",
    "first_contact",
    "snapshot_url",
]

MAX_READ_BYTES = 16 << 20  # 4x what a ramp shares at most (MAX_SHARED_BYTES): room for a newer ramp's
POLL_TOTAL_S = 5.0  # one whole exchange, connect to last byte
POLL_EVERY_S = 0.25  # the engine's own 4 Hz
RETRY_EVERY_S = 1.0  # while the ramp cannot be reached

ClientFactory = Callable[[], httpx.AsyncClient]


class AttachError(Exception):
    """What answers at the target is not a ramp's ``/snapshot``; the message says what it sent instead."""


class LinkDown(Exception):
    """The ramp cannot be reached now (refused, reset, timed out): it may have ended, or come back."""


def snapshot_url(target: str) -> str:
    """``host:port``, ``PORT`` (on 127.0.0.1) or ``http://host:port[/metrics|/snapshot]`` → the ``/snapshot``
    URL. UsageError names what is wrong with anything else (a socket path, another scheme, no port)."""
    text = target.strip()
    if not text:
        raise UsageError("ramp attach TARGET: TARGET is the HOST:PORT of a running ramp's --metrics-port")
    if text.isdigit():
        text = f"127.0.0.1:{text}"
    if text.startswith(("/", ".", "~")):
        raise UsageError(
            f"{scrub(text)}: ramp shares its console over --metrics-port, not a socket file: "
            "ramp attach HOST:PORT (the port the run was started with)"
        )
    given_scheme = "://" in text
    parts = urlsplit(text if given_scheme else "http://" + text)
    try:
        port = parts.port
    except ValueError:
        raise UsageError(f"{scrub(target)}: not a port number (HOST:PORT, PORT 1-65535)") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"{scrub(target)}: give HOST:PORT or http://HOST:PORT (the run's --metrics-port)")
    if port is None and not given_scheme:
        raise UsageError(f"{scrub(target)}: no port: HOST:PORT, the port the run gave --metrics-port")
    path = parts.path.rstrip("/")
    if path in ("", "/metrics"):
        path = SHARE_PATH
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


@dataclass(frozen=True, slots=True)
class Fetched:
    """One poll's answer: a new snapshot (None: the run has published none yet), or ``unchanged``."""

    snapshot: Snapshot | None
    etag: str
    unchanged: bool = False


def new_client() -> httpx.AsyncClient:
    """Straight to the ramp: no proxy from the environment (a room's proxy has no business between)."""
    return httpx.AsyncClient(trust_env=False, timeout=POLL_TOTAL_S, follow_redirects=False)


async def fetch(
    client: httpx.AsyncClient,
    url: str,
    etag: str = "",
    total_s: float = POLL_TOTAL_S,
    reader: SnapshotReader | None = None,
) -> Fetched:
    """GET the ``/snapshot`` at ``url`` within ``total_s``: LinkDown when it cannot be reached (or answers
    too slowly), AttachError when what answers is not a ramp's snapshot."""
    shown = scrub(url)
    if etag:
        client.headers["If-None-Match"] = etag
    else:
        client.headers.pop("If-None-Match", None)
    try:
        reply = await read_capped(client, "GET", url, max_bytes=MAX_READ_BYTES, total_s=total_s, shown=shown)
    except ReplyTooLarge as exc:
        raise AttachError(f"not a ramp's snapshot: {exc}") from None
    except ReplyTooSlow as exc:
        raise LinkDown(str(exc)) from None
    except httpx.RemoteProtocolError as exc:  # not HTTP at all, or a reply cut off by a ramp that exited
        raise LinkDown(f"broken HTTP reply from {shown}: {' '.join(str(exc).split())[:100]}") from None
    except httpx.HTTPError as exc:
        raise LinkDown(describe_error(exc, shown, total_s)) from None
    if reply.status_code == 304 and etag:
        return Fetched(None, etag, unchanged=True)
    if reply.status_code != 200:
        raise AttachError(
            f"{shown} answered HTTP {reply.status_code}: not a ramp's /snapshot (is it the --metrics-port?)"
        )
    return Fetched(decode(reply.content, shown, reader), tag_of(reply.headers.get("etag", "")))


def tag_of(etag: str) -> str:
    """The server's ETag, if it can go back in a header as it is (printable ASCII, short); else none."""
    return etag if len(etag) <= 200 and etag.isascii() and etag.isprintable() else ""


def decode(content: bytes, shown: str, reader: SnapshotReader | None = None) -> Snapshot | None:
    """The snapshot in a ``/snapshot`` body (``reader``: the steps decoded before are not decoded again);
    AttachError says what is wrong with anything else."""
    try:
        body = json.loads(content)
    except (ValueError, RecursionError):
        start = content[:40].decode("utf-8", "replace")
        raise AttachError(f"{shown} sent no JSON (it begins {start!r}): not a ramp's /snapshot") from None
    if not isinstance(body, dict) or "ramp_snapshot" not in body:
        raise AttachError(f"{shown} sent JSON that is not a ramp's snapshot")
    if body["ramp_snapshot"] != FORMAT:
        raise AttachError(
            f"{shown} shares snapshot format {str(body['ramp_snapshot'])[:20]!r}; this ramp reads {FORMAT}: "
            "attach with the same ramp version as the run"
        )
    if body.get("snapshot") is None:
        return None
    try:
        return (reader or SnapshotReader()).read(body["snapshot"])
    except (SnapshotFormatError, RecursionError, TypeError, ValueError) as exc:
        raise AttachError(f"{shown} sent a malformed snapshot: {str(exc)[:200]}") from None


def first_contact(url: str, client_factory: ClientFactory = new_client) -> Fetched:
    """One poll before the console opens: AttachError (the ramp cannot be reached, or is no ramp) says
    why, so ``ramp attach`` fails with one line instead of an empty console."""

    async def once() -> Fetched:
        async with client_factory() as client:
            return await fetch(client, url)

    try:
        return asyncio.run(once())
    except LinkDown as exc:
        raise AttachError(f"cannot attach: {exc} (is the run up, with --metrics-port?)") from None


class RemoteRun:
    """``EngineControl`` over a ramp's ``/snapshot``, polled on a thread of its own: ``latest()`` is what
    it last read, ``on_snapshot`` is called (from that thread) with each new one. Read-only throughout."""

    def __init__(
        self,
        url: str,
        first: Fetched | None = None,
        on_snapshot: Callable[[Snapshot], None] | None = None,
        client_factory: ClientFactory = new_client,
        every_s: float = POLL_EVERY_S,
        retry_s: float = RETRY_EVERY_S,
    ) -> None:
        self.url = url
        self.shown = scrub(url)
        self.label = scrub(url.removesuffix(SHARE_PATH))  # what the console says it is attached to
        self.on_snapshot = on_snapshot
        self.client_factory = client_factory
        self.every_s, self.retry_s = every_s, retry_s
        self.etag = first.etag if first is not None else ""
        self._latest = first.snapshot if first is not None else None
        self.problem = ""  # why the ramp cannot be reached now ("" while it answers)
        self.fatal = ""  # why attaching stopped for good: what answers is not a ramp's snapshot
        self.polls = 0  # answers read (each 200 or 304)
        self.reader = SnapshotReader()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ---- EngineControl ---------------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._main, name="ramp-attach", daemon=True)
            self._thread.start()

    def stop(self, cancel: bool = True) -> None:
        """Stop reading; the run goes on (nothing is ever sent to it)."""
        self._stop.set()

    def interrupt(self, signum: int) -> None:
        self.stop()

    def wait(self, timeout: float | None = None) -> RunOutcome | None:
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        return None  # the run's outcome is its operator's, not this console's

    def latest(self) -> Snapshot | None:
        return self._latest

    @property
    def done(self) -> bool:
        return self._stop.is_set() or bool(self.fatal)

    def send(self, cmd: ControlCommand) -> None:
        """Dropped: an attached console steers nothing (``tui.attach`` refuses before building one)."""

    # ---- the poll --------------------------------------------------------------------------------------
    def _main(self) -> None:
        with contextlib.suppress(Exception):  # a bug here must end the poll, never the console
            asyncio.run(self._poll())
        if not self._stop.is_set() and not self.fatal:
            self.fatal = "the attach poll stopped unexpectedly"

    async def _poll(self) -> None:
        async with self.client_factory() as client:
            while not self._stop.is_set():
                wait_s = await self.poll_once(client)
                if self.fatal:
                    return
                deadline = time.monotonic() + wait_s
                while not self._stop.is_set() and time.monotonic() < deadline:
                    await asyncio.sleep(min(0.05, wait_s))

    async def poll_once(self, client: httpx.AsyncClient) -> float:
        """One poll; the seconds to wait before the next."""
        try:
            got = await fetch(client, self.url, self.etag, reader=self.reader)
        except LinkDown as exc:
            self.problem = str(exc)
            return self.retry_s
        except AttachError as exc:
            self.fatal = str(exc)
            return 0.0
        self.problem = ""
        self.polls += 1
        if got.unchanged:
            return self.every_s
        self.etag = got.etag
        if got.snapshot is not None:
            self._latest = got.snapshot
            if self.on_snapshot is not None:
                self.on_snapshot(got.snapshot)
        return self.every_s
