"""One proxy rule for every call to the target (the load's three transports, the probe, /tokenize, the
/metrics poller, discovery): --proxy URL sends all through it, --no-proxy none; otherwise the environment's
HTTP(S)_PROXY / NO_PROXY, except that loopback is never proxied. Used to be: the load and the probe ignored
the environment while /tokenize, /metrics and discovery honoured it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fault_servers import CountingProxy, FaultServer, answering, certificates, tls_context

from loadgen.client import Client
from loadgen.config import TRANSPORTS
from loadgen.target.connect import connection_warnings, proxy_for, proxy_for_url
from loadgen.target.probe import probe
from loadgen.target.tokenize import tokenize_count
from loadgen.telemetry import discover
from loadgen.telemetry.sources import PrometheusAutoSource
from loadgen.types import ErrorKind, RequestSpec, Target

SPEC = RequestSpec(api="chat", model="tiny", max_tokens=4, messages=(("user", "hi"),))
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy")


@pytest.fixture(autouse=True)
def no_env_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def server() -> Iterator[FaultServer]:
    srv = answering()
    yield srv
    srv.stop()


@pytest.fixture()
def proxy() -> Iterator[CountingProxy]:
    p = CountingProxy().start()
    yield p
    p.stop()


def test_the_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.site:3128")
    monkeypatch.setenv("https_proxy", "http://tls-proxy.site:3128")
    monkeypatch.setenv("NO_PROXY", "internal.site,.corp")
    assert proxy_for(Target(url="http://gpu1.example:8000")) == "http://proxy.site:3128"
    assert proxy_for(Target(url="https://gpu1.example")) == "http://tls-proxy.site:3128"
    for direct in ("http://127.0.0.1:8000", "http://localhost:8000", "http://[::1]:8000", "http://127.3.2.1"):
        assert proxy_for(Target(url=direct)) is None, direct
    assert proxy_for(Target(url="http://internal.site:8000")) is None
    assert proxy_for(Target(url="http://gpu.corp:8000")) is None
    assert proxy_for(Target(url="http://gpu1.example:8000", proxy="")) is None  # --no-proxy
    assert proxy_for(Target(url="http://127.0.0.1:8000", proxy="http://p:1")) == "http://p:1"  # --proxy
    assert proxy_for_url("http://dcgm.example:9400/metrics", None) == "http://proxy.site:3128"
    (warning,) = connection_warnings(Target(url="http://gpu1.example:8000"))
    assert "proxy.site:3128" in warning and "HTTP_PROXY" in warning and "--no-proxy" in warning
    assert connection_warnings(Target(url="http://127.0.0.1:8000")) == ()


def send(target: Target, transport: str) -> ErrorKind | None:
    async def main() -> ErrorKind | None:
        client = Client(target, max_connections=2, transport=transport)  # type: ignore[arg-type]
        try:
            result = await asyncio.wait_for(client.send(SPEC, time.monotonic_ns()), 10)
        finally:
            await client.aclose()
        return result.error_kind

    return asyncio.run(main())


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_the_load_goes_through_the_given_proxy(
    server: FaultServer, proxy: CountingProxy, transport: str
) -> None:
    assert send(Target(url=server.url, proxy=proxy.url), transport) is None
    assert proxy.lines and f"127.0.0.1:{server.port}/v1/chat/completions" in proxy.lines[0], proxy.lines


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_https_is_tunnelled(proxy: CountingProxy, transport: str, tmp_path: Path) -> None:
    certs = certificates(tmp_path)
    tls = answering(tls=tls_context(certs))
    try:
        assert send(Target(url=tls.url, proxy=proxy.url, ca_cert=str(certs.ca)), transport) is None
    finally:
        tls.stop()
    assert proxy.lines == [f"CONNECT 127.0.0.1:{tls.port} HTTP/1.1"], proxy.lines


def test_every_path_off_the_hot_path_follows_the_rule(server: FaultServer, proxy: CountingProxy) -> None:
    target = Target(url=server.url, proxy=proxy.url)
    assert asyncio.run(probe(target)).ok
    asyncio.run(tokenize_count(target, "tiny", "hello"))
    asyncio.run(discover(server.url, target=target))

    async def scrape() -> None:
        source = PrometheusAutoSource(server.url, target=target)
        try:
            await source.fetch()
        except Exception:
            pass  # no /metrics here: the call is what counts
        await source.aclose()

    asyncio.run(scrape())
    paths = {line.split()[1].split(str(server.port), 1)[1] for line in proxy.lines}
    assert {"/v1/models", "/tokenize", "/metrics"} <= paths, proxy.lines


def test_loopback_is_direct_whatever_the_environment_says(
    server: FaultServer, proxy: CountingProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    target = Target(url=server.url)
    assert asyncio.run(probe(target)).ok
    asyncio.run(tokenize_count(target, "tiny", "hello"))
    asyncio.run(discover(server.url, target=target))
    for transport in TRANSPORTS:
        assert send(target, transport) is None
    assert proxy.lines == []


def _ramp(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in PROXY_VARS}
    return subprocess.run(
        [sys.executable, "-m", "loadgen.cli", *args],
        capture_output=True,
        text=True,
        timeout=90,
        env={**clean, "OPENAI_API_KEY": "", **env},
    )


def test_a_proxied_run_says_so_and_records_it(
    server: FaultServer, proxy: CountingProxy, tmp_path: Path
) -> None:
    out = tmp_path / "run.jsonl"
    args = ["run", server.url, "--headless", "--steps", "1", "--step-seconds", "1.5", "--warmup", "0"]
    proc = _ramp(*args, "--no-metrics", "--proxy", proxy.url, "--out", str(out), env={})
    assert proc.returncode in (0, 1), proc.stderr
    assert "warning" in proc.stderr and "through the proxy" in proc.stderr, proc.stderr
    assert json.loads(out.read_text().splitlines()[0])["proxy"] == proxy.url
    assert any("/v1/chat/completions" in line for line in proxy.lines)
    both = _ramp(*args, "--proxy", proxy.url, "--no-proxy", env={})
    assert both.returncode == 2 and "--no-proxy" in both.stderr
    bad = _ramp(*args, "--proxy", "socks5://p:1", env={})
    assert bad.returncode == 2 and "http://HOST:PORT" in bad.stderr
