"""A managed endpoint's rate limits, as its responses state them: the ``x-ratelimit-*`` headers (OpenAI's
names, which Azure OpenAI, Together, Groq and most gateways copy): ``limit``, ``remaining`` and ``reset``,
each for ``requests`` and ``tokens``.

Owns the header names, reading them out of any header mapping (``read_ratelimit``: case-insensitive, the
values kept as the server wrote them: a reset is a duration such as ``6m0s`` or ``20ms``) and the one line
that shows them (``ratelimit_line``). A server that sends none reads as an empty mapping, never zeros.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from loadgen.format import fmt_count

__all__ = [
    "RATELIMIT_HEADERS",
    "RATELIMIT_PREFIX",
    "RateLimits",
    "ratelimit_line",
    "ratelimit_pairs",
    "read_ratelimit",
]

RATELIMIT_PREFIX = "x-ratelimit-"
RATELIMIT_HEADERS: tuple[str, ...] = tuple(
    f"{RATELIMIT_PREFIX}{what}-{unit}"
    for unit in ("requests", "tokens")
    for what in ("limit", "remaining", "reset")
)

RateLimits = Mapping[str, str]  # header suffix ("remaining-requests") -> its value as sent


def read_ratelimit(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The ``x-ratelimit-*`` headers among ``headers`` (name, value pairs), keyed by the name without the
    prefix (``remaining-tokens``); unknown ``x-ratelimit-`` names are kept too (some gateways add their own)."""
    found: dict[str, str] = {}
    for name, value in headers:
        lower = name.lower()
        if lower.startswith(RATELIMIT_PREFIX):
            found[lower[len(RATELIMIT_PREFIX) :]] = value.strip()
    return found


def ratelimit_pairs(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]] | None:
    """The ``x-ratelimit-*`` (name, value) pairs among a response's parsed headers, None when it has none:
    what the load's transports keep of each answer (a few headers per response, never per chunk)."""
    found = [(name, value) for name, value in headers if name[:12].lower() == RATELIMIT_PREFIX]
    return found or None


def _amount(limits: RateLimits, unit: str) -> str | None:
    remaining, limit = limits.get(f"remaining-{unit}"), limits.get(f"limit-{unit}")
    if remaining is None and limit is None:
        return None
    text = f"{_number(remaining)}/{_number(limit)}" if limit is not None else _number(remaining)
    reset = limits.get(f"reset-{unit}")
    return f"{text} {unit}" + (f" (resets in {reset})" if reset else "")


def _number(value: str | None) -> str:
    if value is None:
        return "?"
    return fmt_count(int(value)) if value.isdigit() else value


def ratelimit_line(limits: RateLimits) -> str:
    """``remaining 499/500 requests (resets in 120ms), 29,990/30,000 tokens (resets in 20ms)``, or "" when
    the server sent none."""
    parts = [text for text in (_amount(limits, "requests"), _amount(limits, "tokens")) if text]
    if not parts:
        return ", ".join(f"{RATELIMIT_PREFIX}{k}: {v}" for k, v in sorted(limits.items()))
    return "remaining " + ", ".join(parts)
