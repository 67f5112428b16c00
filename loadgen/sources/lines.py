"""Big line files read on demand: ``LineIndex`` keeps the byte offset of each line a source uses, not the
lines, and reads one when it is asked for.

A 50 MB text dataset held whole cost ~600 MB of RSS (its bytes, its text, a list of lines, an object per
record), and again in every worker it was pickled to. The index is 16 bytes a line (offset and line number,
two ``array('q')``), pickled as bytes; each worker opens the file itself and reads the lines it replays, so
memory grows with what is used, not with the file. The file's size and mtime are checked when a process
first opens it: a file changed after its hash was taken would replay other requests than the record says.
"""

from __future__ import annotations

import hashlib
import os
from array import array
from collections.abc import Callable, Iterator
from typing import BinaryIO

from loadgen.sources.model import SourceError

__all__ = ["FileIndex", "LineIndex", "open_source", "scan_lines"]

Keep = Callable[[int, str], bool]  # (line number, its text without the line end) -> index it or not


def open_source(path: str) -> BinaryIO:
    """``path`` opened for reading bytes, or ``SourceError`` saying why not."""
    try:
        return open(path, "rb")  # noqa: SIM115 - the caller closes it
    except OSError as exc:
        raise SourceError(path, None, None, f"cannot read: {exc.strerror or exc}") from None


class FileIndex:
    """The spans of a file kept when it was scanned (``columns``: equal-length ``array('q')``s, the first
    the spans' byte offsets) and the file's identity (size, mtime, sha256). The file is opened at the
    first read and checked to be the one scanned. Picklable (the open file is not part of its state)."""

    def __init__(
        self, path: str, columns: tuple[array[int], ...], size: int, mtime_ns: int, sha256: str
    ) -> None:
        self.path = path
        self.columns = columns
        self.size = size
        self.mtime_ns = mtime_ns
        self.sha256 = sha256
        self._file: BinaryIO | None = None

    def __len__(self) -> int:
        return len(self.columns[0])

    @property
    def offsets(self) -> array[int]:
        return self.columns[0]

    @property
    def numbers(self) -> array[int]:
        """Each span's line or record number (the last column)."""
        return self.columns[-1]

    def file(self) -> BinaryIO:
        return self._file if self._file is not None else self._open()

    def _open(self) -> BinaryIO:
        f = open_source(self.path)  # held for the process's life, closed with it
        st = os.fstat(f.fileno())
        if st.st_size != self.size or st.st_mtime_ns != self.mtime_ns:
            f.close()
            raise SourceError(self.path, None, None, "changed since the run read it; start the run again")
        self._file = f
        return f

    def __getstate__(self) -> tuple[str, tuple[bytes, ...], int, int, str]:
        return (self.path, tuple(c.tobytes() for c in self.columns), self.size, self.mtime_ns, self.sha256)

    def __setstate__(self, state: tuple[str, tuple[bytes, ...], int, int, str]) -> None:
        self.path, columns, self.size, self.mtime_ns, self.sha256 = state
        self.columns = tuple(array("q", raw) for raw in columns)
        self._file = None


class LineIndex(FileIndex):
    """The lines of ``path`` that were kept when it was scanned: ``len``, and ``read(i)`` -> (line
    number, text)."""

    def __init__(
        self, path: str, offsets: array[int], numbers: array[int], size: int, mtime_ns: int, sha256: str
    ) -> None:
        super().__init__(path, (offsets, numbers), size, mtime_ns, sha256)

    def where(self, number: int) -> int:
        return number

    def read(self, i: int) -> tuple[int, str]:
        f = self.file()
        f.seek(self.offsets[i])
        raw = f.readline()
        return self.numbers[i], raw.decode("utf-8", "replace").rstrip("\r\n")


def _lines(f: BinaryIO, path: str, hashed: Callable[[bytes], object]) -> Iterator[tuple[int, int, str]]:
    """(offset, line number, text) of every line, each handed to ``hashed`` as it is read."""
    offset = 0
    for number, raw in enumerate(f, 1):
        hashed(raw)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            where = offset + exc.start
            raise SourceError(
                path, number, None, f"not UTF-8 text (byte {where}); save it as UTF-8"
            ) from None
        yield offset, number, text.rstrip("\r\n")
        offset += len(raw)


def scan_lines(path: str, keep: Keep) -> LineIndex:
    """Read ``path`` once, line by line (never whole), indexing the lines ``keep`` accepts; ``keep`` may
    raise ``SourceError`` for a bad line. The index's ``sha256`` is the file's, as ``hash_file`` gives it."""
    digest = hashlib.sha256()
    offsets, numbers = array("q"), array("q")
    with open_source(path) as f:
        st = os.fstat(f.fileno())
        for offset, number, text in _lines(f, path, digest.update):
            if keep(number, text):
                offsets.append(offset)
                numbers.append(number)
    return LineIndex(path, offsets, numbers, st.st_size, st.st_mtime_ns, digest.hexdigest())
