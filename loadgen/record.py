"""The JSONL run record: a header with the run's conditions, one line per finished step, events.

Every line is one JSON object with a ``type`` ("header" | "step" | "event") and is fsync'ed as soon as it
is written, so a run killed at any moment keeps every finished step. Step lines carry the figures a
reader wants at a glance (flat keys: ``ttft_ms.p95``, ``out_tok_s``...) plus every percentile and the
serialized HDR histograms, from which any other percentile can be recomputed.

Nothing secret is written: URLs lose their user:password@ part (and, for target URLs, the query), and
any string holding the value of a secret-looking environment variable (``*KEY*``, ``*TOKEN*``...) is
replaced by ``***``.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, TextIO
from urllib.parse import urlsplit, urlunsplit

from loadgen.metrics import decode_histogram, view_from_hdr
from loadgen.snapshot import METRICS, HistogramView, Percentiles, SLOVerdict, StepSummary, WindowStats

__all__ = [
    "SCHEMA_VERSION",
    "Record",
    "RecordError",
    "RecordWriter",
    "ramp_version",
    "read_record",
    "step_from_line",
    "strip_url_credentials",
]

SCHEMA_VERSION = 1
_PCT_FIELDS = ("count", "mean", "p50", "p90", "p95", "p99", "p999", "max", "min")
# The at-a-glance percentiles of a step line (the full set is under "pct").
_SUMMARY = {
    "ttft_ms": ("p50", "p95", "p99"),
    "itl_ms": ("p50", "p99"),
    "e2e_ms": ("p50", "p95"),
    "lag_ms": ("p50", "p99"),
    "decode_tok_s": ("p50", "p95"),
}
_SECRET_ENV = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH", re.IGNORECASE)
_NOT_SECRET_ENV = re.compile(r"(_ENV|_FILE|_PATH|_DIR|_SOCK|AUTHORITY)$", re.IGNORECASE)
_USERINFO = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.\-]*://)[^/\s@]+@")
_URL_KEY = re.compile(r"(^|_)url$", re.IGNORECASE)


class RecordError(Exception):
    """A record that cannot be read; the message names the file and line."""


def ramp_version() -> str:
    try:
        from importlib.metadata import version

        return version("llm-ramp")
    except Exception:
        return "0+unknown"


def strip_url_credentials(url: str, drop_query: bool = True) -> str:
    """``http://user:pass@host:8000/v1?key=x`` -> ``http://host:8000/v1``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return _USERINFO.sub(r"\1", url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    query, fragment = ("", "") if drop_query else (parts.query, parts.fragment)
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


def _secret_values() -> list[str]:
    # Short values would match too much ordinary text; real keys are long. Paths and sockets
    # (XAUTHORITY, SSH_AUTH_SOCK, *_KEY_FILE) name where a secret lives, not the secret.
    return [
        v
        for k, v in os.environ.items()
        if _SECRET_ENV.search(k) and not _NOT_SECRET_ENV.search(k) and len(v) >= 8
    ]


def _clean(value: Any, secrets: list[str], key: str = "") -> Any:
    """JSON-ready copy: dataclasses/enums/mappings/tuples converted, non-finite floats -> null, secrets out."""
    if isinstance(value, str):
        text = _USERINFO.sub(r"\1", value)
        if _URL_KEY.search(key) and "://" in text:
            text = strip_url_credentials(text)
        for secret in secrets:
            if secret in text:
                text = text.replace(secret, "***")
        return text
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, enum.Enum):
        return _clean(value.value, secrets, key)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _clean(v, secrets, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_clean(v, secrets, key) for v in value]
    if hasattr(value, "item"):  # numpy scalars
        return _clean(value.item(), secrets, key)
    return _clean(str(value), secrets, key)


def _pct_dict(pct: Percentiles) -> dict[str, Any]:
    return {name: getattr(pct, name) for name in _PCT_FIELDS}


def _pct_from(data: Mapping[str, Any]) -> Percentiles:
    fields: dict[str, Any] = {name: data[name] for name in _PCT_FIELDS if data.get(name) is not None}
    return Percentiles(**fields)


