"""Decoding JSON that came from outside (a server's answer, a file a user was handed): ``loads`` and
``raw_decode`` are ``json``'s, bounded against the two inputs that make the standard decoder raise something
other than a JSON error, and turned into ``JsonError`` (a ``ValueError``, as ``json.JSONDecodeError`` is, so
a caller's ``except ValueError`` already holds it) with one line saying which:

- nesting past Python's recursion limit (``[[[[…``: a few KB raise ``RecursionError``);
- an integer of more than ``sys.get_int_max_str_digits()`` digits (4,300 by default: a plain ``ValueError``
  "Exceeds the limit"). Its field is found by decoding once more with such integers kept aside, so the error
  names it (``max_tokens``, ``messages[0].content``): the fast path is untouched.

A leaf: the standard library only.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["JsonError", "loads", "raw_decode"]

_DECODER = json.JSONDecoder()
DEEP = "nested too deeply to read (thousands of levels)"


class JsonError(ValueError):
    """JSON the standard decoder cannot hold: ``str`` is one line; ``field`` the path of the value at fault
    (``None``: the whole document)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class _LongInt:
    __slots__ = ("digits",)

    def __init__(self, digits: int) -> None:
        self.digits = digits


def _kept_aside(text: str) -> _LongInt | int:
    digits = len(text.lstrip("-"))
    limit = sys.get_int_max_str_digits()
    return _LongInt(digits) if limit and digits > limit else int(text)


def _path(value: object) -> tuple[str, _LongInt] | None:
    """The first ``_LongInt`` in ``value`` and its path (``a.b[2]``), walked without recursion."""
    todo: list[tuple[str, object]] = [("", value)]
    while todo:
        path, node = todo.pop()
        if isinstance(node, _LongInt):
            return path, node
        if isinstance(node, dict):
            todo.extend((f"{path}.{k}" if path else str(k), v) for k, v in reversed(node.items()))
        elif isinstance(node, list):
            todo.extend((f"{path}[{i}]", v) for i, v in reversed(list(enumerate(node))))
    return None


def _too_long(decode: Callable[[json.JSONDecoder], object]) -> JsonError:
    """The error for a document holding an over-long integer, naming its field."""
    limit = sys.get_int_max_str_digits()
    try:
        found = _path(decode(json.JSONDecoder(parse_int=_kept_aside)))
    except (ValueError, RecursionError):
        found = None
    if found is None:
        return JsonError(f"an integer of more than {limit:,} digits: not a number ramp can use")
    path, long = found
    return JsonError(
        f"an integer of {long.digits:,} digits (at most {limit:,} are read): not a number ramp can use",
        path or None,
    )


def _over_limit(exc: ValueError) -> bool:
    return not isinstance(exc, json.JSONDecodeError) and "Exceeds the limit" in str(exc)


def _text(text: str | bytes | bytearray) -> str:
    if isinstance(text, str):
        return text
    return bytes(text).decode(json.detect_encoding(text), "surrogatepass")


def loads(text: str | bytes | bytearray) -> Any:  # noqa: ANN401 - json.loads's own type
    """``json.loads(text)``; ``JsonError`` for nesting past the recursion limit or an over-long integer,
    ``json.JSONDecodeError`` (a ``ValueError`` too) for invalid JSON."""
    try:
        return json.loads(text)
    except RecursionError:
        raise JsonError(DEEP) from None
    except ValueError as exc:
        if not _over_limit(exc):
            raise
        raise _too_long(lambda d: d.decode(_text(text))) from None


def raw_decode(text: str, pos: int = 0) -> tuple[Any, int]:
    """``json.JSONDecoder().raw_decode(text, pos)`` with the same bounds as ``loads``."""
    try:
        return _DECODER.raw_decode(text, pos)
    except RecursionError:
        raise JsonError(DEEP) from None
    except ValueError as exc:
        if not _over_limit(exc):
            raise
        raise _too_long(lambda d: d.raw_decode(text, pos)[0]) from None
