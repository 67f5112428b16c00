"""A run's actual requests, saved (``--save-requests FILE``) and replayed (``--requests FILE``).

Each line is one request as it was sent: ``intended_ns`` (its intended start, CLOCK_MONOTONIC, shared by
every worker on the host), ``worker`` and ``seq`` (the order a worker built them in), ``session`` and
``turn``, ``api``, ``model``, ``max_tokens``, ``input_tokens_target`` and ``messages`` (OpenAI-style
``{"role", "content"}``) or ``prompt``; ``sampling`` holds the body parameters it was sent with, for the
reader (a replay sends the replaying profile's ``[sampling]``, so that a managed API is not sent a
self-hosted server's extensions). Each worker appends whole lines with one ``write`` each to a file opened
``O_APPEND``, so the lines of several workers never interleave; a replay orders them by intended time.

A replay keeps the file's order, prompts and lengths: in open loop each request is sent once at its own
time (``t_s``: seconds after the file's first, divided by ``--time-scale``), in closed loop the users take
them in order. A hand-written file may give ``t_s`` instead of ``intended_ns`` (or neither: all at 0).
"""

from __future__ import annotations

import json
import math
import os
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import overload

from loadgen.config import APIS, Api, chat_like
from loadgen.sources.lines import LineIndex, scan_lines
from loadgen.sources.model import (
    RecordedRequest,
    Source,
    SourceError,
    check_span,
    check_tokens,
    parse_json,
)
from loadgen.types import RequestSpec


