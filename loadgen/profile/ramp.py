"""The ``[ramp]`` table → ``RampPlan``: explicit levels or a geometric/linear series, in the mode the
profile names (``closed``: levels are concurrencies; ``open``: arrival rates in req/s).

The mode is read here and carried by the plan, so whatever runs the plan runs it in the profile's mode.
"""

from __future__ import annotations

import math

from loadgen.config import Mode, RampPlan
from loadgen.profile.fields import FieldReader, Where, is_number, show_value
from loadgen.profile.model import MAX_RAMP_LEVELS, RAMP_MODES

RAMP_KEYS = (
    "mode",
    "levels",
    "start",
    "stop",
    "factor",
    "step",
    "step_seconds",
    "warmup_seconds",
    "early_stop",
    "precision",
)


def read_ramp(reader: FieldReader, t: dict[str, object] | None) -> RampPlan | None:
    if t is None:
        return None
    w = Where("ramp", None, "[ramp]")
    reader.check_keys(w, t, RAMP_KEYS)
    mode: Mode = reader.choice(w, t, "mode", "closed", RAMP_MODES)
    closed = mode == "closed"
    step_s = reader.number(w, t, "step_seconds", 30.0, exclusive=True)
    warmup_s = reader.number(w, t, "warmup_seconds", 5.0)
    assert step_s is not None and warmup_s is not None
    if warmup_s >= step_s:
        reader.fail(
            w,
            "warmup_seconds",
            f"warm-up ({warmup_s:g} s) must be shorter than step_seconds ({step_s:g} s)",
        )
    early_stop = reader.boolean(w, t, "early_stop", False)
    # --precision PCT as a key: a step ends once its figures' 95 % intervals are within PCT % (0 < PCT < 100)
    raw = t.get("precision")
    precision = float(raw) if isinstance(raw, (int, float)) and not isinstance(raw, bool) else None
    if raw is not None and (precision is None or not 0 < precision < 100):  # NaN and inf fail too
        reader.fail(w, "precision", f"expected a percentage > 0 and < 100, got {show_value(raw)}")
    unit = "concurrency (a positive integer)" if closed else "rate in req/s (a number > 0)"
    geometric_keys = [k for k in ("start", "stop", "factor", "step") if k in t]
    if "levels" in t:
        if geometric_keys:
            reader.fail(w, geometric_keys[0], "give either 'levels' or start/stop/factor/step, not both")
        levels = _explicit_levels(reader, w, t["levels"], mode, unit)
    elif geometric_keys:
        levels = _ramp_series(reader, w, t, closed, unit)
    else:
        reader.fail(w, None, "give 'levels = [1, 2, 4, 8]' or start/stop with factor and/or step")
    return RampPlan(
        levels=levels,
        step_s=float(step_s),
        warmup_s=float(warmup_s),
        early_stop=bool(early_stop),
        mode=mode,
        precision_pct=precision,
    )


def _explicit_levels(reader: FieldReader, w: Where, raw: object, mode: Mode, unit: str) -> tuple[float, ...]:
    closed = mode == "closed"
    if not isinstance(raw, list) or not raw:
        reader.fail(w, "levels", f"expected a non-empty list of levels, each a {unit}, got {show_value(raw)}")
    for v in raw:
        bad = not is_number(v) or v <= 0 or (closed and not isinstance(v, int))
        if bad:
            reader.fail(w, "levels", f'each level must be a {unit} in mode = "{mode}", got {show_value(v)}')
    return tuple(int(v) if closed else float(v) for v in raw)


def _ramp_series(
    reader: FieldReader, w: Where, t: dict[str, object], closed: bool, unit: str
) -> tuple[float, ...]:
    for key in ("start", "stop"):
        if key not in t:
            reader.fail(w, None, f"missing key '{key}': a {unit}")
    start = reader.number(w, t, "start", None, exclusive=True, integer=closed)
    stop = reader.number(w, t, "stop", None, exclusive=True, integer=closed)
    factor = reader.number(w, t, "factor", None, minimum=1.0, exclusive=True)
    step = reader.number(w, t, "step", None, exclusive=True)
    assert start is not None and stop is not None
    if stop < start:
        reader.fail(w, "stop", f"stop ({stop:g}) is below start ({start:g})")
    if factor is None and step is None:
        reader.fail(w, None, "give 'factor' (geometric, e.g. 2) and/or 'step' (linear) beside start/stop")
    levels: list[float] = []
    level: float = start
    while level <= stop * (1 + 1e-9):
        levels.append(level if closed else float(level))
        if len(levels) > MAX_RAMP_LEVELS:
            reader.fail(
                w,
                "factor" if factor else "step",
                f"more than {MAX_RAMP_LEVELS} levels: use a larger factor or step",
            )
        nxt = level * factor if factor is not None else level
        if step is not None:
            nxt = max(nxt, level + step)
        if closed:
            # Each level is the previous one times the factor, rounded half up; concurrency must move.
            nxt = max(int(math.floor(nxt + 0.5)), int(level) + 1)
        else:
            nxt = round(nxt, 6)
        level = nxt
    return tuple(levels)
