"""Records of earlier schemas, read as today's: schema 1 counted steps from 0 (a step line's ``index``, a
mark's ``step``, the end's ``best_step``); schema 2 counts from 1, as the screen and ``steps.csv`` do."""

from __future__ import annotations

from typing import Any

JsonObject = dict[str, Any]

__all__ = ["renumber_from_zero"]


def plus_one(value: object) -> object:  # an int step number, one on; anything else as it was
    return value + 1 if type(value) is int else value


def renumber_from_zero(steps: list[JsonObject], events: list[JsonObject]) -> None:
    """A schema 1 record's step numbers (from 0) as schema 2 writes them (from 1), in place: each step line
    gets its ``step``, a mark its ``step``, the end its ``best_step``, find-max its probes' steps."""
    for line in steps:
        line.setdefault("step", plus_one(line.get("index")))
    for event in events:
        key = {"mark": "step", "end": "best_step", "find_max": "step"}.get(str(event.get("kind")), "")
        if key in event:
            event[key] = plus_one(event[key])
        for probe in event.get("probes") or () if key else ():
            probe["step"] = plus_one(probe.get("step"))
