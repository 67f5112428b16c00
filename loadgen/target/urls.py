"""What a target URL, a CA bundle and a proxy given on a command line must be, checked before anything
connects, for every face that takes them (``ramp run``'s flags in ``loadgen.cli``, ``ramp check``): each
problem is one line that names the flag and says what to write instead, and never repeats a URL's
credentials (``loadgen.target.http.scrub``).

Owns ``check_url`` (http or https in any case, a host, a port within 1-65535; returns the URL with its
scheme in lower case), ``check_urls`` (several replicas as one target), ``ca_problem`` (``--ca-cert``) and
``proxy_problem`` (``--proxy``). How a connection is then made with them is ``loadgen.target.connect``'s.
"""

from __future__ import annotations

import os
import re
import ssl
from collections.abc import Sequence
from urllib.parse import urlsplit, urlunsplit

from loadgen.target.http import scrub
from loadgen.types import server_root

__all__ = ["ca_problem", "check_url", "check_urls", "proxy_problem"]


def check_url(url: str) -> tuple[str, str | None]:
    """(the URL with a lower-case scheme, what is wrong with it or None)."""
    text = url.strip()
    parts = urlsplit(text)
    shown = scrub(text)
    if parts.scheme.lower() not in ("http", "https") or "://" not in text:
        return text, f"URL must start with http:// or https:// — got {shown!r}"
    if not parts.hostname:
        return text, f"URL {shown!r} names no host: use http://HOST:PORT"
    try:
        port = parts.port
    except ValueError:  # "Port out of range 0-65535", or not a number
        port = -1
    if port is not None and not 1 <= port <= 65535:
        given = parts.netloc.rsplit(":", 1)[-1]
        return text, f"URL {shown!r}: port {given} is not a TCP port (1-65535)"
    return urlunsplit(parts._replace(scheme=parts.scheme.lower())), None


# A comma starts another replica only before a URL's scheme: a comma inside a query string stays.
_NEXT_URL = re.compile(r",\s*(?=[a-z][a-z0-9+.-]*://)", re.IGNORECASE)


def check_urls(url: str, more: Sequence[str] = ()) -> tuple[tuple[str, ...], str | None]:
    """Several replicas as one target: the URL given (``A,B`` for several) and each ``--url``, checked
    (``check_url``) and in order; (the URLs, what is wrong or None). One URL: exactly ``check_url``'s."""
    given = [u for text in (url, *more) for u in _NEXT_URL.split(text.strip()) if u.strip()]
    if not given:
        return (), (
            "no target URL: ramp run URL, or set OPENAI_BASE_URL (several replicas: ramp run --url A --url B, "
            "or A,B)"
        )
    urls = []
    for text in given:
        checked, problem = check_url(text)
        if problem is not None:
            return (), problem
        urls.append(checked)
    seen = {server_root(u) for u in urls}
    if len(seen) < len(urls):
        twice = next(u for at, u in enumerate(urls) if server_root(u) in map(server_root, urls[:at]))
        return (), f"replica {scrub(twice)!r} is given twice: give each replica once"
    return tuple(urls), None


def ca_problem(path: str, insecure: bool) -> str | None:
    """A ``--ca-cert`` that cannot be used: missing, not PEM certificates, or contradicted by --insecure."""
    if insecure:
        return "--insecure skips verification and --ca-cert verifies: give one of them"
    if not os.path.isfile(path):
        return f"--ca-cert {path!r}: no such file (a PEM bundle of the CA certificates to trust)"
    try:
        ssl.create_default_context(cafile=path)
    except (ssl.SSLError, OSError, ValueError):
        return f"--ca-cert {path!r} holds no certificate that loads: give a PEM bundle of CA certificates"
    return None


def proxy_problem(url: str, no_proxy: bool) -> str | None:
    """A ``--proxy`` that cannot be used: not http://HOST:PORT, or contradicted by --no-proxy."""
    if no_proxy:
        return "--proxy sends every call through a proxy and --no-proxy through none: give one of them"
    parts = urlsplit(url.strip())
    try:
        port = parts.port
    except ValueError:
        port = -1
    if parts.scheme.lower() != "http" or not parts.hostname or (port is not None and not 1 <= port <= 65535):
        return f"--proxy {scrub(url)!r}: give an HTTP proxy as http://HOST:PORT (https targets are tunnelled)"
    return None