class RequestLog:
    """Appends each request a worker sends to the ``--save-requests`` file (or does nothing: no path)."""

    def __init__(self, path: str | None, worker: int) -> None:
        self.worker = worker
        self.seq = 0
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if path else None

    def write(self, spec: RequestSpec, intended_ns: int) -> None:
        if self.fd is None:
            return
        line: dict[str, object] = {
            "intended_ns": intended_ns,
            "worker": self.worker,
            "seq": self.seq,
            "session": spec.session_id,
            "turn": spec.turn,
            "api": spec.api,
            "model": spec.model,
            "max_tokens": spec.max_tokens,
            "input_tokens_target": spec.input_tokens_target,
        }
        if chat_like(spec.api):
            line["messages"] = [{"role": role, "content": text} for role, text in spec.messages]
        else:
            line["prompt"] = spec.prompt
        line["sampling"] = dict(spec.extra_body)
        self.seq += 1
        os.write(self.fd, (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8"))

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class RecordedRequests(Sequence[RecordedRequest]):
    """A request file's requests in time order, each read from the file when asked for (``LineIndex``):
    validated once when the run starts, then only offsets and times are held (and pickled to workers)."""

    def __init__(self, lines: LineIndex, times: array[float]) -> None:
        self.lines = lines  # in time order
        self.times = times  # seconds after the file's first request, in the same order

    def __len__(self) -> int:
        return len(self.lines)

    @overload
    def __getitem__(self, i: int) -> RecordedRequest: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[RecordedRequest]: ...

    def __getitem__(self, i: int | slice) -> RecordedRequest | Sequence[RecordedRequest]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        number, text = self.lines.read(i)
        path = self.lines.path
        value = parse_json(path, number, text)
        if not isinstance(value, dict):
            raise SourceError(path, number, None, "changed since the run read it")
        return replace(_row(path, number, value)[3], t_s=self.times[i])


def load_requests(path: str) -> Source:
    """Read and validate the file line by line (never whole); hold it as offsets in time order."""
    keys: list[tuple[float, int, int]] = []
    apis: set[str] = set()

    def keep(number: int, text: str) -> bool:
        if not text.strip():
            return False
        value = parse_json(path, number, text)
        if not isinstance(value, dict):
            raise SourceError(path, number, None, f"expected a JSON object, got {type(value).__name__}")
        t, worker, seq, request = _row(path, number, value)
        keys.append((t, worker, seq))
        apis.add(request.api)
        return True

    scanned = scan_lines(path, keep)
    if not keys:
        raise SourceError(path, None, None, "no requests in the file")
    # the file's order is not trusted: by time, then worker and sequence
    order = sorted(range(len(keys)), key=keys.__getitem__)
    first, last = keys[order[0]][0], keys[order[-1]][0]
    check_span(path, scanned.numbers[order[-1]], "t_s", last - first)  # intended_ns read as t_s
    if len(apis) > 1:
        raise SourceError(
            path, None, "api", "the file mixes chat and completions requests; replay one API per run"
        )
    lines = LineIndex(
        path,
        array("q", (scanned.offsets[i] for i in order)),
        array("q", (scanned.numbers[i] for i in order)),
        scanned.size,
        scanned.mtime_ns,
        scanned.sha256,
    )
    requests = RecordedRequests(lines, array("d", (keys[i][0] - first for i in order)))
    duration = last - first
    api = apis.pop()
    return Source(
        kind="requests",
        path=path,
        content_hash=scanned.sha256,
        format=api,
        note=f"{len(requests)} {api} requests over {duration:g} s",
        requests=requests,
        request_times=requests.times,
        duration_s=duration,
    )


def _int(path: str, line: int, value: Mapping[str, object], key: str, default: int | None, low: int) -> int:
    given = value.get(key, default)
    if given is None:
        raise SourceError(path, line, key, "missing")
    if not isinstance(given, int) or isinstance(given, bool) or given < low:
        raise SourceError(path, line, key, f"expected a whole number >= {low}, got {given!r}")
    return given


def _row(path: str, line: int, value: Mapping[str, object]) -> tuple[float, int, int, RecordedRequest]:
    api = value.get("api", "chat")
    if api not in APIS:
        raise SourceError(path, line, "api", f"expected one of {', '.join(APIS)}, got {api!r}")
    chat: Api = "chat" if api == "chat" else "completions"
    messages: tuple[tuple[str, str], ...] = ()
    prompt = ""
    if chat == "chat":
        raw = value.get("messages")
        if not isinstance(raw, list) or not raw:
            raise SourceError(path, line, "messages", 'expected a non-empty list of {"role", "content"}')
        pairs = []
        for i, m in enumerate(raw):
            if (
                not isinstance(m, dict)
                or not isinstance(m.get("role"), str)
                or not isinstance(m.get("content"), str)
            ):
                raise SourceError(path, line, f"messages[{i}]", 'expected {"role": str, "content": str}')
            pairs.append((str(m["role"]), str(m["content"])))
        messages = tuple(pairs)
    else:
        given = value.get("prompt")
        if not isinstance(given, str) or not given:
            raise SourceError(path, line, "prompt", "expected a non-empty string (completions requests)")
        prompt = given
    if "intended_ns" in value:
        t = _int(path, line, value, "intended_ns", None, 0) / 1e9
    else:
        t_s = value.get("t_s", 0.0)
        if isinstance(t_s, bool) or not isinstance(t_s, (int, float)) or not math.isfinite(t_s) or t_s < 0:
            raise SourceError(path, line, "t_s", f"expected seconds >= 0, got {t_s!r}")
        t = float(t_s)
    request = RecordedRequest(
        t_s=0.0,
        api=chat,
        max_tokens=check_tokens(path, line, "max_tokens", _int(path, line, value, "max_tokens", None, 1)),
        messages=messages,
        prompt=prompt,
        input_tokens_target=check_tokens(
            path, line, "input_tokens_target", _int(path, line, value, "input_tokens_target", 0, 0)
        ),
        session=_int(path, line, value, "session", 0, 0),
        turn=_int(path, line, value, "turn", 0, 0),
        line=line,
    )
    return t, _int(path, line, value, "worker", 0, 0), _int(path, line, value, "seq", line, 0), request
