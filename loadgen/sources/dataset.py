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
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping

from loadgen.sources.model import (
    Conversation,
    DatasetFormat,
    DatasetOptions,
    DialogTurn,
    Source,
    SourceError,
    check_tokens,
    decode_text,
    file_hash,
    jsonl_lines,
    read_bytes,
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

Record = tuple[int | str, object]  # (where: a line number or "record #N", the decoded value)


def load_dataset(options: DatasetOptions) -> Source:
    """Read and validate ``options.path``; raise ``SourceError`` (one line) on anything wrong."""
    path = options.path
    data = read_bytes(path)
    text = decode_text(path, data)
    fmt = options.format or detect_format(path, text)
    skipped = 0
    conversations: list[Conversation] = []
    if fmt == "text":
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                conversations.append(Conversation((DialogTurn(line),), line=number, raw=True))
    else:
        for where, value in json_records(path, text):
            conversation = read_record(path, where, value, fmt)
            if conversation is None:
                skipped += 1
            else:
                conversations.append(conversation)
    if not conversations:
        raise SourceError(path, None, None, f"no usable {fmt} record (a user turn to send) in the file")
    turns = sum(len(c.turns) for c in conversations)
    note = f"{len(conversations)} {fmt} records, {turns} turns" + (
        f" ({skipped} without a user turn skipped)" if skipped else ""
    )
    return Source(
        kind="dataset",
        path=path,
        content_hash=file_hash(data),
        format=fmt,
        note=note,
        conversations=tuple(conversations),
        dataset=options,
        skipped=skipped,
    )


def detect_format(path: str, text: str) -> DatasetFormat:
    if path.lower().endswith(".txt"):
        return "text"
    head = text.lstrip()[:1]
    if head not in ("[", "{"):
        return "text"
    for where, value in json_records(path, text):
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
    return "text"


def json_records(path: str, text: str) -> Iterator[Record]:
    """A JSON array's elements (``record #N``) or a JSONL file's lines (line numbers)."""
    if text.lstrip().startswith("["):
        try:
            values = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SourceError(
                path, exc.lineno, "json", f"not valid JSON: {exc.msg} (column {exc.colno})"
            ) from None
        except RecursionError:
            raise SourceError(path, 1, "json", "nested too deeply to read (thousands of levels)") from None
        if not isinstance(values, list):
            raise SourceError(path, 1, "json", "expected an array of records")
        for index, value in enumerate(values, 1):
            yield f"record #{index}", value
        return
    yield from jsonl_lines(path, text)


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
