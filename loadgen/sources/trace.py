"""Timestamped traces: a JSONL or CSV file of arrivals → ``Source(kind="trace")``.

Fields (a JSONL object's keys, or a CSV file's header row), the Mooncake trace's names first:

* ``timestamp`` (or ``timestamp_ms``, ``timestamp_s``, ``time``, ``arrival_time``, ``ts``): when it arrives.
* ``input_length`` (or ``input_tokens``, ``prompt_tokens``): prompt tokens.
* ``output_length`` (or ``output_tokens``, ``max_tokens``): output tokens (sent as ``max_tokens``).
* ``hash_ids`` (optional): the prompt's prefix blocks, one id per ``block_tokens`` (512 by default, as in
  Mooncake) tokens; a JSON list, or in CSV ids separated by spaces, commas or semicolons. The same id at
  the same place is the same block of text, so requests that share ids share a prompt prefix.
* ``session_id`` (or ``session``, ``conversation_id``, ``chat_id``; optional): kept as the request's session.

The time unit: ``time_unit`` (``--trace-time-unit s|ms``) when given; else the field's suffix
(``timestamp_ms``, ``timestamp_s``); else milliseconds when every timestamp is a whole number (as in
Mooncake's traces) and seconds when any has a fraction. The note says which rule decided. Arrivals are sorted by time (a file
out of order is read in time order); times are taken from the first arrival; ``window`` (``--trace-window START:END``, seconds) keeps the arrivals with
START <= t < END, timed from START.
"""

from __future__ import annotations

import csv
import io
import math
import re
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence

from loadgen.sources.model import (
    Source,
    SourceError,
    TimeUnit,
    TraceEntry,
    TraceOptions,
    check_span,
    check_tokens,
    hash_file,
    parse_json,
)

TIME_KEYS = ("timestamp", "timestamp_ms", "timestamp_s", "time", "arrival_time", "ts")
INPUT_KEYS = ("input_length", "input_tokens", "prompt_tokens")
OUTPUT_KEYS = ("output_length", "output_tokens", "max_tokens")
SESSION_KEYS = ("session_id", "session", "conversation_id", "chat_id")
_ID_SPLIT = re.compile(r"[\s,;]+")

Row = tuple[int, Mapping[str, object]]
Raw = tuple[int, float, int, int, tuple[int, ...], str | None, str]  # line, t, in, out, ids, session, key


def load_trace(options: TraceOptions) -> Source:
    """Read the trace in two streaming passes, never whole: the first validates every row and keeps only
    its time (8 bytes a row), the second builds the arrivals inside the window. A 50 MB trace of which a
    window uses 300 rows holds 300 entries, not the file."""
    path = options.path
    csv_file = path.lower().endswith(".csv")
    times = array("d")
    first: Raw | None = None
    whole = True
    for number, row in _rows(path, csv_file):
        raw = _entry(path, number, row)
        first = first or raw
        times.append(raw[1])
        whole = whole and float(raw[1]).is_integer()
    if first is None:
        raise SourceError(path, None, None, "no arrivals in the file")
    unit, why = _unit(options.time_unit, first[6], whole)
    factor = 0.001 if unit == "ms" else 1.0
    origin = min(times)
    start, end = options.window if options.window is not None else (0.0, None)
    kept = []
    for number, row in _rows(path, csv_file):
        line, t, n_in, n_out, ids, session, _ = _entry(path, number, row)
        t_s = (t - origin) * factor
        if t_s >= start and (end is None or t_s < end):
            kept.append(TraceEntry(t_s - start, n_in, n_out, ids, session, line))
    kept.sort(key=lambda e: e.t_s)  # arrivals in time order, whatever the file's order (ties: file order)
    entries = tuple(kept)
    if not entries:
        span = (max(times) - origin) * factor
        raise SourceError(
            path,
            None,
            "window",
            f"no arrivals in {start:g}:{'' if end is None else f'{end:g}'} s (the trace spans 0:{span:g} s)",
        )
    check_span(path, entries[-1].line, first[6], entries[-1].t_s)  # 1e300 would make the run wait forever
    duration = (end - start) if end is not None else entries[-1].t_s
    check_span(path, None, "window", duration)
    note = f"{len(entries)} arrivals over {duration:g} s; timestamps read as {unit} ({why})"
    return Source(
        kind="trace",
        path=path,
        content_hash=hash_file(path),
        format="csv" if csv_file else "jsonl",
        note=note,
        entries=entries,
        trace=options,
        duration_s=duration,
    )


