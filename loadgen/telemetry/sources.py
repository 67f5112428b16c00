"""The ``Source`` interface and the HTTP sources that scrape Prometheus ``/metrics`` endpoints.

A source does one thing: ``poll()`` returns a ``Reading`` or raises. It keeps no history and never
retries by itself; the hub owns timers, backoff and the time series. Failures are turned into one
line that names the URL (connection refused, timeout, HTTP status, not Prometheus text...).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from loadgen.runtimes import METRIC_RUNTIMES, Runtime, RuntimeName, lookup
from loadgen.target.bounded import METRICS_BYTES, ReplyTooLarge, ReplyTooSlow, read_capped
from loadgen.target.connect import route
from loadgen.target.http import auth_headers, describe_error, server_root
from loadgen.telemetry.exposition import detect_runtime, has_dcgm, parse_samples, reading_from_samples
from loadgen.telemetry.nvidia_smi import CommandGPUSource
from loadgen.telemetry.nvml import NVMLSource
from loadgen.telemetry.reading import Reading, SourceError, SourceKind
from loadgen.types import Target

if TYPE_CHECKING:  # httpx imports its CLI (rich, click) when imported: only on first use here
    import httpx

DEFAULT_TIMEOUT_S = 5.0  # a busy server can take seconds to render /metrics; polls are spaced politely
_ANY_PREFIX = "/".join(r.metrics.prefix for r in METRIC_RUNTIMES if r.metrics is not None)


@runtime_checkable
class Source(Protocol):
    name: str
    interval_s: float
    kind: SourceKind  # which panels it may feed
    timeout_s: float  # its own limit on one poll; the hub gives up on a poll a few seconds after it
    last_fetch_s: float | None  # how long the server took to answer the last poll (None: not a server)

    async def poll(self) -> Reading: ...

    async def aclose(self) -> None: ...


class PrometheusSource:
    """Scrapes one ``/metrics`` URL; reads a runtime's server metrics and/or DCGM GPU metrics.

    ``runtime``: a runtime's name (``loadgen.runtimes``) to read only its names, ``None`` to detect the
    prefix on the first good scrape (and again if it later disappears). ``server``/``gpus`` choose which
    parts to keep.
    """

    kind: SourceKind = "mixed"

    def __init__(
        self,
        url: str,
        *,
        name: str = "metrics",
        runtime: RuntimeName | None = None,
        server: bool = True,
        gpus: bool = True,
        interval_s: float = 1.0,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        headers: dict[str, str] | None = None,
        target: Target | None = None,  # the load's target: its proxy and TLS settings apply here too
    ) -> None:
        self.target = target
        self.name = name
        self.url = url
        self.runtime = runtime
        self.server = server
        self.gpus = gpus
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self._headers = headers or {}
        self._client: httpx.AsyncClient | None = None
        self._detected: Runtime | None = None
        self.last_fetch_s: float | None = None
        self.last_mid_ns: int | None = None

    def _http(self) -> httpx.AsyncClient:
        import httpx

        if self._client is None:
            proxy, verify = route(self.url, self.target)  # the one proxy rule of loadgen.target.connect
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout_s),
                limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
                headers=self._headers,
                follow_redirects=True,
                proxy=proxy,
                verify=verify,
                trust_env=False,
            )
        return self._client

    async def fetch(self) -> str:
        import httpx

        try:
            started = time.monotonic()
            started_ns = time.monotonic_ns()
            # Bounded (an endless or 50 MB page would hold the main process): dropped with a notice instead.
            response = await read_capped(
                self._http(), "GET", self.url, max_bytes=METRICS_BYTES, total_s=self.timeout_s
            )
            # How long the server took to answer: the hub spaces polls by it (see POLITE_FACTOR).
            self.last_fetch_s = time.monotonic() - started
            # The page shows the server's state at some moment of the exchange: take the middle, so a slow
            # answer (a busy server) does not shift the sample's time by its whole duration.
            self.last_mid_ns = (started_ns + time.monotonic_ns()) // 2
            if response.status_code >= 400:
                raise SourceError(f"HTTP {response.status_code} from {self.url}")
            return response.text
        except (ReplyTooLarge, ReplyTooSlow) as exc:
            raise SourceError(f"{exc} (telemetry dropped)") from None
        except (httpx.HTTPError, OSError) as exc:
            raise SourceError(describe_error(exc, self.url, self.timeout_s)) from None

    async def poll(self) -> Reading:
        text = await self.fetch()
        t_ns = self.last_mid_ns or time.monotonic_ns()
        # Parsing a 50 KB vLLM page takes ~10 ms of Python: keep it off the controller's loop.
        samples = await asyncio.to_thread(parse_samples, text, self.url)
        runtime = self.runtime
        if self.server and runtime is None:
            detected = self._detected
            prefix = (
                detected.metrics.prefix if detected is not None and detected.metrics is not None else None
            )
            if prefix is None or not any(s.name.startswith(prefix) for s in samples):
                self._detected = lookup(detect_runtime(samples))
            runtime = self._detected.name if self._detected is not None else None
        reading = reading_from_samples(samples, t_ns, runtime=runtime, server=self.server, gpus=self.gpus)
        if not reading.has_server and reading.gpus is None:
            wanted = []
            if self.server:
                wanted.append(f"{runtime}:" if runtime else _ANY_PREFIX)
            if self.gpus:
                wanted.append("DCGM_FI_")
            raise SourceError(f"no {' or '.join(wanted)} metrics at {self.url}")
        return reading

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()


class PrometheusAutoSource(PrometheusSource):
    """The server's own ``/metrics``: detects vLLM or SGLang, and also reads DCGM names found there
    (the simulator publishes both, so one scrape feeds the server and the GPU panels)."""

    def __init__(
        self,
        base_url: str,
        *,
        name: str = "metrics",
        interval_s: float = 1.0,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        headers: dict[str, str] | None = None,
        target: Target | None = None,
    ) -> None:
        super().__init__(
            server_root(base_url) + "/metrics",
            name=name,
            interval_s=interval_s,
            timeout_s=timeout_s,
            headers=headers,
            target=target,
        )


class RuntimeMetricsSource(PrometheusSource):
    """A server's ``/metrics`` read as ``runtime``'s names only (no detection, no GPU names)."""

    kind: SourceKind = "server"

    def __init__(
        self,
        base_url: str,
        runtime: Runtime,
        *,
        name: str | None = None,
        interval_s: float = 1.0,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(
            server_root(base_url) + "/metrics",
            name=name or runtime.name,
            runtime=runtime.name,
            gpus=False,
            interval_s=interval_s,
            timeout_s=timeout_s,
            headers=headers,
        )


class DCGMSource(PrometheusSource):
    """A dcgm-exporter endpoint (``http://host:9400/metrics``; ``/metrics`` is added if no path)."""

    kind: SourceKind = "gpu"

    def __init__(
        self,
        url: str,
        *,
        name: str = "dcgm",
        interval_s: float = 1.0,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        headers: dict[str, str] | None = None,
    ) -> None:
        url = url.strip().rstrip("/")
        if "://" not in url:
            url = "http://" + url
        if url.count("/") < 3:
            url += "/metrics"
        super().__init__(
            url,
            name=name,
            server=False,
            gpus=True,
            interval_s=interval_s,
            timeout_s=timeout_s,
            headers=headers,
        )


def build_sources(
    base_url: str | None,
    *,
    metrics: bool = True,
    gpu_cmd: str | None = None,
    nvml: bool = False,
    dcgm_url: str | None = None,
    api_key_env: str | None = None,
    target: Target | None = None,
) -> list[Source]:
    """The sources the CLI flags ask for, in the order the hub prefers them.

    The server's ``/metrics`` (auto-detected runtime, plus DCGM names if present) comes first; dedicated
    GPU sources (DCGM exporter, NVML, the command) are preferred over it for the GPU panel. The server is
    asked with the key held by the environment variable ``api_key_env`` (never stored here).
    """
    sources: list[Source] = []
    headers = auth_headers(api_key_env) or None
    if base_url and metrics:
        sources.append(PrometheusAutoSource(base_url, headers=headers, target=target))
    if dcgm_url:
        sources.append(DCGMSource(dcgm_url))
    if nvml:
        sources.append(NVMLSource())
    if gpu_cmd:
        sources.append(CommandGPUSource(gpu_cmd))
    return sources


__all__ = [
    "DCGMSource",
    "PrometheusAutoSource",
    "PrometheusSource",
    "RuntimeMetricsSource",
    "Source",
    "build_sources",
    "has_dcgm",
]
