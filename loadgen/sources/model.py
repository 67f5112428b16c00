"""The request sources a profile may replay instead of drawing synthetic prompts: the frozen records a
dataset, a timestamped trace or a saved request file becomes (``Source`` and its parts), their options, and
``SourceError``.

Everything after the parsers (``loadgen.sources.dataset``, ``.trace``, ``.requests``) works on these;
workers receive them pickled inside the ``Profile``. ``Source.to_dict`` describes one for the record (path,
content hash, format, counts, options), never its content: the file and its hash make the run's requests
reconstructible.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from loadgen import strict_json
from loadgen.config import Api

SourceKind = Literal["dataset", "trace", "requests"]
DatasetFormat = Literal["sharegpt", "openai", "text"]
SamplingOrder = Literal["sequential", "random"]
HistorySource = Literal["recorded", "server"]  # what a multi-turn replay resends as the assistant's turns
TimeUnit = Literal["s", "ms"]
DATASET_FORMATS: tuple[DatasetFormat, ...] = get_args(DatasetFormat)
SAMPLING_ORDERS: tuple[SamplingOrder, ...] = get_args(SamplingOrder)
HISTORY_SOURCES: tuple[HistorySource, ...] = get_args(HistorySource)
TIME_UNITS: tuple[TimeUnit, ...] = get_args(TimeUnit)
DEFAULT_BLOCK_TOKENS = 512  # a Mooncake trace's hash id stands for a block of 512 tokens
SCHEDULE_TAIL_S = 0.5  # a trace step lasts its window (time-scaled) plus this: the last arrivals land inside
# The most tokens a length read from a file (or a profile) may ask when the server's max_model_len is not
# known: the largest context any open model advertises today (Llama 4 Scout: 10M). A prompt is built as
# ~4 bytes of text per token, so this bounds one prompt at ~40 MB instead of whatever a typo asks (1e12).
MAX_TOKENS = 10_000_000
# The longest schedule a trace or request file may span (its window, before --trace-time-scale): a week.
# Longer is a unit mix-up or a damaged timestamp (1e300 would make the run wait forever).
MAX_SPAN_S = 7 * 24 * 3600.0


class SourceError(ValueError):
    """A data file that cannot be used; ``str`` is one line: ``file:where: field: what to do``."""

    def __init__(self, path: str, where: int | str | None, field: str | None, message: str) -> None:
        spot = f"{path}:{where}" if isinstance(where, int) else f"{path}: {where}" if where else path
        super().__init__(f"{spot}: {field}: {message}" if field else f"{spot}: {message}")


@dataclass(frozen=True, slots=True)
class DialogTurn:
    """One user turn of a conversation, and the reply recorded after it (None: none recorded)."""

    user: str
    reply: str | None = None
    max_tokens: int | None = None  # the record's own max_tokens (OpenAI-style records)


@dataclass(frozen=True, slots=True)
class Conversation:
    """A dataset record: one or more turns replayed in order as one session (history resent)."""

    turns: tuple[DialogTurn, ...]
    system: str = ""
    line: int = 0  # where it was read (line, or record number in a JSON array)
    raw: bool = False  # a plain text line or a ``prompt`` record: sent as is on the completions API


@dataclass(frozen=True, slots=True)
class TraceEntry:
    """A trace line: when it arrives (seconds on the trace's clock, from the window's start), its lengths,
    its prefix blocks (Mooncake ``hash_ids``) and its session."""

    t_s: float
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()
    session: str | None = None
    line: int = 0


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """A request as a run sent it (``--save-requests``), replayed as is (``--requests``)."""

    t_s: float  # intended start, seconds after the file's first
    api: Api
    max_tokens: int
    messages: tuple[tuple[str, str], ...] = ()
    prompt: str = ""
    input_tokens_target: int = 0
    session: int = 0
    turn: int = 0
    line: int = 0


@dataclass(frozen=True, slots=True)
class DatasetOptions:
    path: str
    format: DatasetFormat | None = None  # None: detected from the name and the first record
    sampling: SamplingOrder = "sequential"
    max_tokens: int | None = None  # overrides every turn's
    use_output_len: bool = True  # a turn's max_tokens: its recorded reply's length (or the record's own)
    history: HistorySource = "recorded"

    def to_dict(self) -> dict[str, object]:
        return {
            "format": self.format,
            "sampling": self.sampling,
            "max_tokens": self.max_tokens,
            "use_output_len": self.use_output_len,
            "history": self.history,
        }


@dataclass(frozen=True, slots=True)
class TraceOptions:
    path: str
    time_unit: TimeUnit | None = None  # None: detected (see loadgen.sources.trace)
    window: tuple[float, float | None] | None = None  # START:END seconds on the trace's clock
    time_scale: float = 1.0  # 2 = twice as fast
    block_tokens: int = DEFAULT_BLOCK_TOKENS

    def to_dict(self) -> dict[str, object]:
        return {
            "time_unit": self.time_unit,
            "window": None if self.window is None else list(self.window),
            "time_scale": self.time_scale,
            "block_tokens": self.block_tokens,
        }


@dataclass(frozen=True, slots=True)
class Source:
    """What a run replays. ``conversations`` for a dataset, ``entries`` for a trace, ``requests`` for a
    request file; ``duration_s`` is a schedule's length on its own clock (a trace's window)."""

    kind: SourceKind
    path: str
    content_hash: str
    format: str
    note: str = ""  # how it was read, for the operator ("timestamps read as ms: all integers")
    conversations: Sequence[Conversation] = ()  # a tuple, or records read from the file on demand
    entries: tuple[TraceEntry, ...] = ()
    requests: Sequence[RecordedRequest] = ()  # a tuple, or requests read from the file on demand
    request_times: Sequence[float] = ()  # the requests' t_s, when they are read on demand
    dataset: DatasetOptions | None = None
    trace: TraceOptions | None = None
    duration_s: float = 0.0
    skipped: int = 0  # records without a user turn (datasets), left out
    workers: int = 1  # the run's worker processes: worker i replays items i, i + workers, ...

    @property
    def scheduled(self) -> bool:
        """Arrivals follow the file's own times (open loop)."""
        return self.kind != "dataset"

    @property
    def count(self) -> int:
        return len(self.conversations) + len(self.entries) + len(self.requests)

    def offsets_s(self) -> tuple[float, ...]:
        if self.request_times:  # a request file's, held apart: its requests are read from the file
            return tuple(self.request_times)
        return tuple(e.t_s for e in self.entries) or tuple(r.t_s for r in self.requests)

    @property
    def base_rate_rps(self) -> float:
        """The schedule's mean arrival rate at time scale 1: an open-loop level of ``scale * this``."""
        return self.count / max(self.duration_s, 1e-3)

    def step_seconds(self, scale: float) -> float:
        """How long one pass of the schedule lasts at ``scale``."""
        return self.duration_s / scale + SCHEDULE_TAIL_S

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "kind": self.kind,
            "path": os.path.abspath(self.path),
            "content_hash": self.content_hash,
            "format": self.format,
            "count": self.count,
            "note": self.note,
        }
        if self.dataset is not None:
            out["dataset"] = self.dataset.to_dict()
        if self.trace is not None:
            out["trace"] = self.trace.to_dict()
        if self.scheduled:
            out["duration_s"] = round(self.duration_s, 6)
            out["rate_rps_at_scale_1"] = round(self.base_rate_rps, 6)
        return out


