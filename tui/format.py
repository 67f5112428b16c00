"""Pure text formatting for the console: numbers, durations, units, labels and n/a reasons.

Nothing here touches Textual or a Snapshot's clock: every function maps values to short strings so
that panels stay thin and every rule about how a number is shown is unit-tested in one place.
Missing values (``None``) are always shown as "n/a", never as a zero.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from loadgen.snapshot import METRICS, SLO, SLOVerdict

NA = "n/a"

METRIC_TITLES: dict[str, str] = {
    "ttft_ms": "TTFT",
    "itl_ms": "ITL",
    "decode_tok_s": "decode tok/s",
    "e2e_ms": "e2e latency",
    "lag_ms": "schedule lag",
}

ERROR_LABELS: dict[str, str] = {
    "connect": "connect",
    "ttft_timeout": "TTFT timeout",
    "idle_timeout": "idle timeout",
    "total_timeout": "total timeout",
    "http_429": "HTTP 429",
    "http_status": "HTTP status",
    "stream_cut": "stream cut",
    "malformed": "malformed",
    "empty_output": "empty output",
}

_SI_SUFFIXES = ((1e9, "G"), (1e6, "M"), (1e3, "k"))


def na(reason: str | None = None) -> str:
    """'n/a', with the reason when one is known."""
    return f"{NA} ({reason})" if reason else NA


def _round_sig(value: float, digits: int) -> float:
    return float(f"{value:.{digits}g}")


def _sig(value: float, digits: int = 3) -> str:
    """``value`` with ``digits`` significant figures, in plain (not exponent) notation."""
    rounded = _round_sig(value, digits)  # first, so that 999.96 carries into 1000 before we count decimals
    if rounded == 0:
        return "0"
    magnitude = int(math.floor(math.log10(abs(rounded))))
    return f"{rounded:.{max(0, digits - 1 - magnitude)}f}"


def fmt_count(count: int | None) -> str:
    return NA if count is None else f"{count:,}"


def fmt_si(value: float | None, digits: int = 3) -> str:
    """1234.5 -> '1.23k', 12.345 -> '12.3', 0.01234 -> '0.0123'."""
    if value is None or math.isnan(value):
        return NA
    value = _round_sig(value, digits)
    for scale, suffix in _SI_SUFFIXES:
        if abs(value) >= scale:
            return _sig(value / scale, digits) + suffix
    return _sig(value, digits)


def fmt_ms(ms: float | None) -> str:
    """A latency given in milliseconds: '0.42 ms', '81.2 ms', '812 ms', '1.24 s', '62.5 s'."""
    if ms is None or math.isnan(ms):
        return NA
    ms = _round_sig(ms, 3)
    if abs(ms) >= 1000:
        return f"{_sig(ms / 1000)} s"
    # Below a millisecond a third digit is noise and only widens the line.
    return f"{_sig(ms, 2 if abs(ms) < 1 else 3)} ms"


def _trim(text: str) -> str:
    return text[:-2] if text.endswith(".0") else text


def fmt_ms_short(ms: float) -> str:
    """An axis label: '10ms', '250ms', '1s', '1.5s'."""
    if abs(ms) >= 1000:
        return f"{_trim(_sig(ms / 1000, 2))}s"
    return f"{_trim(_sig(ms, 2))}ms"


def fmt_value(value: float | None, unit: str) -> str:
    """A histogram value in its display unit (see ``loadgen.snapshot.METRICS``)."""
    if unit == "ms":
        return fmt_ms(value)
    if value is None:
        return NA
    return f"{fmt_si(value)} {unit}"


def fmt_value_short(value: float, unit: str) -> str:
    """A compact axis label for a histogram value."""
    if unit == "ms":
        return fmt_ms_short(value)
    text = fmt_si(value, 2)
    suffix = text[-1] if text[-1].isalpha() else ""
    return _trim(text.removesuffix(suffix)) + suffix


def fmt_duration(seconds: float | None) -> str:
    """Elapsed/remaining time: '0:05', '12:34', '1:02:03'."""
    if seconds is None or math.isnan(seconds):
        return NA
    total = max(0, int(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def fmt_pct(fraction: float | None, digits: int = 1) -> str:
    """A 0..1 fraction as a percentage: 0.1234 -> '12.3%'; small non-zero shares keep two decimals
    (0.0005 -> '0.05%') so an error rate never reads as a flat 0."""
    if fraction is None or math.isnan(fraction):
        return NA
    if 0 < abs(fraction) < 0.01 and digits < 2:
        digits = 2
    return f"{fraction * 100:.{digits}f}%"


def fmt_gauge(value: float | None) -> str:
    """A gauge that is usually a whole number (running requests): 61.0 -> '61', 2.5 -> '2.5'."""
    if value is None or math.isnan(value):
        return NA
    if value == int(value) and abs(value) < 1000:
        return str(int(value))
    return fmt_si(value)


def fmt_rate(rps: float | None) -> str:
    return NA if rps is None else f"{fmt_si(rps)} req/s"


def fmt_gib(mib: float | None) -> str:
    return NA if mib is None else f"{mib / 1024:.1f}"


def metric_title(metric: str) -> str:
    return METRIC_TITLES.get(metric, metric)


def metric_unit(metric: str) -> str:
    return METRICS.get(metric, "")


def window_label(window: str, rolling_s: float) -> str:
    if window == "step":
        return "this step"
    if window == "rolling":
        return f"last {rolling_s:g} s"
    return "whole run"


def mode_label(mode: str, level: int, rate_rps: float | None, arrival: str = "") -> str:
    """'closed loop 32' or 'open loop λ 12 req/s (poisson, cap 64)'."""
    if mode == "closed":
        return f"closed loop {level}"
    details = [arrival] if arrival and arrival != "closed" else []
    if level:
        details.append(f"cap {level}")
    suffix = f" ({', '.join(details)})" if details else ""
    return f"open loop λ {fmt_rate(rate_rps)}{suffix}"


def step_label(step_index: int, step_count: int | None, remaining_s: float | None) -> str:
    """'step 3/8 · 0:12 left', or 'step 3 (manual)' without a plan."""
    if step_count is None:
        return f"step {step_index + 1} (manual)"
    text = f"step {step_index + 1}/{step_count}"
    if remaining_s is not None:
        text += f" · {fmt_duration(remaining_s)} left"
    return text


def error_label(kind: str) -> str:
    return ERROR_LABELS.get(kind, kind)


def slo_threshold(slo: SLO, metric: str) -> tuple[float, str] | None:
    """The SLO line to draw on ``metric``'s histogram, in its display unit, with a label."""
    if metric == "ttft_ms":
        if slo.ttft_p95_ms is not None:
            return slo.ttft_p95_ms, f"SLO p95 ≤ {fmt_ms(slo.ttft_p95_ms)}"
        if slo.ttft_p99_ms is not None:
            return slo.ttft_p99_ms, f"SLO p99 ≤ {fmt_ms(slo.ttft_p99_ms)}"
    elif metric == "decode_tok_s" and slo.decode_p50_tok_s is not None:
        return slo.decode_p50_tok_s, f"SLO p50 ≥ {fmt_si(slo.decode_p50_tok_s)}"
    elif metric == "itl_ms" and slo.itl_p99_ms is not None:
        return slo.itl_p99_ms, f"SLO p99 ≤ {fmt_ms(slo.itl_p99_ms)}"
    elif metric == "e2e_ms" and slo.e2e_p95_s is not None:
        return slo.e2e_p95_s * 1000.0, f"SLO p95 ≤ {fmt_ms(slo.e2e_p95_s * 1000.0)}"
    return None


def verdict_label(verdict: SLOVerdict) -> str:
    if verdict.met is None:
        return "–"
    return "met" if verdict.met else "miss"


def source_reasons(sources: Mapping[str, str], *, gpu: bool | None = None) -> str:
    """'nvml: library not found; dcgm: connection refused' for the sources that are not 'ok'.

    ``gpu`` picks GPU sources (nvml, dcgm, nvidia-smi) or server ones; ``None`` takes both.
    """
    reasons = []
    for name, state in sources.items():
        if state == "ok":
            continue
        if gpu is not None and is_gpu_source(name) != gpu:
            continue
        reasons.append(f"{name}: {state}")
    return "; ".join(reasons)


def is_gpu_source(name: str) -> bool:
    lowered = name.lower()
    return any(key in lowered for key in ("nvml", "dcgm", "nvidia", "smi", "gpu"))


def ellipsize(text: str, width: int) -> str:
    """Cut ``text`` to ``width`` cells with a trailing '…' (one cell per character)."""
    if width <= 0:
        return ""
    return text if len(text) <= width else text[: width - 1] + "…"
