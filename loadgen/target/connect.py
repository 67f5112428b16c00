"""How a connection to the target is made, the same way on every path (the load's three transports, the
probe, ``/tokenize``): its TLS settings and the client the off-hot-path calls share.

TLS: an https target is verified against ``--ca-cert FILE`` when given, else ``SSL_CERT_FILE`` /
``SSL_CERT_DIR`` when set, else the system's CA store (with certifi's bundle added when the system has no CA
file). ``--insecure`` turns verification off; it is loud: ``connection_warnings`` (the run's warnings: the
console, stderr and the record's events) and ``insecure: true`` in the record's header.

httpx is imported on first use (see ``loadgen.target.http``).
"""

from __future__ import annotations

import functools
import os
import ssl
from typing import TYPE_CHECKING

from loadgen.target.http import target_headers
from loadgen.types import Target

if TYPE_CHECKING:
    import httpx

__all__ = ["ca_source", "connection_warnings", "httpx_client", "is_https", "tls_context", "tls_hint"]

TLS_HINT = "pass --ca-cert FILE (or set SSL_CERT_FILE) holding the CA that signed it, or --insecure to skip verification"


def is_https(target: Target) -> bool:
    return target.url.strip().lower().startswith("https://")


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
    if target.insecure and is_https(target):
        return (
            "--insecure: the server's TLS certificate is not verified; anyone on the path could read or "
            "answer these requests (drop --insecure and pass --ca-cert FILE instead)",
        )
    return ()


def httpx_client(target: Target, timeout: httpx.Timeout) -> httpx.AsyncClient:
    """A client for a few calls to the target off the hot path: its headers and TLS settings."""
    import httpx

    return httpx.AsyncClient(
        timeout=timeout,
        headers=target_headers(target),
        verify=tls_context(target),
        trust_env=False,
    )
