"""A burst of ready sockets is stamped before it is parsed (``loadgen.h1``): each read is stamped as the
loop hands it over and parsed with the other reads of that loop turn afterwards, so the last socket of a
burst is stamped after the reads before it, not after their parsing too (issue 24: at 1,024 streams the
burst order, 3 – 12 µs of parsing a read, was the largest client stage of the first-token read delay at
p99). Each piece keeps its own read's stamp and bytes, in read order, and a connection that closes right
after its last read still sees those bytes first."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from loadgen.h1 import PENDING_BYTES, READ_BUFFER_BYTES, Connection, Pool

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def chunk(text: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(text), text)


class Sink:
    """Notes each body piece with its stamp and the moment it was parsed."""

    def __init__(self, log: list[tuple[int, bytes, int, int]], index: int) -> None:
        self.log, self.index = log, index
        self.status = 0

    def headers(self, status: int, retry_after: str | None, ratelimit: Any) -> None:
        self.status = status

    def piece(self, data: bytes, t_ns: int) -> None:
        self.log.append((self.index, bytes(data), t_ns, time.monotonic_ns()))


class Transport:
    def write(self, data: bytes) -> None:
        pass

    def abort(self) -> None:
        pass


def read(pool: Pool, conn: Connection, data: bytes) -> None:
    """What the loop does for one ready socket: ``recv`` into the pool's buffer, then ``buffer_updated``."""
    pool.read_buffer[: len(data)] = data
    conn.buffer_updated(len(data))


def opened(pool: Pool, n: int, log: list[tuple[int, bytes, int, int]]) -> list[Connection]:
    conns = []
    for i in range(n):
        conn = Connection(pool)
        conn.connection_made(Transport())  # type: ignore[arg-type]
        conn.start(b"POST / HTTP/1.1\r\n\r\n", Sink(log, i))
        conns.append(conn)
    return conns


def single(log: list[tuple[int, bytes, int, int]]) -> tuple[Pool, Connection]:
    """A pool with one connection, its request started (made inside the test's loop)."""
    pool = Pool("http://127.0.0.1:9", 4, 1.0)
    (conn,) = opened(pool, 1, log)
    return pool, conn


def test_every_read_of_a_burst_is_stamped_before_any_is_parsed() -> None:
    log: list[tuple[int, bytes, int, int]] = []
    stamps_done: list[int] = []

    async def main() -> None:
        pool = Pool("http://127.0.0.1:9", 64, 1.0)
        conns = opened(pool, 32, log)
        for i, conn in enumerate(conns):  # one poll's ready sockets, served back to back
            read(pool, conn, HEAD + chunk(b"data: %d\n\n" % i))
        stamps_done.append(time.monotonic_ns())
        await asyncio.sleep(0)  # the next loop turn: the burst is parsed

    asyncio.run(main())
    assert [i for i, *_ in log] == list(range(32))  # in the order read, each its own bytes
    assert [data for _, data, *_ in log] == [b"data: %d\n\n" % i for i in range(32)]
    stamps = [t for *_, t, _ in log]
    assert stamps == sorted(stamps) and len(set(stamps)) >= 2
    first_parse = min(parsed for *_, parsed in log)
    assert max(stamps) <= stamps_done[0] <= first_parse  # the last read's stamp came before any parsing


def test_a_connection_closed_after_its_last_read_sees_those_bytes_first() -> None:
    log: list[tuple[int, bytes, int, int]] = []
    ended: list[Any] = []

    async def main() -> None:
        pool, conn = single(log)
        assert conn.waiter is not None
        conn.waiter.add_done_callback(lambda f: ended.append(f.exception()))
        read(pool, conn, HEAD + chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        conn.connection_lost(None)  # the server closed right after: the same loop turn
        await asyncio.sleep(0)

    asyncio.run(main())
    assert [data for _, data, *_ in log] == [b"data: [DONE]\n\n"]
    assert ended == [None]  # complete, not a connection closed mid-response


def test_a_flood_is_parsed_before_what_is_kept_passes_its_bound() -> None:
    log: list[tuple[int, bytes, int, int]] = []
    kept: list[int] = []

    async def main() -> None:
        pool, conn = single(log)
        read(pool, conn, HEAD)
        piece = chunk(b"x" * (READ_BUFFER_BYTES - 16))
        for _ in range(64):  # 16 MiB in one loop turn, as a server that floods one socket could send
            read(pool, conn, piece)
            kept.append(pool.pending_bytes)
        await asyncio.sleep(0)

    asyncio.run(main())
    assert max(kept) <= PENDING_BYTES + READ_BUFFER_BYTES
    assert len(log) == 64 and all(len(data) == READ_BUFFER_BYTES - 16 for _, data, *_ in log)


def test_bytes_an_idle_connection_read_are_never_the_next_requests() -> None:
    log: list[tuple[int, bytes, int, int]] = []

    async def main() -> Connection | None:
        pool, conn = single(log)
        read(pool, conn, HEAD + chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        await asyncio.sleep(0)  # parsed: the response is complete
        read(
            pool, conn, HEAD + chunk(b"data: stale\n\n")
        )  # a misbehaving server's extra answer, not parsed yet
        conn.finish(reusable=True)  # back to the pool, idle
        pool.open.add(conn)
        try:
            return await pool.acquire()  # the next request: not on the connection that read the stale answer
        except OSError:
            return None  # it tried a new connection (nothing listens on port 9)
        finally:
            assert conn.closed and conn not in pool.idle

    assert asyncio.run(main()) is None
    assert [data for _, data, *_ in log] == [b"data: [DONE]\n\n"]  # the stale answer reached no sink