def _unit(given: TimeUnit | None, key: str, whole: bool) -> tuple[TimeUnit, str]:
    if given is not None:
        return given, "--trace-time-unit"
    if key.endswith("_ms"):
        return "ms", f"the field is {key}"
    if key.endswith("_s"):
        return "s", f"the field is {key}"
    if whole:
        return "ms", "all whole numbers; --trace-time-unit s if they are seconds"
    return "s", "some have fractions; --trace-time-unit ms if they are milliseconds"


def _rows(path: str, csv_file: bool) -> Iterator[Row]:
    """The file's rows, streamed: a CSV's dict rows or a JSONL file's objects, each with its line."""
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise SourceError(path, None, None, f"cannot read: {exc.strerror or exc}") from None
    with f:
        if csv_file:
            text = io.TextIOWrapper(f, encoding="utf-8", newline="")
            try:
                yield from _csv_rows(path, text)
            except UnicodeDecodeError as exc:
                raise SourceError(
                    path, None, None, f"not UTF-8 text ({exc.reason}); save it as UTF-8"
                ) from None
            return
        for number, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                why = f"not UTF-8 text (byte {exc.start} of the line); save it as UTF-8"
                raise SourceError(path, number, None, why) from None
            if not line.strip():
                continue
            value = parse_json(path, number, line)
            if not isinstance(value, dict):
                raise SourceError(path, number, None, f"expected a JSON object, got {type(value).__name__}")
            yield number, value


def _csv_rows(path: str, text: Iterable[str]) -> Iterator[Row]:
    reader = csv.DictReader(text)
    rows = iter(reader)
    while True:
        try:
            row = next(rows)
        except StopIteration:
            return
        except csv.Error as exc:  # a field past csv's limit (128 KiB), a NUL byte: one line, not a traceback
            # line_num counts the lines read whole: the row that failed is the next one
            raise SourceError(path, reader.line_num + 1, "csv", f"cannot read the row: {exc}") from None
        if any((v or "").strip() for v in row.values() if isinstance(v, str)):
            yield reader.line_num, {k.strip(): v for k, v in row.items() if k is not None}


def _pick(row: Mapping[str, object], keys: Sequence[str]) -> tuple[str, object] | None:
    for key in keys:
        if key in row and row[key] not in (None, ""):
            return key, row[key]
    return None


def _number(path: str, line: int, key: str, value: object, *, integer: bool) -> float:
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise SourceError(path, line, key, f"expected a number, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SourceError(path, line, key, f"expected a number, got {value!r}")
    if value < 0 or (integer and (value < 1 or not float(value).is_integer())):
        want = "a positive whole number" if integer else "a number >= 0"
        raise SourceError(path, line, key, f"expected {want}, got {value!r}")
    return float(value)


def _hash_ids(path: str, line: int, value: object) -> tuple[int, ...]:
    if isinstance(value, str):
        text = value.strip().strip("[]")
        parts = [p for p in _ID_SPLIT.split(text) if p]
        try:
            return tuple(int(p) for p in parts)
        except ValueError:
            raise SourceError(path, line, "hash_ids", f"expected whole numbers, got {value!r}") from None
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise SourceError(path, line, "hash_ids", f"expected a list of whole numbers, got {value!r}")
    return tuple(value)


def _entry(path: str, line: int, row: Mapping[str, object]) -> Raw:
    found: list[tuple[str, object]] = []
    for keys, what in (
        (TIME_KEYS, "timestamp"),
        (INPUT_KEYS, "input_length"),
        (OUTPUT_KEYS, "output_length"),
    ):
        hit = _pick(row, keys)
        if hit is None:
            raise SourceError(path, line, what, f"missing (one of {', '.join(keys)})")
        found.append(hit)
    (t_key, t_val), (in_key, in_val), (out_key, out_val) = found
    t = _number(path, line, t_key, t_val, integer=False)
    n_in = check_tokens(path, line, in_key, int(_number(path, line, in_key, in_val, integer=True)))
    n_out = check_tokens(path, line, out_key, int(_number(path, line, out_key, out_val, integer=True)))
    ids = _hash_ids(path, line, row["hash_ids"]) if row.get("hash_ids") not in (None, "") else ()
    session = _pick(row, SESSION_KEYS)
    return line, t, n_in, n_out, ids, None if session is None else str(session[1]), t_key