def hash_file(path: str) -> str:
    """The SHA-256 (hex) of the file at ``path``, read in 1 MiB pieces (never whole)."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while piece := f.read(1 << 20):
                digest.update(piece)
    except OSError as exc:
        raise SourceError(path, None, None, f"cannot read: {exc.strerror or exc}") from None
    return digest.hexdigest()


def read_bytes(path: str) -> bytes:
    """The file's bytes, or ``SourceError`` saying why not."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise SourceError(path, None, None, f"cannot read: {exc.strerror or exc}") from None


def jsonl_lines(path: str, text: str) -> Iterator[tuple[int, object]]:
    """A JSONL file's values with their line numbers (blank lines skipped); ``SourceError`` names the line
    that is not JSON."""
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        yield number, parse_json(path, number, line)


def parse_json(path: str, where: int | str, text: str) -> object:
    """``json.loads``, its failures as ``SourceError`` naming ``where``: invalid JSON, JSON nested past
    Python's recursion limit and an integer past its digit limit (``loadgen.strict_json``, which names the
    integer's field)."""
    try:
        return strict_json.loads(text)
    except strict_json.JsonError as exc:
        raise SourceError(path, where, exc.field or "json", str(exc)) from None
    except json.JSONDecodeError as exc:
        raise SourceError(path, where, "json", f"not valid JSON: {exc.msg} (column {exc.colno})") from None


def check_tokens(path: str, where: int | str, field: str, value: int) -> int:
    """``value`` when it is at most ``MAX_TOKENS``, else ``SourceError`` naming the file, line and field."""
    if value > MAX_TOKENS:
        raise SourceError(
            path, where, field, f"{value:,} tokens is past any model's context (at most {MAX_TOKENS:,})"
        )
    return value


def check_span(path: str, where: int | str | None, field: str, span_s: float) -> None:
    """``SourceError`` when a schedule spans more than ``MAX_SPAN_S``."""
    if span_s > MAX_SPAN_S:
        raise SourceError(
            path,
            where,
            field,
            f"{span_s:.3g} s after the first arrival: longer than a week; check the unit "
            "(--trace-time-unit) or keep a part (--trace-window START:END)",
        )


def first_overflow(source: Source, max_model_len: int) -> str | None:
    """The first item of ``source`` that asks more than ``max_model_len`` tokens, as ``file:line: field:
    what`` (None when all fit). Checked before any prompt is built: a trace's ``input_length`` of 1e12
    must not become a prompt. A dataset's prompt length is only known once sized; its max_tokens is."""
    for e in source.entries:
        if e.input_tokens + e.output_tokens > max_model_len:
            ask = f"{e.input_tokens:,} + {e.output_tokens:,} tokens"
            return str(
                SourceError(source.path, e.line, "input_length + output_length", _past(ask, max_model_len))
            )
    for r in source.requests:
        if r.input_tokens_target + r.max_tokens > max_model_len:
            ask = f"{r.input_tokens_target:,} + {r.max_tokens:,} tokens"
            return str(
                SourceError(
                    source.path, r.line, "input_tokens_target + max_tokens", _past(ask, max_model_len)
                )
            )
    for c in source.conversations if source.format != "text" else ():  # text lines have no max_tokens
        for turn in c.turns:
            if turn.max_tokens is not None and turn.max_tokens > max_model_len:
                ask = f"{turn.max_tokens:,} tokens"
                return str(SourceError(source.path, c.line, "max_tokens", _past(ask, max_model_len)))
    return None


def _past(ask: str, max_model_len: int) -> str:
    return f"{ask} is past the server's max_model_len {max_model_len:,}: --fit-context clamps such requests"
