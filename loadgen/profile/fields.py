"""Reading typed values out of a parsed TOML document, and pointing at the line of a bad one.

Owns ``FieldReader`` (typed getters — string, choice, number, integer, boolean, distribution, table, array of
tables — that raise ``ProfileError`` as ``file:line: where key 'k': what to do``) and ``Locator``, which
finds a key's line by scanning the source text: the N-th ``[[bucket]]`` header for bucket N, then the first
``key =`` line before the next header (or a ``[table.key]`` sub-table header). A heuristic: right for
ordinary files, it falls back to the table header's line, then line 1.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NoReturn, TypeVar

from loadgen.distributions import Distribution, DistributionError, parse_distribution
from loadgen.profile.model import ProfileError

Choice = TypeVar("Choice", bound=str)

_HEADER_RE = re.compile(r"^\s*(\[\[|\[)\s*([^\[\]]+?)\s*(\]\]|\])\s*(#.*)?$")


def _norm_name(name: str) -> str:
    return ".".join(part.strip().strip("\"'") for part in name.split("."))


@dataclass(frozen=True, slots=True)
class Where:
    """Where a value sits, for error messages: its table (and index in an array of tables) and a label."""

    table: str | None  # None = top level
    index: int | None = None  # for arrays of tables, 0-based
    label: str = "top level"

    @classmethod
    def item(cls, table: str, index: int, t: Mapping[str, object]) -> Where:
        """The ``index``-th table of the array ``[[table]]``: labelled by its number, and by its name when
        it has one (``[[bucket]] #2 "long"``)."""
        name = t.get("name")
        label = f"[[{table}]] #{index + 1}" + (f' "{name}"' if isinstance(name, str) else "")
        return cls(table, index, label)


class Locator:
    """Finds the line of a key by scanning the source: a heuristic, see the module docstring."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.headers: list[tuple[int, str, bool]] = []  # (0-based line, name, is_array)
        for i, line in enumerate(self.lines):
            m = _HEADER_RE.match(line)
            if m and (m.group(1) == "[[") == (m.group(3) == "]]"):
                self.headers.append((i, _norm_name(m.group(2)), m.group(1) == "[["))

    def _table_start(self, where: Where) -> int | None:
        if where.table is None:
            return None
        seen = 0
        for i, name, _ in self.headers:
            if name == where.table:
                if where.index is None or seen == where.index:
                    return i
                seen += 1
        return None

    def _region_end(self, start: int) -> int:
        for i, _, _ in self.headers:
            if i > start:
                return i
        return len(self.lines)

    def _find_key(self, begin: int, end: int, key: str) -> int | None:
        pattern = re.compile(r"^\s*(\"|')?" + re.escape(key) + r"(\"|')?\s*(=|\.)")
        for i in range(begin, end):
            if pattern.match(self.lines[i]):
                return i
        return None

    def line(self, where: Where, key: str | None) -> int:
        start = self._table_start(where)
        if where.table is not None and start is None:
            return 1
        begin = 0 if start is None else start + 1
        if key is None:
            return begin if start is not None else 1
        head = key.split(".")[0]
        found = self._find_key(begin, self._region_end(start if start is not None else -1), head)
        if found is not None:
            return found + 1
        # [table.key] sub-table after this table's header
        sub = f"{where.table}.{head}" if where.table else head
        for i, name, _ in self.headers:
            if i >= begin and name == sub:
                return i + 1
        return start + 1 if start is not None else 1


def show_value(v: object) -> str:
    if isinstance(v, str):
        s = '"' + v + '"'
    elif isinstance(v, bool):
        s = "true" if v else "false"
    elif isinstance(v, dict):
        s = "a table"
    elif isinstance(v, list):
        s = "a list" if len(repr(v)) > 40 else repr(v)
    else:
        s = repr(v)
    return s if len(s) <= 48 else s[:45] + "..."


def is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


class FieldReader:
    """Typed getters over one source file; every failure is a ``ProfileError`` naming its line."""

    def __init__(self, shown: str, text: str) -> None:
        self.shown = shown
        self.locator = Locator(text)

    def fail(self, where: Where, key: str | None, msg: str) -> NoReturn:
        line = self.locator.line(where, key)
        at = where.label if key is None else f"{where.label} key '{key}'"
        raise ProfileError(f"{self.shown}:{line}: {at}: {msg}", path=self.shown, line=line, key=key)

    # -- typed getters ---------------------------------------------------------------------------

    def check_keys(self, where: Where, table: Mapping[str, object], allowed: Iterable[str]) -> None:
        allowed = list(allowed)
        for key in table:
            if key not in allowed:
                close = difflib.get_close_matches(key, allowed, n=1)
                hint = f"did you mean '{close[0]}'? " if close else ""
                self.fail(where, key, f"unknown key; {hint}allowed: {', '.join(allowed)}")

    def string(
        self,
        where: Where,
        table: Mapping[str, object],
        key: str,
        default: str | None,
        choices: tuple[str, ...] = (),
    ) -> str | None:
        if key not in table:
            return default
        v = table[key]
        if not isinstance(v, str) or not v.strip():
            expect = " | ".join(f'"{c}"' for c in choices) if choices else "a non-empty string"
            self.fail(where, key, f"expected {expect}, got {show_value(v)}")
        if choices and v not in choices:
            self.fail(
                where, key, f"expected one of {' | '.join(repr(c) for c in choices)}, got {show_value(v)}"
            )
        return v

    def choice(
        self,
        where: Where,
        table: Mapping[str, object],
        key: str,
        default: Choice,
        choices: tuple[Choice, ...],
    ) -> Choice:
        """A string that must be one of ``choices``, typed as the closed set it belongs to."""
        value = self.string(where, table, key, default, choices)
        return next((c for c in choices if c == value), default)

    def number(
        self,
        where: Where,
        table: Mapping[str, object],
        key: str,
        default: float | None,
        *,
        minimum: float = 0.0,
        exclusive: bool = False,
        maximum: float | None = None,
        integer: bool = False,
    ) -> float | None:
        if key not in table:
            return default
        v = table[key]
        kind = "an integer" if integer else "a number"
        bound = f"> {minimum:g}" if exclusive else f">= {minimum:g}"
        if maximum is not None:
            bound += f" and <= {maximum:g}"
        if not is_number(v) or (integer and not isinstance(v, int)):
            self.fail(where, key, f"expected {kind} {bound}, got {show_value(v)}")
        assert isinstance(v, (int, float))
        if v < minimum or (exclusive and v == minimum) or (maximum is not None and v > maximum):
            self.fail(where, key, f"expected {kind} {bound}, got {show_value(v)}")
        return v

    def integer(
        self, where: Where, table: Mapping[str, object], key: str, default: int | None, *, minimum: int = 1
    ) -> int | None:
        v = self.number(where, table, key, default, minimum=minimum, integer=True)
        return None if v is None else int(v)

    def boolean(
        self, where: Where, table: Mapping[str, object], key: str, default: bool | None
    ) -> bool | None:
        if key not in table:
            return default
        v = table[key]
        if not isinstance(v, bool):
            self.fail(where, key, f"expected true or false, got {show_value(v)}")
        return v

    def dist(self, where: Where, table: Mapping[str, object], key: str, *, integer: bool) -> Distribution:
        try:
            return parse_distribution(table[key], integer=integer)
        except DistributionError as exc:
            self.fail(where, key, str(exc))

    def section(self, doc: Mapping[str, object], key: str) -> dict[str, object] | None:
        if key not in doc:
            return None
        v = doc[key]
        if not isinstance(v, dict):
            self.fail(Where(None), key, f"expected a [{key}] table, got {show_value(v)}")
        return v

    def array_of_tables(self, doc: Mapping[str, object], key: str) -> list[dict[str, object]]:
        if key not in doc:
            return []
        v = doc[key]
        if isinstance(v, dict):
            line_where = Where(key, None, f"[{key}]")
            self.fail(
                line_where, None, f"write [[{key}]] (double brackets: one table per {key}), not [{key}]"
            )
        if not isinstance(v, list) or not all(isinstance(x, dict) for x in v):
            self.fail(Where(None), key, f"expected [[{key}]] tables, got {show_value(v)}")
        return v
