"""Where a key's time goes, stage by stage: timestamps written to a file when ``RAMP_KEY_TRACE`` names one.

Off by default (no file named: ``stamp`` returns at once). With ``RAMP_KEY_TRACE=/tmp/keys.log`` the console
appends one line per stage, ``<monotonic s> <stage> <detail>``: ``key`` (the event's own time, when the
terminal's bytes were parsed, and the time the app's loop took it), ``send`` (the command given to the
engine), ``arrive`` (the engine's snapshot that shows it, on the engine's thread), ``steered`` (that message
taken by the app's loop), ``shown`` (the panels updated), ``painted`` (after the screen's next compositor
refresh, i.e. the bytes handed to the terminal's writer). ``scripts/bench_keys.py --trace`` reads them.
"""

from __future__ import annotations

import os
import threading
import time
from typing import TextIO

ENV = "RAMP_KEY_TRACE"

_lock = threading.Lock()
_sink: list[TextIO] = []


def enabled() -> bool:
    return bool(os.environ.get(ENV))


def stamp(stage: str, detail: str = "", at: float | None = None) -> None:
    """Append ``stage`` at ``at`` (default now, ``time.monotonic``) to the trace file, if one is named."""
    path = os.environ.get(ENV)
    if not path:
        return
    now = time.monotonic() if at is None else at
    with _lock:
        if not _sink:
            _sink.append(open(path, "a", buffering=1, encoding="utf-8"))  # noqa: SIM115 - kept for the run
        _sink[0].write(f"{now:.6f} {stage} {detail}\n")
