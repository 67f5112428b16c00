"""How a connection to the target is made, the same way on every path (the load's three transports, the
probe, ``/tokenize``, the ``/metrics`` poller and runtime discovery): its proxy, its TLS settings and the
client the off-hot-path calls share.

Proxies, one rule (``proxy_for``): ``--proxy URL`` sends every call through that proxy; ``--no-proxy`` sends
every call direct; otherwise the standard environment is honoured, as curl does — ``HTTPS_PROXY`` /
``HTTP_PROXY`` / ``ALL_PROXY`` (either case) for a target ``NO_PROXY`` does not exempt — except that a
loopback target (``localhost``, 127.0.0.0/8, ``::1``) is never proxied unless ``--proxy`` says so. Load
that goes through a proxy is warned of (its latencies include the proxy) and the record's header names it.

TLS: an https target is verified against ``--ca-cert FILE`` when given, else ``SSL_CERT_FILE`` /
``SSL_CERT_DIR`` when set, else the system's CA store (with certifi's bundle added when the system has no CA
file). ``--insecure`` turns verification off; it is loud: ``connection_warnings`` (the run's warnings: the
console, stderr and the record's events) and ``insecure: true`` in the record's header.

httpx is imported on first use (see ``loadgen.target.http``).
"""

from __future__ import annotations

import functools
import ipaddress
import os
import ssl
import urllib.request
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from loadgen.target.http import scrub, target_headers
from loadgen.types import Target

if TYPE_CHECKING:
    import httpx

__all__ = [
    "ca_source",
    "connection_warnings",
    "httpx_client",
    "is_https",
    "is_loopback",
    "proxy_for",
    "proxy_for_url",
    "route",
    "tls_context",
    "tls_hint",
]

TLS_HINT = "pass --ca-cert FILE (or set SSL_CERT_FILE) holding the CA that signed it, or --insecure to skip verification"


def is_https(target: Target) -> bool:
    return target.url.strip().lower().startswith("https://")


def is_loopback(host: str | None) -> bool:
    """``localhost``, 127.0.0.0/8 and ``::1``: this host, never worth a proxy."""
    if not host:
        return False
    if host.lower().rstrip(".") in ("localhost", "localhost.localdomain") or host.lower().endswith(
        ".localhost"
    ):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def proxy_for_url(url: str, setting: str | None) -> str | None:
    """The proxy a call to ``url`` goes through (None: direct), by the module's rule; ``setting`` is
    ``Target.proxy`` (None: the environment's, "": none, else that proxy)."""
    if setting is not None:
        return setting or None
    parts = urlsplit(url.strip())
    host = parts.hostname
    if is_loopback(host):
        return None
    proxies = urllib.request.getproxies_environment()  # HTTP_PROXY and http_proxy alike; NO_PROXY below
    if host and _exempt(host, parts.port, proxies.get("no", "")):
        return None
    return proxies.get(parts.scheme.lower()) or proxies.get("all") or None


def _exempt(host: str, port: int | None, no_proxy: str) -> bool:
    """``NO_PROXY`` as curl reads it: ``*``, or names (``corp``, ``.corp``: the name and its subdomains),
    each with an optional ``:port``."""
    host = host.lower().rstrip(".")
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        if entry == "*":
            return True
        name, _, entry_port = entry.rpartition(":") if entry.count(":") == 1 else (entry, "", "")
        if entry_port and entry_port != str(port):
            continue
        name = name.lstrip(".").rstrip(".")
        if name and (host == name or host.endswith("." + name)):
            return True
    return False


def proxy_for(target: Target) -> str | None:
    """The proxy every call to ``target`` goes through, or None (direct): see the module's rule."""
    return proxy_for_url(target.url, target.proxy)


def proxy_source(target: Target) -> str:
    """Where the proxy setting came from, in words."""
    if target.proxy:
        return "--proxy"
    scheme = urlsplit(target.url.strip()).scheme.lower()
    for name in (f"{scheme}_proxy", "all_proxy"):
        for spelled in (name.upper(), name):
            if os.environ.get(spelled):
                return spelled
    return "the environment"


def tls_context(target: Target) -> ssl.SSLContext:
    """The TLS context every connection to ``target`` uses (one per setting, shared within a process)."""
    return _context(
        target.ca_cert, target.insecure, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
    )


@functools.lru_cache(maxsize=8)
def _context(
    ca_cert: str | None, insecure: bool, env_file: str | None, env_dir: str | None
) -> ssl.SSLContext:
    if insecure:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    if ca_cert:
        return ssl.create_default_context(cafile=ca_cert)
    ctx = ssl.create_default_context()  # OpenSSL reads SSL_CERT_FILE / SSL_CERT_DIR here
    if not (env_file or env_dir) and ssl.get_default_verify_paths().cafile is None:
        try:
            import certifi

            ctx.load_verify_locations(certifi.where())
        except (ImportError, OSError, ssl.SSLError):
            pass
    return ctx


def ca_source(target: Target) -> str:
    """What an https target's certificate is checked against, in words."""
    if target.ca_cert:
        return f"--ca-cert {target.ca_cert}"
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR"):
        if os.environ.get(name):
            return f"{name}={os.environ[name]}"
    paths = ssl.get_default_verify_paths()
    return f"the system CA store ({paths.cafile or paths.capath or 'none found'})"


def tls_hint(target: Target, why: str = "") -> str:
    """What to do about a certificate that could not be verified (``why``: ``loadgen.target.http.reason``'s
    words): a name it does not hold, or a CA it was checked against (named) that did not sign it."""
    if "mismatch" in why:
        return "connect by a name the certificate holds (its subject alternative names), or --insecure"
    return f"checked against {ca_source(target)}: {TLS_HINT}"


def connection_warnings(target: Target) -> tuple[str, ...]:
    """What the operator must know about how the target is reached (shown before the load starts)."""
    found: list[str] = []
    if target.insecure and is_https(target):
        found.append(
            "--insecure: the server's TLS certificate is not verified; anyone on the path could read or "
            "answer these requests (drop --insecure and pass --ca-cert FILE instead)"
        )
    proxy = proxy_for(target)
    if proxy is not None:
        found.append(
            f"the load goes through the proxy {scrub(proxy)} (from {proxy_source(target)}): its latencies "
            "include the proxy's; --no-proxy sends it direct"
        )
    return tuple(found)


def route(url: str, target: Target | None = None) -> tuple[str | None, ssl.SSLContext | bool]:
    """(proxy, verify) for an httpx client that calls ``url`` (pass ``trust_env=False`` with them): the
    module's proxy rule, with ``target``'s --proxy/--no-proxy and TLS settings when it is given (its
    ``/metrics``, discovery), the environment's rule and default verification otherwise (a DCGM exporter)."""
    if target is None:
        return proxy_for_url(url, None), True
    return proxy_for_url(url, target.proxy), tls_context(target)


def httpx_client(target: Target, timeout: httpx.Timeout) -> httpx.AsyncClient:
    """A client for a few calls to the target off the hot path: its headers and TLS settings."""
    import httpx

    return httpx.AsyncClient(
        timeout=timeout,
        headers=target_headers(target),
        verify=tls_context(target),
        proxy=proxy_for(target),
        trust_env=False,  # the proxy is chosen above, by the one rule; SSL_CERT_FILE is read by tls_context
    )
