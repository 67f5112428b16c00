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

import numpy as np

from loadgen import strict_json
from loadgen.record_compat import renumber_from_zero
from loadgen.record_line import STEP_LINE, JsonObject, step_from_line, step_line
from loadgen.snapshot import (
    StepSummary,
)

__all__ = [
    "SCHEMA_VERSION",
    "STEP_LINE",
    "JsonObject",
    "Record",
    "RecordError",
    "RecordWriter",
    "ramp_version",
    "read_record",
    "renumber_from_zero",
    "step_from_line",
    "step_line",
    "strip_url_credentials",
]

# 2: steps are numbered from 1 everywhere, as on the screen; 1 counted from 0 (``renumber_from_zero``)
SCHEMA_VERSION = 2
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


def _clean(value: object, secrets: list[str], key: str = "") -> Any:
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
    if isinstance(value, np.generic):  # numpy scalars
        return _clean(value.item(), secrets, key)
    return _clean(str(value), secrets, key)


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

    def _write(self, line: JsonObject) -> JsonObject:
        if self._f is None:
            raise RecordError(f"{self.path}: record already closed")
        clean: JsonObject = _clean(line, self._secrets)
        text = json.dumps(clean, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        self._f.write(text + "\n")
        self._f.flush()
        os.fsync(self._f.fileno())
        return clean

    def write_header(self, header: Mapping[str, object]) -> JsonObject:
        """The first line. Fills type, schema, ramp version, start time and host when absent."""
        line: JsonObject = {
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

    def write_step(self, step: StepSummary, hists: Mapping[str, str], **extra: object) -> JsonObject:
        """One finished step: its conditions, the summary figures, all percentiles and the histograms
        (``step_line``); ``extra`` keys go after them and may not replace one."""
        line = step_line(step, hists)
        clash = sorted(set(extra) & set(line))
        if clash:
            raise ValueError(f"write_step: extra keys {clash} would replace the step line's own")
        line.update(extra)
        return self._write(line)

    def write_event(self, kind: str, data: Mapping[str, object] | None = None) -> JsonObject:
        """A mark, a note, the run's end: ``{"type": "event", "kind": ..., "at": wall clock, ...data}``."""
        line: JsonObject = {
            "type": "event",
            "kind": kind,
            "at": datetime.now(timezone.utc).astimezone().isoformat(timespec="milliseconds"),
        }
        line.update({k: v for k, v in (data or {}).items() if k not in ("type", "kind")})
        return self._write(line)


@dataclass(frozen=True, slots=True)
class Record:
    path: str
    header: JsonObject
    steps: list[JsonObject] = field(default_factory=list)
    events: list[JsonObject] = field(default_factory=list)
    truncated: bool = False  # the last line was cut short (the run was killed mid-write) and skipped


def _record_text(name: str) -> str:
    """The record file's text; a missing, unreadable or binary file is one ``RecordError`` line."""
    try:
        with open(name, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        raise RecordError(f"{name}: no such file") from None
    except UnicodeDecodeError as exc:
        raise RecordError(f"{name}: not a text file ({exc.reason}); is it a run record?") from None
    except OSError as exc:
        raise RecordError(f"{name}: cannot read: {exc.strerror or exc}") from None


def _readable_header(name: str, obj: JsonObject) -> JsonObject:
    """The header line, unless its schema is newer than this ramp reads."""
    schema = obj.get("schema")
    if isinstance(schema, int) and schema > SCHEMA_VERSION:
        raise RecordError(
            f"{name}: record schema {schema} is newer than this ramp reads ({SCHEMA_VERSION}); upgrade llm-ramp"
        )
    return obj


def read_record(path: str | os.PathLike[str]) -> Record:
    """Read a record; a truncated last line is skipped, any other bad line is a ``RecordError``."""
    name = os.fspath(path)
    lines = _record_text(name).split("\n")
    # a record ends with "\n": whatever follows the last one is a line that was being written
    tail = lines.pop()
    truncated = False
    header: JsonObject | None = None
    steps: list[JsonObject] = []
    events: list[JsonObject] = []
    numbered = [(i + 1, line) for i, line in enumerate(lines)]
    if tail.strip():
        numbered.append((len(lines) + 1, tail))
    for number, line in numbered:
        if not line.strip():
            continue
        try:
            obj = strict_json.loads(line)
        except strict_json.JsonError as exc:  # nested too deeply, an integer too long: one line
            where = f" {exc.field}:" if exc.field else ""
            raise RecordError(f"{name} line {number}:{where} {exc}") from None
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
            header = _readable_header(name, obj)
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
    if not isinstance(header.get("schema"), int) or header["schema"] < 2:
        renumber_from_zero(steps, events)
    return Record(path=name, header=header, steps=steps, events=events, truncated=truncated)
