"""What leaves a worker: one recorder per window a request was sent in, shipped as ``WorkerDelta`` messages,
the live token count converted from streamed units, and the optional per-request trace.

A request belongs to the window it was sent in, even when it completes during the next one, so a step's
latencies hold every request it sent — none carried in from warm-up or an earlier level, none lost for
being slow. A window is shipped closed once nothing it sent is still in flight.
"""

from __future__ import annotations

import json
import os
import time
from collections import deque
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import IO

from loadgen.client import LiveCounter
from loadgen.config import SLO
from loadgen.metrics import IntervalDelta, Recorder
from loadgen.metrics.replicas import ReplicaKeys
from loadgen.run.protocol import RequestRow, WorkerDelta, WorkerMessage
from loadgen.types import Outcome, RequestResult

NO_WINDOW = -2  # after a stop: no current window, so every earlier one closes


@dataclass(slots=True)
class Outgoing:
    """A delta on its way out: its window's interval already ended, its histograms still being encoded."""

    steps: Generator[None, None, IntervalDelta]  # Recorder.take_steps
    window: int
    closed: bool
    current: bool
    in_flight: int
    rows: tuple[RequestRow, ...]
    first_waits: tuple[int, float] = (0, 0.0)


class WindowBook:
    """The worker's open windows and its live counters; ``put`` sends a message to the controller.

    A shipment ends each window's interval at once and queues its delta in ``outbox``; with ``wake`` (a
    worker's loop) the deltas are encoded a histogram at a time by ``encode_step`` between socket reads, in
    the order they were queued, and ``wake`` is called when the outbox has work. Without it every delta is
    encoded and sent at once."""

    def __init__(
        self,
        worker_id: int,
        put: Callable[[WorkerMessage], None],
        slo: SLO | None = None,
        detail: bool = False,
        wake: Callable[[], None] | None = None,
    ) -> None:
        self.worker_id = worker_id
        self.outbox: deque[Outgoing] = deque()
        self.wake = wake
        # --save-requests-detail: each window's finished requests as rows; None (off) builds none at all
        self.rows: dict[int, list[RequestRow]] | None = {} if detail else None
        self.slo = slo  # the run's SLO: each request is judged against its per-request limits (goodput)
        self.put = put
        self.window = -1  # the window requests are sent in now
        self.recorders: dict[int, Recorder] = {-1: Recorder(worker_id=worker_id, slo=slo)}
        self.window_inflight: dict[int, int] = {}
        self.in_flight = 0
        self.sent = 0  # since the last shipment
        self.live = LiveCounter()
        self.tokens_per_unit = 1.0
        self.ratio_tokens = 0.0
        self.ratio_units = 0.0
        self.live_carry = 0.0
        self.t_last_ns = time.monotonic_ns()

    # ---- requests ---------------------------------------------------------------------------------------
    def sending(self, reserved: int | None = None) -> int:
        """A request leaves now: counted in flight in the current window, which it belongs to — or in the
        window that ``reserve``d it when it was scheduled (an open-loop arrival that waited for a slot)."""
        self.in_flight += 1
        self.sent += 1
        if reserved is not None:
            return reserved  # already counted in its window's in-flight since it was scheduled
        window = self.window
        self.window_inflight[window] = self.window_inflight.get(window, 0) + 1
        return window

    def reserve(self) -> int:
        """An arrival is scheduled now but waits for a slot: it belongs to the current window, which stays
        open (not closed) until it has been sent and answered, or ``release``d."""
        window = self.window
        self.window_inflight[window] = self.window_inflight.get(window, 0) + 1
        return window

    def release(self, window: int) -> None:
        """A reserved arrival that will never be sent (paused, stopped): its window may close."""
        self.window_inflight[window] -= 1
        if window != self.window and self.window_inflight[window] == 0:
            self.ship_closed()

    def landed(self, window: int) -> None:
        """The request sent in ``window`` is no longer in flight (answered, failed or cancelled)."""
        self.in_flight -= 1
        self.window_inflight[window] -= 1

    def record(self, window: int, result: RequestResult, replica: ReplicaKeys | None = None) -> None:
        """Fold ``result`` into its window; ``replica``: the keys of the replica that served it (several)."""
        recorder = self.recorders.get(window)
        if recorder is None:  # only if the window was closed under us (cannot happen while counted in flight)
            recorder = self.recorders.setdefault(window, Recorder(worker_id=self.worker_id, slo=self.slo))
        recorder.record(result)
        if replica is not None:
            recorder.record_replica(replica, result)
        if self.rows is not None:
            self.rows.setdefault(window, []).append(request_row(self.worker_id, result))
        if window != self.window and self.window_inflight[window] == 0:
            self.ship_closed()
        self._account(result, window == self.window)

    def _account(self, result: RequestResult, sent_in_current: bool) -> None:
        """Settle one finished request against the live token count: usage's exact count for a success,
        nothing for a failure (the live count covers successful output tokens only): the tokens a failed
        request streamed are taken back, from what ``ship`` sends later (see there) — only when it was sent
        in the current window, so that all of them went to it. One sent earlier (a surplus stream cancelled
        when the level is lowered, sent while the last step closed) streamed into earlier windows: taking
        its tokens back from the current one would debit the next step for what it never counted."""
        units = (result.output_tokens if result.outcome is Outcome.OK else 0) - Recorder.live_correction(
            result
        )
        # Convert the streamed units still sitting in the live counter at the current ratio first, so this
        # request's correction uses the same ratio its units were (or will be) converted at.
        self.live_carry += self.live.tokens * self.tokens_per_unit
        self.live.tokens = 0
        counted = units * self.tokens_per_unit
        if result.outcome is Outcome.OK:
            self.live_carry += result.output_tokens - counted
            if units > 0:
                # Usage tokens per streamed unit over recent successes (exact after the first one).
                self.ratio_tokens = 0.98 * self.ratio_tokens + result.output_tokens
                self.ratio_units = 0.98 * self.ratio_units + units
                self.tokens_per_unit = self.ratio_tokens / self.ratio_units
        elif sent_in_current:
            self.live_carry -= counted

    # ---- windows ----------------------------------------------------------------------------------------
    def open(self, window: int) -> None:
        """Requests sent from now on belong to ``window`` (a flush already shipped the earlier ones). What was
        left to take back (a negative carry) was owed by the window just shipped: it is dropped, never taken
        from the new one (the surplus streams a lowering cancels while it settles would otherwise debit the
        next step for tokens it never counted)."""
        self.window = window
        self.live_carry = max(0.0, self.live_carry)
        self.recorders.setdefault(window, Recorder(worker_id=self.worker_id, slo=self.slo))

    def ship(
        self,
        queued: int,
        health: Callable[[], Mapping[str, float]],
        backing_off: int = 0,
        first_waits: tuple[int, float] = (0, 0.0),
    ) -> None:
        """Ship every open window's delta: the current one with the live gauges (and ``first_waits``:
        requests with no token yet, the longest wait in s), earlier ones (requests still in flight from
        them) with their late results, closed once nothing of theirs is in flight."""
        now = time.monotonic_ns()
        # Streamed units (chunks, or token_ids counts) become tokens at the ratio usage showed so far, so the
        # live rate — and a window's aggregate tok/s — follows tokens as they arrive even when a server packs
        # several tokens into one chunk; completions then correct the small remainder (see _account).
        # A failed request's streamed tokens are taken back from what is shipped, never below zero: a window
        # that got the tokens may already be gone, and a negative count would make a later window's rate
        # negative. What is left to take back (a negative carry) waits for the next tokens streamed.
        self.live_carry += self.live.tokens * self.tokens_per_unit
        self.live.tokens = 0
        live_tokens = max(0, int(self.live_carry))
        self.live_carry -= live_tokens
        for window in list(self.recorders):
            recorder = self.recorders[window]
            if window == self.window:
                steps = recorder.take_steps(
                    self.t_last_ns,
                    now,
                    live_tokens=live_tokens,
                    in_flight=self.in_flight,
                    queued=queued,
                    sent=self.sent,
                    health=health(),
                    backing_off=backing_off,
                )
                inflight = self.window_inflight.get(window, 0)
                rows = self.take_rows(window)
                self._send(Outgoing(steps, window, False, True, inflight, rows, first_waits))
            else:
                left = self.window_inflight.get(window, 0)
                closed = left == 0
                steps = recorder.take_steps(self.t_last_ns, now)
                self._send(Outgoing(steps, window, closed, False, left, self.take_rows(window)))
                if closed:
                    del self.recorders[window]
                    self.window_inflight.pop(window, None)
        self.sent = 0
        self.t_last_ns = now

    def ship_closed(self) -> None:
        """Close at once the earlier windows with nothing in flight (the controller can report them)."""
        now = time.monotonic_ns()
        for window in [w for w in self.recorders if w != self.window and not self.window_inflight.get(w)]:
            steps = self.recorders.pop(window).take_steps(now, now)
            self._send(Outgoing(steps, window, True, False, 0, self.take_rows(window)))
            self.window_inflight.pop(window, None)

    # ---- the outbox -------------------------------------------------------------------------------------
    def _send(self, out: Outgoing) -> None:
        self.outbox.append(out)
        if self.wake is None:
            self.drain()
        else:
            self.wake()

    def encode_step(self) -> bool:
        """Encode one histogram of the oldest delta waiting, and send that delta once it is whole; whether
        any work is left."""
        outbox = self.outbox
        if not outbox:
            return False
        out = outbox[0]
        try:
            next(out.steps)
        except StopIteration as done:
            outbox.popleft()
            delta = done.value
            self.put(
                WorkerDelta(
                    self.worker_id,
                    out.window,
                    out.closed,
                    out.current,
                    delta,
                    out.in_flight,
                    out.rows,
                    out.first_waits,
                )
            )
        return bool(outbox)

    def drain(self) -> None:
        """Encode and send every delta waiting, now (a stop: nothing may be left behind)."""
        while self.encode_step():
            pass

    def take_rows(self, window: int) -> tuple[RequestRow, ...]:
        """The window's rows gathered since its last delta (none unless --save-requests-detail)."""
        if self.rows is None:
            return ()
        return tuple(self.rows.pop(window, ()))

    def close_all(self) -> None:
        """After a stop (nothing in flight): every window closes now."""
        self.window = NO_WINDOW
        self.ship_closed()


