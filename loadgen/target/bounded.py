"""Every read from the server off the hot path, bounded in bytes and in time: ``read_capped``.

A server is outside ramp's control: an endless ``/metrics`` (a proxy streaming garbage, a bug) grew the main
process by ~47 MB/s and kept the load from starting; a 50 MB page held a core for the whole run. httpx's
timeout is per read, so a body that trickles forever never times out, and ``response.content`` holds all
of it. ``read_capped`` streams the body, stops past ``max_bytes`` (the decoded bytes: a gzip bomb counts
as what it inflates to) and gives the whole exchange ``total_s``. A reply cut off this way raises
``ReplyTooLarge`` or ``ReplyTooSlow``, whose text says which limit, so a dropped telemetry page is told,
not silent. The hot path bounds its own reads (``loadgen.stream``: error bodies; ``loadgen.sse``: events).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

__all__ = [
    "INFO_BYTES",
    "METRICS_BYTES",
    "MODELS_BYTES",
    "TOKENIZE_BYTES",
    "CappedReply",
    "ReplyTooLarge",
    "ReplyTooSlow",
    "read_capped",
    "size_text",
]

# A vLLM or SGLang /metrics page is 50-500 KB (histograms per model and LoRA adapter); a DCGM exporter's
# ~100 KB for 8 GPUs. 8 MiB is 16x the largest seen, and parses in well under a second.
METRICS_BYTES = 8 << 20
MODELS_BYTES = 4 << 20  # /v1/models: a gateway listing hundreds of models is ~1 MB
INFO_BYTES = 1 << 20  # /version, /server_info, /_sim/info: a few hundred bytes
TOKENIZE_BYTES = 32 << 20  # /tokenize: a token list, ~8 bytes a token (a 1M-token prompt's ids)


class ReplyTooLarge(Exception):
    """The body went past its byte limit; ``str`` says which URL and limit."""


class ReplyTooSlow(Exception):
    """The exchange took longer than its time limit (a body that trickles in never times out per read)."""


@dataclass(frozen=True, slots=True)
class CappedReply:
    status_code: int
    content: bytes
    headers: Mapping[str, str] = field(default_factory=dict)  # lower-case names

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


def size_text(limit: int) -> str:
    return f"{limit / (1 << 20):g} MiB" if limit >= 1 << 20 else f"{limit:,} bytes"


async def read_capped(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    max_bytes: int,
    total_s: float,
    shown: str | None = None,
    json: object | None = None,
) -> CappedReply:
    """``method url`` with the body read up to ``max_bytes`` and the whole exchange within ``total_s``.
    ``shown``: the URL as errors name it (default ``url``). httpx's own errors pass through."""
    name = shown or url

    async def exchange() -> CappedReply:
        async with client.stream(method, url, json=json) as response:
            length = response.headers.get("content-length", "")
            if length.isdigit() and int(length) > max_bytes:
                raise ReplyTooLarge(f"{name} sent {int(length):,} bytes, more than {size_text(max_bytes)}")
            chunks: list[bytes] = []
            got = 0
            async for chunk in response.aiter_bytes():
                got += len(chunk)
                if got > max_bytes:
                    raise ReplyTooLarge(f"{name} sent more than {size_text(max_bytes)}")
                chunks.append(chunk)
            headers = {name.lower(): value for name, value in response.headers.items()}
            return CappedReply(response.status_code, b"".join(chunks), headers)

    try:
        return await asyncio.wait_for(exchange(), total_s)
    except asyncio.TimeoutError:
        raise ReplyTooSlow(f"timeout after {total_s:g} s: {name} did not finish its answer") from None
