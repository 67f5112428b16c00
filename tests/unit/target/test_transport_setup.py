"""What opening a transport costs the first request.

A worker opens its transport on its first request (inside the loop that uses it), between that request's
intended start and its send: whatever the opening does is in the request's TTFT. Building a TLS context reads
the CA store (30 ms measured), and the h1 pool built one for plain-http targets too: the first request of a
``--warmup 0`` step was sent 40-50 ms after its intended start (test_accuracy's trace, 1 stream).
"""

from __future__ import annotations

import ssl

import pytest

from loadgen import transports
from loadgen.types import Target


def _no_tls(*_: object) -> ssl.SSLContext:
    raise AssertionError("a TLS context was built for a plain-http target")


def test_plain_http_builds_no_tls_context(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transports, "tls_context", _no_tls)
    transport = transports.open_transport("h1", Target(url="http://127.0.0.1:9/v1"), 4)
    assert isinstance(transport, transports.H1Transport) and transport.pool.ssl is None


def test_https_still_gets_its_context(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[Target] = []

    def context(target: Target) -> ssl.SSLContext:
        built.append(target)
        return ssl.create_default_context()

    monkeypatch.setattr(transports, "tls_context", context)
    transport = transports.open_transport("h1", Target(url="https://127.0.0.1:9/v1"), 4)
    assert isinstance(transport, transports.H1Transport)
    assert len(built) == 1 and transport.pool.ssl is not None