def request_row(worker_id: int, r: RequestResult) -> RequestRow:
    """What ``--save-requests-detail`` keeps of one finished request."""
    return RequestRow(
        request_id=r.request_id,
        worker=worker_id,
        outcome=r.outcome.value,
        error_kind=r.error_kind.value if r.error_kind is not None else "",
        http_status=r.http_status,
        intended_ns=r.intended_ns,
        sent_ns=r.sent_ns,
        first_token_ns=r.first_token_ns,
        last_token_ns=r.last_token_ns,
        end_ns=r.end_ns,
        input_tokens=r.input_tokens,
        output_tokens=r.output_tokens,
        cached_tokens=r.cached_tokens,
        tokens_exact=r.tokens_exact,
        max_tokens=r.max_tokens,
        finish_reason=r.finish_reason or "",
        bucket=r.bucket,
        cache_class=r.cache_class or "",
        session_id=r.session_id,
        turn=r.turn,
        first_answer_ns=r.first_answer_ns,
        reasoning_tokens=r.reasoning_tokens,
        reasoning_exact=r.reasoning_exact,
        first_tool_ns=r.first_tool_ns,
        tool_tokens=r.tool_tokens,
    )


class RequestTrace:
    """One line per request (``RAMP_TRACE_DIR``): for joining against a server's own logs or ground truth.
    A debugging aid, off the measured path unless asked for; ``RAMP_TRACE_CHUNKS=1`` adds every chunk."""

    def __init__(self, worker_id: int) -> None:
        trace_dir = os.environ.get("RAMP_TRACE_DIR")
        self.chunks = os.environ.get("RAMP_TRACE_CHUNKS") == "1"
        self.file: IO[str] | None = (
            open(os.path.join(trace_dir, f"trace-{worker_id}.jsonl"), "a", encoding="utf-8")  # noqa: SIM115
            if trace_dir
            else None
        )

    def write(self, r: RequestResult, window: int) -> None:
        if self.file is None:
            return
        line: dict[str, object] = {
            "request_id": r.request_id,
            "window": window,
            "outcome": r.outcome.value,
            "intended_ns": r.intended_ns,
            "sent_ns": r.sent_ns,
            "first_token_ns": r.first_token_ns,
            "last_token_ns": r.last_token_ns,
            "end_ns": r.end_ns,
            "output_tokens": r.output_tokens,
            "chunks": len(r.chunk_times_ns),
            "first_answer_ns": r.first_answer_ns,
            "reasoning_tokens": r.reasoning_tokens,
            "first_tool_ns": r.first_tool_ns,
            "tool_tokens": r.tool_tokens,
        }
        if self.chunks:
            line["chunk_times_ns"] = list(r.chunk_times_ns)
            line["chunk_tokens"] = list(r.chunk_tokens) if r.chunk_tokens else None
        self.file.write(json.dumps(line) + "\n")

    def cut(self, window: int, at_ns: int) -> None:
        """Where this worker cut its windows, on its own clock: ``window`` opens at ``at_ns`` (-1: a stop)."""
        if self.file is not None:
            self.file.write(json.dumps({"cut": window, "at_ns": at_ns}) + "\n")

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
