"""TLS: a certificate that cannot be verified is told as such (verify failed, why, against which CA store,
what to do), not as "cannot connect (operation not permitted)"; ``--ca-cert FILE`` and ``SSL_CERT_FILE``
are honoured on every path (probe, the three transports); ``--insecure`` works and is loud: a warning on
stderr and in the snapshot, ``insecure: true`` in the record header."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from fault_servers import Certs, FaultServer, answering, certificates, tls_context

from loadgen.client import Client
from loadgen.config import TRANSPORTS
from loadgen.target.connect import connection_warnings
from loadgen.target.probe import probe
from loadgen.types import ErrorKind, Outcome, RequestSpec, Target

SPEC = RequestSpec(api="chat", model="tiny", max_tokens=4, messages=(("user", "hi"),))


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def https(certs: Certs) -> Iterator[FaultServer]:
    server = answering(tls=tls_context(certs))
    yield server
    server.stop()


def send(target: Target, transport: str) -> tuple[ErrorKind | None, str]:
    async def main() -> tuple[ErrorKind | None, str]:
        client = Client(target, max_connections=2, transport=transport)  # type: ignore[arg-type]
        try:
            result = await asyncio.wait_for(client.send(SPEC, time.monotonic_ns()), 10)
        finally:
            await client.aclose()
        assert result.outcome is Outcome.OK or result.error_kind is not None
        return result.error_kind, result.error_message

    return asyncio.run(main())


def test_an_unverifiable_certificate_is_told_as_such(https: FaultServer) -> None:
    info = asyncio.run(probe(Target(url=https.url)))
    assert not info.reachable
    text = info.error
    assert "certificate verify failed" in text and "self-signed" in text, text
    assert "--ca-cert" in text and "--insecure" in text and "CA" in text, text
    assert "operation not permitted" not in text


def test_a_hostname_mismatch_is_named(tmp_path: Path) -> None:
    certs = certificates(tmp_path, hostname="other.example", loopback=False)
    server = answering(tls=tls_context(certs))
    try:
        info = asyncio.run(probe(Target(url=server.url, ca_cert=str(certs.ca))))
    finally:
        server.stop()
    text = info.error
    assert not info.reachable and "mismatch" in text and "not valid for '127.0.0.1'" in text, text
    assert "a name the certificate holds" in text and "--ca-cert FILE" not in text, text


def test_ca_cert_and_ssl_cert_file_are_honoured(
    https: FaultServer, certs: Certs, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert asyncio.run(probe(Target(url=https.url, ca_cert=str(certs.ca)))).ok
    monkeypatch.setenv("SSL_CERT_FILE", str(certs.ca))
    assert asyncio.run(probe(Target(url=https.url))).ok


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_every_transport_verifies_with_the_given_ca(https: FaultServer, certs: Certs, transport: str) -> None:
    kind, message = send(Target(url=https.url), transport)
    assert kind is ErrorKind.CONNECT and "certificate verify failed" in message, message
    assert send(Target(url=https.url, ca_cert=str(certs.ca)), transport) == (None, "")
    assert send(Target(url=https.url, insecure=True), transport) == (None, "")


def test_insecure_is_warned_of() -> None:
    (warning,) = connection_warnings(Target(url="https://h:1", insecure=True))
    assert "--insecure" in warning and "not verified" in warning
    assert connection_warnings(Target(url="https://h:1")) == ()


def _ramp(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loadgen.cli", *args],
        capture_output=True,
        text=True,
        timeout=90,
        env=dict(os.environ, OPENAI_API_KEY="", **(env or {})),
    )


def test_headless_runs_over_tls(https: FaultServer, certs: Certs, tmp_path: Path) -> None:
    base = ["run", https.url, "--headless", "--steps", "1", "--step-seconds", "1.5", "--warmup", "0"]
    base += ["--no-metrics"]
    refused = _ramp(*base, "--out", str(tmp_path / "no.jsonl"))
    assert refused.returncode == 3 and "certificate verify failed" in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    out = tmp_path / "insecure.jsonl"
    loud = _ramp(*base, "--insecure", "--out", str(out))
    assert loud.returncode in (0, 1), loud.stderr
    assert "warning" in loud.stderr and "--insecure" in loud.stderr, loud.stderr
    header = json.loads(out.read_text().splitlines()[0])
    assert header["insecure"] is True
    verified = tmp_path / "ca.jsonl"
    ok = _ramp(*base, "--ca-cert", str(certs.ca), "--out", str(verified))
    assert ok.returncode in (0, 1) and "--insecure" not in ok.stderr, ok.stderr
    assert json.loads(verified.read_text().splitlines()[0])["insecure"] is False
    missing = _ramp(*base, "--ca-cert", str(tmp_path / "nope.pem"))
    assert missing.returncode == 2 and "--ca-cert" in missing.stderr, missing.stderr


def test_target_keeps_tls_settings() -> None:
    target = replace(Target(url="https://h:1"), ca_cert="/x.pem", insecure=False)
    assert target.ca_cert == "/x.pem" and not target.insecure
