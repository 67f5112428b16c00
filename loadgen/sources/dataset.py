"""Datasets: a user's file of prompts or conversations → ``Source(kind="dataset")``.

Formats (``format`` in ``[dataset]`` or ``--dataset-format``; detected when not given):

* ``sharegpt``: a JSON array or JSONL of records with ``conversations``, a list of ``{"from", "value"}``
  (``human``/``user``, ``gpt``/``chatgpt``/``assistant``/``model``/``bard``/``bing``, ``system``).
* ``openai``: JSONL (or a JSON array) of records with ``messages`` (``{"role", "content"}``, content a
  string or a list of ``{"type": "text", "text"}`` parts) or ``prompt`` (a string), and optional
  ``max_tokens`` (or ``max_completion_tokens``).
* ``text``: one prompt per non-empty line.

Detection: a ``.txt`` file is text; otherwise a file whose first non-blank character is ``[`` or ``{`` is
JSON (an array) or JSONL, and its first record says which: ``conversations`` → sharegpt, ``messages`` or
``prompt`` → openai; anything else is text. Each record becomes a ``Conversation``: system messages first,
then each user message with the assistant message after it as that turn's recorded reply (consecutive user
messages are joined). A record without a user message is skipped (the count is in the note); a record that
is malformed is a ``SourceError`` naming the file, the line (or record number) and the field.

Memory: a file is validated record by record and then held as an index (``DatasetRecords``: 16 bytes a
line of text or JSONL, 24 an element of a JSON array), each worker reading the records it replays from the
file: memory grows with what is used, not with the file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import overload

from loadgen.sources.arrays import ArrayIndex, scan_array
from loadgen.sources.lines import LineIndex, scan_lines
from loadgen.sources.model import (
    Conversation,
    DatasetFormat,
    DatasetOptions,
    DialogTurn,
    Source,
    SourceError,
    check_tokens,
    jsonl_lines,
    parse_json,
)

SHAREGPT_ROLES: Mapping[str, str] = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "chatgpt": "assistant",
    "assistant": "assistant",
    "model": "assistant",
    "bard": "assistant",
    "bing": "assistant",
    "system": "system",
}
OPENAI_ROLES = ("system", "developer", "user", "assistant")


class DatasetRecords(Sequence[Conversation]):
    """A dataset's records, read from the file when asked for (``LineIndex`` for text and JSONL,
    ``ArrayIndex`` for a JSON array): validated once when the run starts, then only the offsets are held
    (and pickled to the workers)."""

    def __init__(self, index: LineIndex | ArrayIndex, fmt: DatasetFormat) -> None:
        self.lines = index
        self.fmt = fmt

    def __len__(self) -> int:
        return len(self.lines)

    @overload
    def __getitem__(self, i: int) -> Conversation: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[Conversation]: ...

    def __getitem__(self, i: int | slice) -> Conversation | Sequence[Conversation]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        number, text = self.lines.read(i)
        if isinstance(self.lines, ArrayIndex):
            found = _element_record(self.lines.path, number, text, self.fmt)
        else:
            found = _line_record(self.lines.path, number, text, self.fmt)
        if found is None:  # the file changed under the same size and mtime: say so, never replay garbage
            raise SourceError(
                self.lines.path, self.lines.where(number), None, "changed since the run read it"
            )
        return found


def _element_record(path: str, number: int, text: str, fmt: DatasetFormat) -> Conversation | None:
    """One element of a JSON array as a record (None: a record without a user turn)."""
    where = f"record #{number}"
    return read_record(path, where, parse_json(path, where, text), fmt)


def _line_record(path: str, number: int, text: str, fmt: DatasetFormat) -> Conversation | None:
    """One line as a record (None: blank, or a record without a user turn)."""
    if not text.strip():
        return None
    if fmt == "text":
        return Conversation((DialogTurn(text),), line=number, raw=True)
    return read_record(path, number, parse_json(path, number, text), fmt)


class _Tally:
    """What a scan kept: the records skipped (no user turn) and the turns of those kept."""

    def __init__(self) -> None:
        self.skipped = 0
        self.turns = 0

    def kept(self, found: Conversation | None) -> bool:
        """Whether ``found`` is kept (it is a record), counted either way."""
        if found is None:
            self.skipped += 1
            return False
        self.turns += len(found.turns)
        return True


def _scan(path: str, fmt: DatasetFormat) -> tuple[DatasetRecords, int, int]:
    """The file's records indexed, each validated once; how many were skipped (no user turn), and the
    turns of those kept."""
    tally = _Tally()

    def keep(number: int, text: str) -> bool:
        return bool(text.strip()) and tally.kept(_line_record(path, number, text, fmt))

    return DatasetRecords(scan_lines(path, keep), fmt), tally.skipped, tally.turns


def _first_line(path: str) -> str:
    """The file's first non-blank line (at most 1 MiB of it), for detection: the file is not read whole
    (a JSON array is often one line)."""
    try:
        with open(path, "rb") as f:
            while raw := f.readline(1 << 20):
                if raw.strip():
                    return raw.decode("utf-8", "replace")
    except OSError as exc:
        raise SourceError(path, None, None, f"cannot read: {exc.strerror or exc}") from None
    return ""


def load_dataset(options: DatasetOptions) -> Source:
    """Read and validate ``options.path``; raise ``SourceError`` (one line) on anything wrong. A text or
    JSONL file is indexed, not held (``DatasetRecords``); a JSON array is read whole."""
    path = options.path
    first = _first_line(path).lstrip()
    if first.startswith("[") and options.format != "text" and not path.lower().endswith(".txt"):
        return _load_array(options)
    fmt = options.format or detect_format(path, first)
    records, skipped, turns = _scan(path, fmt)
    return _source(options, records, fmt, (skipped, turns), records.lines.sha256)


def _load_array(options: DatasetOptions) -> Source:
    """A JSON array, scanned element by element (``scan_array``): the first record says the format when
    none is given."""
    path = options.path
    fmt: DatasetFormat | None = options.format
    tally = _Tally()

    def keep(number: int, value: object) -> bool:
        nonlocal fmt
        where = f"record #{number}"
        if fmt is None:
            fmt = _record_format(path, where, value)
        return tally.kept(read_record(path, where, value, fmt))

    index = scan_array(path, keep)
    records = DatasetRecords(index, fmt or "openai")
    return _source(options, records, records.fmt, (tally.skipped, tally.turns), index.sha256)


def _source(
    options: DatasetOptions,
    conversations: Sequence[Conversation],
    fmt: DatasetFormat,
    counts: tuple[int, int],
    sha: str,
) -> Source:
    path = options.path
    skipped, turns = counts
    if not conversations:
        raise SourceError(path, None, None, f"no usable {fmt} record (a user turn to send) in the file")
    note = f"{len(conversations)} {fmt} records, {turns} turns" + (
        f" ({skipped} without a user turn skipped)" if skipped else ""
    )
    return Source(
        kind="dataset",
        path=path,
        content_hash=sha,
        format=fmt,
        note=note,
        conversations=conversations,
        dataset=options,
        skipped=skipped,
    )


def detect_format(path: str, first: str) -> DatasetFormat:
    """The format of a text or JSONL file from its first non-blank line (a JSON array is read apart)."""
    if path.lower().endswith(".txt") or not first.lstrip().startswith("{"):
        return "text"
    for where, value in jsonl_lines(path, first):
        return _record_format(path, where, value)
    return "text"


def _record_format(path: str, where: int | str, value: object) -> DatasetFormat:
    """The format the first record says: ``conversations`` → sharegpt, ``messages``/``prompt`` → openai."""
    if isinstance(value, dict):
        if "conversations" in value:
            return "sharegpt"
        if "messages" in value or "prompt" in value:
            return "openai"
    raise SourceError(
        path,
        where,
        None,
        "neither 'conversations' (ShareGPT) nor 'messages'/'prompt' (OpenAI-style): give the format "
        "(--dataset-format sharegpt|openai|text)",
    )


def read_record(path: str, where: int | str, value: object, fmt: DatasetFormat) -> Conversation | None:
    if not isinstance(value, dict):
        raise SourceError(path, where, None, f"expected a JSON object, got {type(value).__name__}")
    line = where if isinstance(where, int) else int(where.rpartition("#")[2])
    if fmt == "sharegpt":
        return _sharegpt(path, where, value, line)
    max_tokens = _max_tokens(path, where, value)
    if "messages" in value:
        return _dialog(path, where, _openai_messages(path, where, value["messages"]), line, max_tokens)
    prompt = value.get("prompt")
    if not isinstance(prompt, str):
        raise SourceError(path, where, "prompt", "expected 'messages' (a list) or 'prompt' (a string)")
    if not prompt.strip():
        return None
    return Conversation((DialogTurn(prompt, None, max_tokens),), line=line, raw=True)


def _sharegpt(path: str, where: int | str, value: dict[str, object], line: int) -> Conversation | None:
    turns = value.get("conversations")
    if not isinstance(turns, list):
        raise SourceError(path, where, "conversations", 'expected a list of {"from", "value"} objects')
    messages: list[tuple[str, str]] = []
    for i, turn in enumerate(turns):
        if not isinstance(turn, dict):
            raise SourceError(
                path, where, f"conversations[{i}]", "expected an object with 'from' and 'value'"
            )
        speaker, text = turn.get("from"), turn.get("value")
        role = SHAREGPT_ROLES.get(speaker.lower()) if isinstance(speaker, str) else None
        if role is None:
            known = ", ".join(SHAREGPT_ROLES)
            raise SourceError(
                path, where, f"conversations[{i}].from", f"unknown speaker {speaker!r}; use {known}"
            )
        if not isinstance(text, str):
            raise SourceError(path, where, f"conversations[{i}].value", "expected a string")
        messages.append((role, text))
    return _dialog(path, where, messages, line, None)


def _openai_messages(path: str, where: int | str, messages: object) -> list[tuple[str, str]]:
    if not isinstance(messages, list):
        raise SourceError(path, where, "messages", 'expected a list of {"role", "content"} objects')
    out: list[tuple[str, str]] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise SourceError(path, where, f"messages[{i}]", "expected an object with 'role' and 'content'")
        role, content = message.get("role"), message.get("content")
        if role not in OPENAI_ROLES:
            raise SourceError(
                path, where, f"messages[{i}].role", f"expected one of {', '.join(OPENAI_ROLES)}, got {role!r}"
            )
        if isinstance(content, list):
            parts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
            if not all(isinstance(p, str) for p in parts):
                raise SourceError(
                    path, where, f"messages[{i}].content", "a text part without a 'text' string"
                )
            content = "\n".join(str(p) for p in parts)
        if not isinstance(content, str):
            raise SourceError(
                path, where, f"messages[{i}].content", "expected a string or a list of text parts"
            )
        out.append(("system" if role == "developer" else str(role), content))
    return out


def _max_tokens(path: str, where: int | str, value: dict[str, object]) -> int | None:
    for key in ("max_tokens", "max_completion_tokens"):
        if key in value:
            given = value[key]
            if not isinstance(given, int) or isinstance(given, bool) or given < 1:
                raise SourceError(path, where, key, f"expected a positive integer, got {given!r}")
            return check_tokens(path, where, key, given)
    return None


def _dialog(
    path: str, where: int | str, messages: list[tuple[str, str]], line: int, max_tokens: int | None
) -> Conversation | None:
    """Messages → turns: system text first, each user message with the reply recorded after it."""
    system: list[str] = []
    turns: list[DialogTurn] = []
    user: str | None = None
    for role, text in messages:
        if role == "system":
            if turns or user is not None:
                raise SourceError(path, where, "messages", "a system message after the conversation began")
            system.append(text)
        elif role == "user":
            user = text if user is None else f"{user}\n\n{text}"
        elif user is not None:  # an assistant reply (one before any user turn has nothing to answer)
            turns.append(DialogTurn(user, text, max_tokens))
            user = None
    if user is not None:
        turns.append(DialogTurn(user, None, max_tokens))
    if not turns:
        return None
    return Conversation(tuple(turns), system="\n\n".join(system), line=line)
