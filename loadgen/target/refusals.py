"""When the server says "not now": which answers are refusals, what their ``Retry-After`` asks for, and the
words the faces use for them.

A refusal is an answer about the server's state rather than about one request: HTTP 429 (rate limited),
any 5xx (overloaded, failing, restarting) and 401/403 (the key is missing or rejected: every request will
get the same). A refused virtual user backs off before its next request (``loadgen.run.loops``); a 400 or a
404 is about the request itself and earns no pause. Every refused request is still counted as an error of
its kind (``http_429`` or ``http_status``); the pause itself is counted nowhere but in the live
``Snapshot.backing_off`` gauge.
"""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Mapping

__all__ = ["REFUSAL_KINDS", "is_refusal", "refusal_text", "retry_after_s"]

REFUSAL_KINDS = ("http_429", "http_status")  # the error kinds a refusal is counted under
_AUTH = (401, 403)
_STATUS_TEXT = re.compile(r"^HTTP (\d{3})\b")
QUOTE_CHARS = 80


def is_refusal(status: int | None) -> bool:
    """HTTP 429, any 5xx, 401 and 403: the server refuses load (or this client) as a whole."""
    if status is None:
        return False
    return status == 429 or 500 <= status <= 599 or status in _AUTH


def retry_after_s(value: str | None, now_s: float | None = None) -> float | None:
    """Seconds a ``Retry-After`` header value asks to wait (delta-seconds or an HTTP date; never negative),
    ``None`` when absent or unreadable."""
    if not value:
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now_s is None else now_s))


def refusal_text(latest_errors: Mapping[str, str]) -> str | None:
    """``refusing: "HTTP 429: slow down"`` from the latest message of each error kind, when one of them is a
    refusal (its message starts with the refused status), else ``None``."""
    for kind in REFUSAL_KINDS:
        message = latest_errors.get(kind)
        if not message:
            continue
        found = _STATUS_TEXT.match(message)
        if kind == "http_429" or (found is not None and is_refusal(int(found.group(1)))):
            quoted = message if len(message) <= QUOTE_CHARS else message[: QUOTE_CHARS - 1] + "…"
            return f'refusing: "{quoted}"'
    return None
