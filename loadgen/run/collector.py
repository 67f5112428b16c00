"""Where ``--otel``'s spans go and whether anything listens there, without importing OpenTelemetry.

``traces_endpoint`` reads the URL the SDK's OTLP/HTTP exporter will post to, by the exporter's own rules
(``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` as given, else ``OTEL_EXPORTER_OTLP_ENDPOINT`` + ``/v1/traces``,
else ``http://localhost:4318/v1/traces``). ``unreachable`` tries one TCP connection to it (bounded, a
fraction of a millisecond on a local port): the run says once, at its start, that its spans will be lost
(``collector_warning``), and a worker's exit does not wait seconds for an export that cannot land
(``loadgen.run.otel``). Behind an HTTP proxy the exporter's route is not ours to test: no warning then.
"""

from __future__ import annotations

import os
import socket
import urllib.request
from urllib.parse import urlsplit

DEFAULT_ENDPOINT = "http://localhost:4318/v1/traces"
PROBE_TIMEOUT_S = 1.0
REFUSED, NO_HOST = "connection refused", "host not found"  # nothing there for sure (a timeout may be slow)


def traces_endpoint() -> str:
    """The URL the OTLP/HTTP span exporter posts to, read from the environment as the SDK reads it."""
    given = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if given:
        return given
    base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    if base:
        return base.rstrip("/") + "/v1/traces"
    return DEFAULT_ENDPOINT


def unreachable(endpoint: str, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """Why nothing can take spans at ``endpoint`` (refused, no such host, no answer in time), else None:
    something listens, or the route goes through a proxy (not tried)."""
    parts = urlsplit(endpoint)
    host = parts.hostname
    if not host:
        return "not a URL"
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return "not a valid port"
    if parts.scheme in urllib.request.getproxies() and not urllib.request.proxy_bypass(host):
        return None
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except ConnectionRefusedError:
        return REFUSED
    except socket.gaierror:
        return NO_HOST
    except TimeoutError:
        return f"no answer within {timeout_s:g} s"
    except OSError as exc:
        return exc.strerror or type(exc).__name__


def collector_warning() -> str | None:
    """The run's one line when ``--otel``'s collector cannot be reached at the start, else None."""
    endpoint = traces_endpoint()
    why = unreachable(endpoint)
    if why is None:
        return None
    return (
        f"--otel: no OTLP collector at {shown(endpoint)} ({why}): the requests' spans will be lost "
        "(set OTEL_EXPORTER_OTLP_ENDPOINT)"
    )


def shown(endpoint: str) -> str:
    """``endpoint`` without credentials, query or fragment (they may hold a token)."""
    parts = urlsplit(endpoint)
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ""
    return f"{parts.scheme}://{parts.hostname}{port}{parts.path}" if parts.hostname else "its endpoint"
