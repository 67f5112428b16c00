"""The console's words: metric titles, error labels, window/mode/step labels, SLO lines, n/a reasons.

Nothing here touches Textual or a Snapshot's clock: every function maps values to short strings so that
panels stay thin. Numbers inside those strings are written by ``loadgen.format`` (the one set of number
formatters, shared with the headless face); nothing here formats a number itself.
"""

from __future__ import annotations

from collections.abc import Mapping

from loadgen.format import fmt_duration, fmt_ms, fmt_rate, fmt_setting, fmt_si
from loadgen.snapshot import METRICS, SLO, SLOVerdict

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


def metric_title(metric: str) -> str:
    return METRIC_TITLES.get(metric, metric)


def metric_unit(metric: str) -> str:
    return METRICS.get(metric, "")


def window_label(window: str, rolling_s: float) -> str:
    if window == "step":
        return "this step"
    if window == "rolling":
        return f"last {fmt_setting(rolling_s)} s"
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
