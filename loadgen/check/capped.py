"""The SDK's answers bounded in bytes and in time, as every other read from a server is
(``loadgen.target.bounded``): ``cap_answers`` is an httpx response hook for the SDK's own client.

The SDK reads a non-streamed answer whole (``response.aread``) and a stream chunk by chunk
(``response.aiter_bytes``); httpx's timeouts are per read, so an endless body, or one that trickles, was
read for as long as the server sent it, into memory. The hook wraps the response's ``aiter_bytes``, which
both paths read through, after decoding (a gzip bomb counts as what it inflates to): past ``max_bytes`` or
``total_s`` it raises ``ReplyTooLarge`` / ``ReplyTooSlow``, which the check shows as its failure. It works
on whichever httpx the SDK brings (httpx, or httpx2 in recent SDKs): it only touches the response it is
handed. It also notes the latest answer's status, content type and first bytes (``LastAnswer``): what a
check shows when an answer came back in a shape it could not read.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from loadgen.target.bounded import ReplyTooLarge, ReplyTooSlow, size_text
from loadgen.target.secrets import scrub_cut

__all__ = ["SDK_BYTES", "LastAnswer", "cap_answers"]

SDK_BYTES = 16 << 20  # a check's answers are a few KB (16-token replies, a model list, an error)
HEAD_BYTES = 96  # the first bytes of an answer kept to show


@dataclass
class LastAnswer:
    """The latest answer the SDK read: its status, content type and first ``HEAD_BYTES`` bytes."""

    status: int = 0
    content_type: str = ""
    head: bytes = b""

    def text(self, secrets: Sequence[str] = ()) -> str:
        """One line: ``HTTP 200 text/event-stream, body 'data: {...'``, the body scrubbed of ``secrets``
        before it is shown: it is the head of a longer body, and a secret it cuts is masked too."""
        if not self.status:
            return "no answer was read"
        body = " ".join(self.head.decode("utf-8", "replace").split())
        body = scrub_cut(body, secrets, len(body), was_cut=len(self.head) >= HEAD_BYTES)
        kind = " ".join(self.content_type.split())[:60] or "no content type"
        return (
            f"HTTP {self.status} {kind}, body {body!r}" if body else f"HTTP {self.status} {kind}, empty body"
        )


def cap_answers(
    max_bytes: int, total_s: float, last: LastAnswer | None = None
) -> Callable[[Any], Awaitable[None]]:
    """An httpx ``response`` event hook capping each answer at ``max_bytes`` decoded bytes and
    ``total_s`` from its headers to its last byte; noting each answer in ``last`` when given."""
    seen = last if last is not None else LastAnswer()

    async def hook(response: Any) -> None:
        seen.status, seen.head = int(response.status_code), b""
        seen.content_type = str(response.headers.get("content-type", ""))
        name = str(response.request.url.copy_with(query=None))  # no query: it may carry a key
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > max_bytes:
            raise ReplyTooLarge(f"{name} sent {int(length):,} bytes, more than {size_text(max_bytes)}")
        read = response.aiter_bytes
        deadline = time.monotonic() + total_s

        async def capped(chunk_size: int | None = None) -> AsyncIterator[bytes]:
            got = 0
            async for chunk in read(chunk_size):
                got += len(chunk)
                if len(seen.head) < HEAD_BYTES:
                    seen.head += chunk[: HEAD_BYTES - len(seen.head)]
                if got > max_bytes:
                    raise ReplyTooLarge(f"{name} sent more than {size_text(max_bytes)}")
                if time.monotonic() > deadline:
                    raise ReplyTooSlow(f"timeout after {total_s:g} s: {name} did not finish its answer")
                yield chunk

        response.aiter_bytes = capped

    return hook
