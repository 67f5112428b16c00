"""Pure arithmetic behind the steering keys: the next concurrency level or arrival rate.

Closed loop steps the level by whole virtual users; open loop steps the arrival rate by about 10 % (fine),
by ±10 req/s (coarse) or by x2 / ÷2, rounded to two significant figures so typed-in and stepped values
stay readable. The app turns these into engine commands.
"""

from __future__ import annotations

import math

FINE_LEVEL = 1
COARSE_LEVEL = 10
COARSE_RATE = 10.0
MIN_RATE = 0.1
MAX_LEVEL = 100_000

# name -> (closed-loop level delta or None for a multiplier, multiplier)
STEPS: dict[str, tuple[int | None, float]] = {
    "up": (FINE_LEVEL, 1.0),
    "down": (-FINE_LEVEL, 1.0),
    "up_coarse": (COARSE_LEVEL, 1.0),
    "down_coarse": (-COARSE_LEVEL, 1.0),
    "double": (None, 2.0),
    "half": (None, 0.5),
}


def round_sig(value: float, digits: int = 2) -> float:
    if value <= 0:
        return 0.0
    magnitude = math.floor(math.log10(value))
    return round(value, digits - 1 - magnitude)


def level_delta(step: str) -> int | None:
    """The relative change for ``engine.change_level`` (None: the step is a multiplier)."""
    return STEPS[step][0]


def next_level(level: int, step: str) -> int:
    delta, factor = STEPS[step]
    if delta is not None:
        new = level + delta
    elif factor > 1:
        new = max(1, level * 2)
    else:
        new = level // 2
    return max(0, min(MAX_LEVEL, new))


def next_rate(rate: float, step: str) -> float:
    """The open-loop rate after ``step``; never below ``MIN_RATE`` and never stuck on the same value."""
    if step in ("up", "down"):
        factor = 1.1 if step == "up" else 1 / 1.1
        new = round_sig(rate * factor) if rate > 0 else MIN_RATE
        if new == rate:
            unit = 10 ** (math.floor(math.log10(rate)) - 1)
            new = rate + unit if step == "up" else rate - unit
    elif step == "up_coarse":
        new = rate + COARSE_RATE
    elif step == "down_coarse":
        new = rate - COARSE_RATE
    elif step == "double":
        new = rate * 2
    else:
        new = rate / 2
    return max(MIN_RATE, round(new, 6))


def parse_level(text: str) -> int:
    """A typed concurrency level; raises ValueError with a message fit for the screen."""
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError(f"{text.strip()!r} is not a whole number of concurrent requests") from None
    if not 0 <= value <= MAX_LEVEL:
        raise ValueError(f"level must be between 0 and {MAX_LEVEL}")
    return value


def parse_rate(text: str) -> float:
    """A typed arrival rate in req/s."""
    cleaned = text.strip().removesuffix("req/s").removesuffix("/s").strip()
    try:
        value = float(cleaned)
    except ValueError:
        raise ValueError(f"{text.strip()!r} is not a rate in req/s (e.g. 12.5)") from None
    if not (math.isfinite(value) and value > 0):
        raise ValueError("rate must be a positive number of req/s")
    return value


def parse_range(text: str) -> tuple[float, float]:
    """A typed search range 'LO:HI' ('64' is 1:64); raises ValueError with a message fit for the screen."""
    lo, colon, hi = text.strip().partition(":")
    try:
        bounds = (float(lo), float(hi)) if colon else (1.0, float(lo))
    except ValueError:
        raise ValueError(f"{text.strip()!r} is not a range LO:HI, like 1:64") from None
    if not 0 < bounds[0] < bounds[1] <= MAX_LEVEL:
        raise ValueError(f"the range needs 0 < LO < HI <= {MAX_LEVEL}, like 1:64")
    return bounds


def default_range(find_max: tuple[float, float] | None, levels: tuple[float, ...]) -> tuple[float, float]:
    """The search range a key offers: the run's --find-max, else its plan's lowest to highest level, else
    --find-max's own default (1:512)."""
    if find_max is not None:
        return find_max
    if len(levels) > 1 and min(levels) > 0:
        return min(levels), max(levels)
    return 1.0, 512.0
