"""The ``[dataset]`` and ``[trace]`` tables → a loaded ``Source`` (``loadgen.sources``), its ``path``
relative to the profile file. A problem in the table is the usual ``ProfileError`` at its line; a problem
in the data file is one too, naming the data file, its line and the field.

    [dataset]
    path = "conversations.jsonl"       # required
    format = "sharegpt"                # sharegpt | openai | text (default: detected)
    sampling = "sequential"            # sequential (file order, each worker its share) | random (seeded)
    max_tokens = 256                   # optional: every turn's max_tokens
    use_output_len = true              # default: each turn's own length (its max_tokens, its recorded reply)
    history = "recorded"               # multi-turn: resend the recorded replies | "server": the server's

    [trace]
    path = "mooncake.jsonl"            # required; .csv is read as CSV
    time_unit = "ms"                   # s | ms (default: detected)
    window = [0, 600]                  # optional: seconds [start, end] on the trace's clock
    time_scale = 1.0                   # 2 = twice as fast
    block_tokens = 512                 # tokens per hash id
"""

from __future__ import annotations

import os

from loadgen.profile.fields import FieldReader, Where, is_number
from loadgen.profile.model import ProfileError
from loadgen.sources import (
    DATASET_FORMATS,
    DEFAULT_BLOCK_TOKENS,
    HISTORY_SOURCES,
    SAMPLING_ORDERS,
    TIME_UNITS,
    DatasetOptions,
    Source,
    SourceError,
    TraceOptions,
    load_dataset,
    load_trace,
)

DATASET_KEYS = ("path", "format", "sampling", "max_tokens", "use_output_len", "history")
TRACE_KEYS = ("path", "time_unit", "window", "time_scale", "block_tokens")


def _path(reader: FieldReader, w: Where, t: dict[str, object], base: str) -> str:
    if "path" not in t:
        reader.fail(w, None, "missing key 'path': the data file (relative to this profile)")
    path = reader.string(w, t, "path", None) or ""
    return path if os.path.isabs(path) or not base else os.path.join(os.path.dirname(base), path)


def read_dataset(reader: FieldReader, t: dict[str, object], base: str) -> DatasetOptions:
    w = Where("dataset", None, "[dataset]")
    reader.check_keys(w, t, DATASET_KEYS)
    fmt = reader.choice(w, t, "format", DATASET_FORMATS[0], DATASET_FORMATS) if "format" in t else None
    use_output_len = reader.boolean(w, t, "use_output_len", True)
    return DatasetOptions(
        path=_path(reader, w, t, base),
        format=fmt,
        sampling=reader.choice(w, t, "sampling", "sequential", SAMPLING_ORDERS),
        max_tokens=reader.integer(w, t, "max_tokens", None),
        use_output_len=bool(use_output_len),
        history=reader.choice(w, t, "history", "recorded", HISTORY_SOURCES),
    )


def read_trace(reader: FieldReader, t: dict[str, object], base: str) -> TraceOptions:
    w = Where("trace", None, "[trace]")
    reader.check_keys(w, t, TRACE_KEYS)
    unit = reader.choice(w, t, "time_unit", TIME_UNITS[0], TIME_UNITS) if "time_unit" in t else None
    window = t.get("window")
    if window is not None and (
        not isinstance(window, list)
        or len(window) != 2
        or not all(is_number(v) for v in window)
        or not 0 <= window[0] < window[1]
    ):
        reader.fail(w, "window", "expected [start, end] seconds with 0 <= start < end, e.g. [0, 600]")
    scale = reader.number(w, t, "time_scale", 1.0, exclusive=True)
    block = reader.integer(w, t, "block_tokens", DEFAULT_BLOCK_TOKENS)
    return TraceOptions(
        path=_path(reader, w, t, base),
        time_unit=unit,
        window=None if window is None else (float(window[0]), float(window[1])),
        time_scale=float(scale or 1.0),
        block_tokens=block or DEFAULT_BLOCK_TOKENS,
    )


def read_source(
    reader: FieldReader, dataset: dict[str, object] | None, trace: dict[str, object] | None, base: str
) -> Source | None:
    """The source the tables name, loaded; None without either table."""
    if dataset is not None and trace is not None:
        reader.fail(
            Where("trace", None, "[trace]"), None, "a profile replays a [dataset] or a [trace], not both"
        )
    try:
        if dataset is not None:
            return load_dataset(read_dataset(reader, dataset, base))
        if trace is not None:
            return load_trace(read_trace(reader, trace, base))
    except SourceError as exc:
        raise ProfileError(str(exc), path=reader.shown) from None
    return None
