"""A worker's shipment ends its windows' intervals at once and encodes their deltas a histogram per loop
turn, between socket reads: a read that becomes ready as the tick fires waits for one histogram, not for
the whole shipment (issue 24: the shipment held every ready socket for about a millisecond at 256 streams,
the largest stage of the client's own first-token read delay at p99). What is sent is what one ``take``
gives, in the order it was queued, and a stop sends everything before the worker ends."""

from __future__ import annotations

import asyncio
import queue
import time
from typing import Any

import numpy as np

from loadgen.metrics import IntervalDelta, Recorder
from loadgen.profile import parse_profile
from loadgen.run.protocol import Flush, StopLoad, WorkerDelta
from loadgen.run.shipping import WindowBook
from loadgen.run.worker import Worker, WorkerSpec
from loadgen.types import Outcome, RequestResult, Target
from loadgen.workload import PromptSizer

MS = 1_000_000


def finished(i: int, chunks: int = 12) -> RequestResult:
    """A success of ``chunks`` chunks, a different TTFT and pace for each ``i``; every 5th a cache hit."""
    start = 10**12 + i * 3 * MS
    first = start + (30 + i % 17) * MS
    times = tuple(first + k * (5 + i % 7) * MS for k in range(chunks))
    return RequestResult(
        outcome=Outcome.OK,
        intended_ns=start,
        sent_ns=start + MS // 5,
        end_ns=times[-1] + MS,
        first_token_ns=first,
        last_token_ns=times[-1],
        chunk_times_ns=times,
        output_tokens=chunks + i % 3,
        input_tokens=100 + i,
        tokens_exact=True,
        cache_class="hit" if i % 5 == 0 else "miss",
    )


def same(got: IntervalDelta, want: IntervalDelta) -> None:
    assert got.counters == want.counters and got.hists.keys() == want.hists.keys()
    for key, (index, count) in want.hists.items():
        assert np.array_equal(got.hists[key][0], index) and np.array_equal(got.hists[key][1], count), key
        assert got.hists[key][1].dtype == count.dtype, key
    assert (got.t0_ns, got.t1_ns, got.live_tokens, got.in_flight) == (want.t0_ns, want.t1_ns, 7, 3)


def test_a_delta_taken_in_pieces_is_the_delta_take_gives() -> None:
    whole, pieces = Recorder(), Recorder()
    for i in range(200):
        whole.record(finished(i))
        pieces.record(finished(i))
    want = whole.take(5, 9, live_tokens=7, in_flight=3)
    steps = pieces.take_steps(5, 9, live_tokens=7, in_flight=3)
    turns = 0
    while True:
        try:
            next(steps)
            turns += 1
        except StopIteration as done:
            got = done.value
            break
    assert turns >= len(want.hists) - 1  # a histogram a turn (the ITL one after its fold)
    same(got, want)


def test_what_is_recorded_between_the_pieces_belongs_to_the_next_interval() -> None:
    rec = Recorder()
    for i in range(10):
        rec.record(finished(i))
    steps = rec.take_steps(0, 1)  # the interval ends here, whatever is recorded while it is encoded
    next(steps)
    for i in range(10, 14):
        rec.record(finished(i))
    for _ in steps:
        pass
    later = rec.take(1, 2)
    assert later.counters["ok"] == 4 and sum(later.hists["ttft_ms"][1]) == 4


class Order:
    """An outbox that notes what arrived, beside the loop callbacks the test schedules."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def put(self, msg: Any, /) -> None:
        self.seen.append(msg)


def worker(out: Order) -> Worker:
    profile = parse_profile("name = 'p'\n[[bucket]]\ninput = 8\noutput = 8\n", source="<p>")
    spec = WorkerSpec(0, Target(url="http://127.0.0.1:9"), profile, PromptSizer(1.0), "m", seed=1)
    return Worker(spec, queue.Queue(), out)  # nothing is sent to a server: the worker's loops do not run


def land(book: WindowBook, results: range) -> None:
    for i in results:
        window = book.sending()
        book.landed(window)
        book.record(window, finished(i))


def test_a_read_ready_as_the_tick_ships_runs_before_the_delta_is_encoded() -> None:
    out = Order()

    async def main() -> None:
        w = worker(out)
        w.book.open(0)
        land(w.book, range(300))
        asyncio.get_running_loop().call_soon(out.seen.append, "read")  # a socket that became readable
        w.handle(Flush(window=1, t0_ns=time.monotonic_ns()))  # a shipment: every open window, now
        assert out.seen == []  # the shipment itself sent nothing: its histograms are encoded later
        while w.encoder is not None:
            await asyncio.sleep(0)

    asyncio.run(main())
    assert out.seen[0] == "read", out.seen[:3]
    deltas = [m for m in out.seen if isinstance(m, WorkerDelta) and m.window == 0]
    assert [(d.current, d.closed) for d in deltas] == [(True, False), (False, True)]
    assert deltas[0].delta.counters["ok"] == 300 and not deltas[1].delta.counters


def test_deltas_leave_in_the_order_queued_and_a_stop_sends_them_all() -> None:
    out = Order()

    async def main() -> None:
        w = worker(out)
        w.book.open(0)
        window = w.book.sending()  # one request of window 0 still in flight across the flush
        land(w.book, range(50))
        w.handle(Flush(window=1, t0_ns=time.monotonic_ns()))
        land(w.book, range(50, 80))
        w.book.landed(window)
        w.book.record(window, finished(99))  # the last of window 0: it closes, queued behind the first
        w.handle(StopLoad(cancel=False))  # no load is running: the stop ships, closes every window, drains
        await asyncio.wait_for(w.done.wait(), 10)
        assert not w.book.outbox

    asyncio.run(main())
    got = [
        (m.window, m.closed, m.delta.counters.get("ok", 0))
        for m in out.seen
        if isinstance(m, WorkerDelta) and m.window >= 0
    ]
    assert got[:2] == [(0, False, 50), (0, True, 1)]
    assert (1, True, 0) in got[2:] and sum(ok for w, _, ok in got if w == 1) == 30