class RecordWriter:
    """Appends lines to a new JSONL record, each one flushed and fsync'ed before the call returns.

    Refuses to overwrite an existing file unless ``overwrite`` (a record is the memory of a run).
    """

    def __init__(self, path: str | os.PathLike[str], overwrite: bool = False) -> None:
        self.path = os.fspath(path)
        try:
            self._f: TextIO | None = open(self.path, "w" if overwrite else "x", encoding="utf-8")
        except FileExistsError:
            raise RecordError(
                f"{self.path}: already exists; choose another --out (records are never overwritten)"
            ) from None
        except OSError as exc:
            raise RecordError(f"{self.path}: cannot create the record: {exc.strerror or exc}") from None
        self._secrets = _secret_values()

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None

    def _write(self, line: dict[str, Any]) -> dict[str, Any]:
        if self._f is None:
            raise RecordError(f"{self.path}: record already closed")
        clean = _clean(line, self._secrets)
        text = json.dumps(clean, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        self._f.write(text + "\n")
        self._f.flush()
        os.fsync(self._f.fileno())
        return clean  # type: ignore[no-any-return]

    def write_header(self, header: Mapping[str, Any]) -> dict[str, Any]:
        """The first line. Fills type, schema, ramp version, start time and host when absent."""
        line: dict[str, Any] = {
            "type": "header",
            "schema": SCHEMA_VERSION,
            "ramp_version": ramp_version(),
            "started_at": datetime.now(timezone.utc).astimezone().isoformat(timespec="seconds"),
            "host": socket.gethostname(),
        }
        line.update({k: v for k, v in header.items() if k not in ("type", "schema")})
        for key in ("target_url", "url"):
            if isinstance(line.get(key), str):
                line[key] = strip_url_credentials(line[key])
        return self._write(line)

    def write_step(self, step: StepSummary, hists: Mapping[str, str], **extra: Any) -> dict[str, Any]:
        """One finished step: its conditions, the summary figures, all percentiles and the histograms."""
        stats = step.stats
        line: dict[str, Any] = {
            "type": "step",
            "index": step.index,
            "mode": step.mode,
            "level": step.level,
            "rate_rps": step.rate_rps,
            "arrival": step.arrival,
            "warmup_s": step.warmup_s,
            "window_s": step.window_s,
            "window_t0_ns": step.window_t0_ns,  # host monotonic clock: for joins with traces/server logs
            "window_t1_ns": step.window_t1_ns,
            "duration_s": step.duration_s,
            "stats_duration_s": stats.duration_s,
            "ended_by": step.ended_by,
            "ok": stats.ok,
            "errors": dict(stats.errors),
            "error_count": stats.error_count,
            "cancelled": stats.cancelled,
            "success_rate": stats.success_rate,
            "input_tokens": stats.input_tokens,
            "output_tokens": stats.output_tokens,
            "cached_tokens": stats.cached_tokens,
            "approx_tokens": stats.approx_tokens,
            "input_tokens_per_req": _token_summary(hists, "input_tokens"),
            "output_tokens_per_req": _token_summary(hists, "output_tokens"),
            "out_tok_s": stats.out_tok_s,
            "prefill_tok_s": stats.prefill_tok_s,
            "req_s": stats.req_s,
        }
        for metric, points in _SUMMARY.items():
            pct = stats.pct(metric)
            line[metric] = {p: getattr(pct, p) for p in points}
        line.update(
            {
                "slo_met": step.verdict.met,
                "slo_failures": list(step.verdict.failures),
                "client_bound": step.client_bound,
                **(
                    {"client_bound_reason": step.bound_reason}
                    if step.client_bound and step.bound_reason
                    else {}
                ),
                "server": dict(step.server),
                "marks": list(step.marks),
            }
        )
        line.update(extra)
        line["pct"] = {metric: _pct_dict(stats.pct(metric)) for metric in METRICS}
        line["by_class"] = {
            cls: {m: _pct_dict(p) for m, p in ms.items()} for cls, ms in stats.by_class.items()
        }
        line["hists"] = dict(hists)
        return self._write(line)

    def write_event(self, kind: str, data: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A mark, a note, the run's end: ``{"type": "event", "kind": ..., "at": wall clock, ...data}``."""
        line: dict[str, Any] = {
            "type": "event",
            "kind": kind,
            "at": datetime.now(timezone.utc).astimezone().isoformat(timespec="milliseconds"),
        }
        line.update({k: v for k, v in (data or {}).items() if k not in ("type", "kind")})
        return self._write(line)


def _decoded_view(b64: str, key: str) -> HistogramView:
    try:
        return view_from_hdr(decode_histogram(b64), key)
    except Exception as exc:  # hdrh raises its own cookie/length errors, zlib and base64 errors
        raise ValueError(f"histogram {key!r} cannot be decoded ({type(exc).__name__}: {exc})") from None


def _token_summary(hists: Mapping[str, str], key: str) -> dict[str, float | None]:
    b64 = hists.get(key)
    if not b64:
        return {"p50": None, "p95": None, "mean": None}
    pct = _decoded_view(b64, key).pct
    return {"p50": pct.p50, "p95": pct.p95, "mean": pct.mean}


@dataclass(frozen=True, slots=True)
class Record:
    path: str
    header: dict[str, Any]
    steps: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    truncated: bool = False  # the last line was cut short (the run was killed mid-write) and skipped


def read_record(path: str | os.PathLike[str]) -> Record:
    """Read a record; a truncated last line is skipped, any other bad line is a ``RecordError``."""
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise RecordError(f"{name}: no such file") from None
    except UnicodeDecodeError as exc:
        raise RecordError(f"{name}: not a text file ({exc.reason}); is it a run record?") from None
    except OSError as exc:
        raise RecordError(f"{name}: cannot read: {exc.strerror or exc}") from None
    lines = text.split("\n")
    # a record ends with "\n": whatever follows the last one is a line that was being written
    tail = lines.pop()
    truncated = False
    header: dict[str, Any] | None = None
    steps: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    numbered = [(i + 1, line) for i, line in enumerate(lines)]
    if tail.strip():
        numbered.append((len(lines) + 1, tail))
    for number, line in numbered:
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            if number == len(lines) + 1:
                truncated = True  # Ctrl-C mid-write: the finished lines before it are good
                break
            raise RecordError(f"{name} line {number}: not JSON — {exc.msg} at column {exc.colno}") from None
        if not isinstance(obj, dict):
            raise RecordError(f"{name} line {number}: expected a JSON object, found {type(obj).__name__}")
        kind = obj.get("type")
        if header is None:
            if kind != "header":
                raise RecordError(
                    f"{name} line {number}: expected the header line first, found type {kind!r}"
                )
            schema = obj.get("schema")
            if isinstance(schema, int) and schema > SCHEMA_VERSION:
                raise RecordError(
                    f"{name}: record schema {schema} is newer than this ramp reads ({SCHEMA_VERSION}); upgrade llm-ramp"
                )
            header = obj
        elif kind == "step":
            steps.append(obj)
        elif kind == "event":
            events.append(obj)
        elif kind == "header":
            raise RecordError(f"{name} line {number}: a second header (two runs written to one file?)")
        else:
            raise RecordError(f"{name} line {number}: unknown line type {kind!r}")
    if header is None:
        raise RecordError(f"{name}: empty, not a run record")
    return Record(path=name, header=header, steps=steps, events=events, truncated=truncated)


def step_from_line(line: Mapping[str, Any]) -> StepSummary:
    """Rebuild a StepSummary from a step line (drawing bins recomputed from the stored histograms)."""
    pct = line.get("pct") or {}
    hists = line.get("hists") or {}
    views: dict[str, HistogramView] = {}
    for metric, unit in METRICS.items():
        p = _pct_from(pct.get(metric) or {})
        bins: tuple[tuple[float, float, int], ...] = ()
        if metric in hists:
            bins = _decoded_view(hists[metric], metric).bins
        views[metric] = HistogramView(metric=metric, unit=unit, pct=p, bins=bins)
    by_class = {
        cls: {m: _pct_from(p) for m, p in metrics.items()}
        for cls, metrics in (line.get("by_class") or {}).items()
    }
    stats = WindowStats(
        window="step",
        duration_s=float(line.get("stats_duration_s", line.get("window_s", 0.0))),
        ok=int(line.get("ok", 0)),
        errors=dict(line.get("errors") or {}),
        cancelled=int(line.get("cancelled", 0)),
        input_tokens=int(line.get("input_tokens", 0)),
        output_tokens=int(line.get("output_tokens", 0)),
        cached_tokens=int(line.get("cached_tokens", 0)),
        out_tok_s=line.get("out_tok_s"),
        prefill_tok_s=line.get("prefill_tok_s"),
        req_s=line.get("req_s"),
        approx_tokens=int(line.get("approx_tokens", 0)),
        hist=views,
        by_class=by_class,
    )
    return StepSummary(
        index=int(line.get("index", 0)),
        mode=str(line.get("mode", "closed")),
        level=int(line.get("level", 0)),
        rate_rps=line.get("rate_rps"),
        arrival=str(line.get("arrival", "")),
        warmup_s=float(line.get("warmup_s", 0.0)),
        window_s=float(line.get("window_s", 0.0)),
        duration_s=float(line.get("duration_s", 0.0)),
        stats=stats,
        verdict=SLOVerdict(met=line.get("slo_met"), failures=tuple(line.get("slo_failures") or ())),
        client_bound=bool(line.get("client_bound", False)),
        ended_by=str(line.get("ended_by", "plan")),
        server=dict(line.get("server") or {}),
        marks=tuple(line.get("marks") or ()),
        window_t0_ns=int(line.get("window_t0_ns") or 0),
        window_t1_ns=int(line.get("window_t1_ns") or 0),
        bound_reason=str(line.get("client_bound_reason") or ""),
    )
