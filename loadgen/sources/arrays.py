"""Big JSON arrays read on demand: ``ArrayIndex`` keeps the byte span of each element a source uses, not the
elements, and reads one when it is asked for — what ``LineIndex`` does for JSONL.

A dataset that is one JSON array (ShareGPT's own files are: ``ShareGPT_V3_unfiltered_cleaned_split.json``
is a 673 MB array) was read whole: its bytes, its text, ``json.loads``'s objects, then a ``Conversation``
per record pickled to every worker. ``scan_array`` reads the file in 256 KiB pieces and decodes one top-level
element at a time where it lies in the text read, keeping its byte span; an element longer than
``MAX_ELEMENT_BYTES`` is refused by record number.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
import re
from array import array
from collections.abc import Callable, Iterator
from typing import BinaryIO

from loadgen import strict_json
from loadgen.sources.lines import FileIndex, open_source
from loadgen.sources.model import SourceError

__all__ = ["MAX_ELEMENT_BYTES", "ArrayIndex", "scan_array"]

MAX_ELEMENT_BYTES = 64 << 20  # one record; the whole file may be any size
PIECE = 1 << 18  # 256 KiB: the text held is a few pieces

Keep = Callable[[int, object], bool]  # (record number, its decoded value) -> index it or not
_NOT_SPACE = re.compile(r"[^ \t\r\n]")


class ArrayIndex(FileIndex):
    """The elements of the JSON array in ``path`` that were kept when it was scanned: ``len``, and
    ``read(i)`` -> (record number, its JSON text)."""

    @property
    def lengths(self) -> array[int]:
        return self.columns[1]

    def where(self, number: int) -> str:
        return f"record #{number}"

    def read(self, i: int) -> tuple[int, str]:
        f = self.file()
        f.seek(self.offsets[i])
        return self.numbers[i], f.read(self.lengths[i]).decode("utf-8", "replace")


class _Scanner:
    """The top-level elements of one JSON array, read piece by piece: ``elements`` yields each element's
    (byte offset, byte length, decoded value). ``json.JSONDecoder.raw_decode`` (C) parses each element in
    place; an element that runs past the text read so far is parsed again once more is read, the window
    doubling, until ``MAX_ELEMENT_BYTES``. Only the text from the current element on is held."""

    def __init__(self, path: str, f: BinaryIO, hashed: Callable[[bytes], object]) -> None:
        self.path, self.f, self.hashed = path, f, hashed
        self.text = ""
        self.pos = 0  # the next character of text to read
        self.offset = 0  # the file's byte offset of text[pos]
        self.count = 0
        self.eof = False
        self.utf8 = codecs.getincrementaldecoder("utf-8")()
        self.read_bytes = 0

    def error(self, message: str, where: str | int | None = None, field: str | None = None) -> SourceError:
        return SourceError(self.path, where or f"record #{self.count + 1}", field or "json", message)

    def more(self, at_least: int = PIECE) -> bool:
        """Read at least ``at_least`` more bytes (False at the end of the file), dropping what was read."""
        if self.eof:
            return False
        self.text = self.text[self.pos :]
        self.pos = 0
        data = self.f.read(max(PIECE, at_least))
        self.hashed(data)
        try:
            self.text += self.utf8.decode(data, final=not data)
        except UnicodeDecodeError as exc:
            where = f"byte {self.read_bytes + exc.start}"
            raise SourceError(self.path, None, None, f"not UTF-8 text ({where}); save it as UTF-8") from None
        self.read_bytes += len(data)
        self.eof = not data
        return bool(data)

    def skip(self) -> str:
        """The next non-whitespace character (``""`` at the end of the file), pos left on it."""
        while True:
            found = _NOT_SPACE.search(self.text, self.pos)
            if found is not None:
                self.offset += found.start() - self.pos  # whitespace is ASCII: a byte a character
                self.pos = found.start()
                return self.text[self.pos]
            self.offset += len(self.text) - self.pos
            self.pos = len(self.text)
            if not self.more():
                return ""

    def elements(self) -> Iterator[tuple[int, int, object]]:
        if self.skip() != "[":
            raise self.error("expected an array of records", 1)
        self.pos, self.offset = self.pos + 1, self.offset + 1
        if self.skip() == "]":
            self.pos, self.offset = self.pos + 1, self.offset + 1
        else:
            while True:
                yield self.element()
                after = self.skip()
                self.pos, self.offset = self.pos + 1, self.offset + 1
                if after == "]":
                    break
                if after != ",":
                    what = "the file ends inside the array (is it cut short?)" if not after else f"{after!r}"
                    raise self.error(f"not valid JSON: expected ',' or ']' after the record, got {what}")
        if self.skip():
            raise self.error("not valid JSON: more data after the array's closing ']'")

    def element(self) -> tuple[int, int, object]:
        if self.skip() in ("", ",", "]"):
            raise self.error("not valid JSON: a record is missing (a stray ',' or a cut file)")
        window = PIECE
        while True:
            try:
                value, end = strict_json.raw_decode(self.text, self.pos)
            except strict_json.JsonError as exc:  # nested too deeply, an integer too long
                raise self.error(str(exc), field=exc.field) from None
            except json.JSONDecodeError as exc:
                if not _cut_short(exc, len(self.text)):  # wrong where it is, whatever follows
                    raise self.error(f"not valid JSON: {exc.msg}") from None
                if len(self.text) - self.pos > MAX_ELEMENT_BYTES:
                    raise self.error(
                        f"one record is over {MAX_ELEMENT_BYTES >> 20} MiB; split the file"
                    ) from None
                if not self.more(window):
                    raise self.error(f"not valid JSON: {exc.msg}") from None
                window *= 2
                continue
            break
        self.count += 1
        length = len(self.text[self.pos : end].encode("utf-8"))
        start, self.offset, self.pos = self.offset, self.offset + length, end
        if length > MAX_ELEMENT_BYTES:
            raise self.error(f"one record is over {MAX_ELEMENT_BYTES >> 20} MiB; split the file", self.where)
        return start, length, value

    @property
    def where(self) -> str:
        return f"record #{self.count}"


def _cut_short(exc: json.JSONDecodeError, end: int) -> bool:
    """Whether the decoder failed for want of more text (at its end, or in a string still open there)
    rather than at a fault in the text it had."""
    return exc.pos >= end - 6 or exc.msg.startswith("Unterminated string")


def scan_array(path: str, keep: Keep) -> ArrayIndex:
    """Read the JSON array in ``path`` once, in pieces (never whole), indexing the elements ``keep``
    accepts (it is handed each element's record number and value, and may raise ``SourceError``). The
    index's ``sha256`` is the file's, as ``hash_file`` gives it."""
    digest = hashlib.sha256()
    offsets, lengths, numbers = array("q"), array("q"), array("q")
    with open_source(path) as f:
        st = os.fstat(f.fileno())
        scanner = _Scanner(path, f, digest.update)
        for offset, length, value in scanner.elements():
            if keep(scanner.count, value):
                offsets.append(offset)
                lengths.append(length)
                numbers.append(scanner.count)
        while scanner.more():  # the hash is the whole file's
            pass
    return ArrayIndex(path, (offsets, lengths, numbers), st.st_size, st.st_mtime_ns, digest.hexdigest())
