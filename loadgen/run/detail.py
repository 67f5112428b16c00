"""The per-request export (``--save-requests-detail``): one CSV row per request a step's measurement window
counted, in a companion file beside the record (``run.jsonl`` → ``run.requests.csv``).

The workers build a ``RequestRow`` per finished request only when the flag is on and ship them in the
deltas of the window each request was sent in; ``RequestDetail`` keeps the rows of the measurement windows
until their step is reported, then writes them (flushed and fsync'ed) with the step's index, as the record
writes its step line: Ctrl-C or a dead server leaves every reported step's rows on disk. Warm-up requests
and those sent between steps are not written (no step counts them). ``COLUMNS`` is the file's header, in
order; docs/records.md ("Per-request export") says what each column holds.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from typing import TextIO

from loadgen import measures
from loadgen.config import SetupError
from loadgen.format import csv_text
from loadgen.run.clock import ClockPair, read_clocks
from loadgen.run.protocol import RequestRow

COLUMNS = (
    "step",  # the step line's ``step`` in the record (counted from 1, as on the screen and in steps.csv)
    "request_id",  # sent as X-Request-Id
    "worker",
    "outcome",  # ok | error | cancelled
    "error_kind",  # connect, ttft_timeout, http_status, ... ("" unless an error)
    "http_status",
    "t_s",  # the intended start, seconds since the run began
    "intended_ns",  # host monotonic clock (the record's window_t0_ns / window_t1_ns clock)
    "sent_ns",
    "first_token_ns",
    "last_token_ns",
    "end_ns",
    measures.TTFT_MS,  # from the intended start, like the histograms
    measures.E2E_MS,
    measures.LAG_MS,  # sent - intended: the schedule lag
    measures.DECODE_TOK_S,  # (output_tokens - 1) / (last token - first token)
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "tokens_exact",  # 1: output_tokens from the server's usage, 0: counted from the stream
    "max_tokens",
    "finish_reason",
    "bucket",  # the profile's bucket that drew the request
    "cache_class",  # hit | miss | "" (the workload's prefix-cache class)
    "session_id",
    "turn",
    "sent_unix_ns",  # sent_ns in Unix time (the record header's clock): joins a server's log or traces
    "first_answer_ns",  # reasoning models: the first answer token (the same as first_token_ns without)
    measures.TTFAT_MS,  # time to first answer token, from the intended start
    measures.REASONING_MS,  # first token to first answer token (0 when the model did not reason)
    "reasoning_tokens",
    "reasoning_exact",  # 1: reasoning_tokens from usage's completion_tokens_details, 0: counted chunks
    "first_tool_ns",  # tool calls: the first tool-call delta ("" when the reply called no tool)
    measures.TTFTC_MS,  # time to the first tool-call delta, from the intended start
    "tool_tokens",  # the calls' arguments' tokens
)


def detail_path(record_path: str) -> str:
    """``runs/x.jsonl`` → ``runs/x.requests.csv``."""
    stem, ext = os.path.splitext(record_path)
    return (stem if ext == ".jsonl" else record_path) + ".requests.csv"


def _ms(t1: int | None, t0: int) -> str:
    return "" if t1 is None else f"{(t1 - t0) / 1e6:.3f}"


def _opt(value: object) -> object:
    return "" if value is None else value


def csv_row(step: int, row: RequestRow, run_t0_ns: int, offset_ns: int = 0) -> list[object]:
    """``row`` as the file's cells, in ``COLUMNS`` order (derived figures computed here, off the hot path)."""
    decode = ""
    if row.first_token_ns is not None and row.last_token_ns is not None and row.output_tokens >= 2:
        span = row.last_token_ns - row.first_token_ns
        decode = f"{(row.output_tokens - 1) * 1e9 / span:.3f}" if span > 0 else ""
    return [
        step,
        row.request_id,
        row.worker,
        row.outcome,
        row.error_kind,
        _opt(row.http_status),
        f"{(row.intended_ns - run_t0_ns) / 1e9:.6f}",
        row.intended_ns,
        row.sent_ns,
        _opt(row.first_token_ns),
        _opt(row.last_token_ns),
        row.end_ns,
        _ms(row.first_token_ns, row.intended_ns),
        _ms(row.end_ns, row.intended_ns),
        _ms(row.sent_ns, row.intended_ns) if row.sent_ns > 0 else "",
        decode,
        _opt(row.input_tokens),
        row.output_tokens,
        _opt(row.cached_tokens),
        int(row.tokens_exact),
        row.max_tokens,
        row.finish_reason,
        row.bucket,
        row.cache_class,
        row.session_id,
        row.turn,
        row.sent_ns + offset_ns if row.sent_ns > 0 else "",
        _opt(row.first_answer_ns),
        _ms(row.first_answer_ns, row.intended_ns),
        _ms(row.first_answer_ns, row.first_token_ns) if row.first_token_ns is not None else "",
        row.reasoning_tokens,
        int(row.reasoning_exact),
        _opt(row.first_tool_ns),
        _ms(row.first_tool_ns, row.intended_ns),
        row.tool_tokens,
    ]


class RequestDetail:
    """The companion file once ``open`` made one, else nothing (every call a no-op)."""

    def __init__(
        self, file: TextIO | None = None, path: str | None = None, run_t0_ns: int = 0, offset_ns: int = 0
    ) -> None:
        self.file = file
        self.path = path if file is not None else None
        self.run_t0_ns = run_t0_ns
        self.offset_ns = offset_ns  # Unix minus monotonic (the record header's clock)
        self.writer = csv.writer(file, lineterminator="\n") if file is not None else None
        self.pending: dict[int, list[RequestRow]] = {}  # measurement window id -> its rows so far
        self.floor = 0  # windows below it were reported (or never will be): their late rows are dropped

    @classmethod
    def open(cls, record_path: str, run_t0_ns: int, clocks: ClockPair | None = None) -> RequestDetail:
        """Create the file beside ``record_path`` and write its header line; never overwrites one."""
        path = detail_path(record_path)
        try:
            file = open(path, "x", encoding="utf-8", newline="")  # noqa: SIM115 - closed by close()
        except FileExistsError:
            raise SetupError(f"{path}: already exists; choose another --out") from None
        except OSError as exc:
            raise SetupError(f"{path}: cannot create the request detail: {exc.strerror or exc}") from None
        detail = cls(file, path, run_t0_ns, (clocks or read_clocks()).offset_ns)
        assert detail.writer is not None
        detail.writer.writerow(COLUMNS)
        detail.sync()
        return detail

    def add(self, window: int, rows: Sequence[RequestRow]) -> None:
        """Rows shipped for ``window``. Kept until a step reports its window (``write_step``); a warm-up's and
        the rows sent between steps are dropped then: their windows come before the next step's."""
        if rows and self.file is not None and window >= self.floor:
            self.pending.setdefault(window, []).extend(rows)

    def write_step(self, step: int, window: int) -> int:
        """The reported step's rows (its window's), written and synced; the rows of earlier windows that
        no step reported are dropped. Returns how many rows were written."""
        rows = self.pending.pop(window, [])
        self.floor = window + 1
        for stale in [w for w in self.pending if w < self.floor]:
            del self.pending[stale]
        if self.writer is None:
            return 0
        self.writer.writerows(
            [csv_text(c) for c in csv_row(step, row, self.run_t0_ns, self.offset_ns)] for row in rows
        )
        self.sync()
        return len(rows)

    def sync(self) -> None:
        if self.file is not None:
            self.file.flush()
            os.fsync(self.file.fileno())

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None
            self.writer = None
