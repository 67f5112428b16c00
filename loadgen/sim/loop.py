"""The simulator's engine loop: the one task that owns time and writes every stream's chunks.

It runs a step against a monotonic deadline (the next step starts where the last one ended, so sleep
overshoot never accumulates), then writes the chunks of every request the step advanced. A chunk is written
straight from the loop when the client's socket buffer is nearly empty, and handed to the request's own task
(its backlog) when the client is slow or the stream is stalled on purpose, so one slow reader never delays
the others. How honest the clock was (steps written late, worst lag, resyncs) is counted for ``/_sim/info``.
"""

from __future__ import annotations

import asyncio
import time

from .sequences import Engine, Seq, Step
from .stream import Stream

SLOW_CLIENT_BYTES = 16_384  # above this much unsent data, stop writing from the engine loop
RESYNC_NS = 100_000_000  # if the loop falls this far behind, restart the clock instead of replaying steps
LATE_NS = 2_000_000  # a step written later than this counts as late


class EngineLoop:
    """Steps ``engine`` in real time and writes what each step produced."""

    def __init__(self, engine: Engine, tokens: tuple[bytes, ...], stream_interval: int) -> None:
        self.engine = engine
        self.tokens = tokens
        self.stream_interval = stream_interval
        self.wakeup = asyncio.Event()
        self.steps_late = 0
        self.max_late_ns = 0
        self.resyncs = 0

    def submit(self, seq: Seq) -> None:
        self.engine.add(seq)
        self.wakeup.set()

    async def run(self) -> None:
        engine = self.engine
        mono = time.monotonic_ns
        t = mono()
        while True:
            if not engine.has_work():
                self.wakeup.clear()
                await self.wakeup.wait()
                t = mono()
                continue
            now = mono()
            if now - t > RESYNC_NS:
                self.resyncs += 1
                t = now
            step = engine.step(t)
            delay = step.end_ns - mono()
            if delay > 0:
                await asyncio.sleep(delay / 1e9)
            else:
                await asyncio.sleep(0)  # catching up: still let the sockets breathe
            late = mono() - step.end_ns
            if late > LATE_NS:
                self.steps_late += 1
            if late > self.max_late_ns:
                self.max_late_ns = late
            if step.emits:
                await self.emit(step)
            t = step.end_ns

    async def emit(self, step: Step) -> None:
        interval = self.stream_interval
        toks = self.tokens
        for e in step.emits:
            st = e.seq.stream
            if not isinstance(st, Stream) or st.closed:
                continue
            st.unsent += e.tokens
            finished = e.finished
            if not finished and st.sent and st.unsent < interval:
                continue
            n = st.unsent
            if not st.streaming:
                st.sent += n
                st.unsent = 0
                if finished:
                    st.complete = True
                    st.wake.set()
                continue
            data = st.chunk(toks, n, e.seq if finished else None)
            if n:
                st.chunks += 1
            if not await self._send(st, data, n):
                continue
            if finished:
                st.complete = True
                st.wake.set()
            elif st.disconnect_at >= 0 and st.sent >= st.disconnect_at:
                st.cut = True
                st.complete = True
                st.closed = True
                self.engine.abort(e.seq)
                st.wake.set()
            elif st.stall_at >= 0 and st.sent >= st.stall_at:
                st.stall_at = -1
                st.hold_until = time.monotonic_ns() + int(st.stall_s * 1e9)
                if st.backlog is None:
                    st.backlog = []
                st.wake.set()

    async def _send(self, st: Stream, data: bytes, n: int) -> bool:
        """Write ``data`` now, or queue it for the request's task; False if the client is gone."""
        resp = st.resp
        transport = st.transport
        if (
            st.backlog is not None
            or resp is None
            or transport is None
            or transport.get_write_buffer_size() > SLOW_CLIENT_BYTES
        ):
            if st.backlog is None:
                st.backlog = []
            st.backlog.append(data)
            st.wake.set()
            return True
        # Stamped as the write starts: the ground truth of when a token left the server, so no client can
        # ever see it earlier.
        now = time.monotonic_ns()
        try:
            await resp.write(data)  # cannot block: the buffer is nearly empty
        except (ConnectionError, RuntimeError):
            self.gone(st)
            return False
        if st.first_ns is None and n:
            st.first_ns = now
        if st.first_answer_ns is None and st.answering:
            st.first_answer_ns = now
        st.last_ns = now
        return True

    def gone(self, st: Stream) -> None:
        st.closed = True
        if st.seq is not None:
            self.engine.abort(st.seq)
        st.wake.set()
