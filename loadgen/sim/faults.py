"""Which failures the simulator injects into one request: drawn from ``FaultConfig``'s rates, or named by the
request's ``x-sim-fault`` header (``stall=2.5,disconnect=3``), which overrides the draw.
"""

from __future__ import annotations

import random

from .config import FAULT_KINDS, FaultConfig


class FaultDraw:
    """Draws each request's faults from its own seeded generator (so faults never shift other draws)."""

    def __init__(self, config: FaultConfig, seed: int) -> None:
        self.config = config
        self.rng = random.Random(seed)

    def draw(self, header: str | None) -> dict[str, float]:
        """Fault kind -> its parameter (0.0: the config's value) for one request."""
        if header is not None:
            return parse_fault_header(header)
        f = self.config
        if not any(
            (
                f.error_rate,
                f.rate_429,
                f.stall_rate,
                f.disconnect_rate,
                f.slow_ttft_rate,
                f.malformed_rate,
                f.empty_rate,
            )
        ):
            return {}
        rnd = self.rng.random
        out: dict[str, float] = {}
        if rnd() < f.error_rate:
            return {"error": 0.0}
        if rnd() < f.rate_429:
            return {"429": 0.0}
        if rnd() < f.empty_rate:
            out["empty"] = 0.0
        if rnd() < f.slow_ttft_rate:
            out["slow_ttft"] = f.slow_ttft_s
        if rnd() < f.stall_rate:
            out["stall"] = f.stall_s
        if rnd() < f.disconnect_rate:
            out["disconnect"] = f.disconnect_after_tokens
        if rnd() < f.malformed_rate:
            out["malformed"] = f.malformed_after_tokens
        return out


def parse_fault_header(header: str) -> dict[str, float]:
    """``stall=2.5,disconnect=3`` -> {"stall": 2.5, "disconnect": 3.0}; a bare kind takes the config's value."""
    out: dict[str, float] = {}
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        name = name.strip().lower().replace("-", "_")
        if name in ("", "none"):
            continue
        if name == "500":
            name = "error"
        if name in FAULT_KINDS:
            try:
                out[name] = float(value) if value else 0.0
            except ValueError:
                out[name] = 0.0
    return out
