"""Every physical line of a JSON Lines file, whatever bytes it holds, with its 1-based line number.

DuckDB's text readers need a delimiter and an encoding: a NUL byte, an invalid UTF-8 sequence or an overlong line
makes them cut, skip or refuse lines. This reader splits the raw bytes on `\\n` itself (numpy over chunks of the
file, so memory is bounded by the chunk size whatever the file's size) and hands DuckDB Arrow batches of
`(source_line, line)` with `line` as bytes: decoding, NUL and JSON checks happen in SQL (sql/ingest/gateway_lines.sql),
where a line that fails any of them becomes a quarantined row with its number, never a missing one.

- A line is what lies between two `\\n` (a trailing `\\r` is JSON whitespace); the text after the last `\\n` is a
  line too. A file that ends with `\\n` has no empty line after it.
- A UTF-8 byte-order mark at the start of the file is dropped; a UTF-16 or UTF-32 file stops with a message
  saying so (its lines could only be quarantined one by one, which hides the real problem).
- A line longer than `max_line` bytes is counted and reported (`problem`, naming the limit and the line), and its
  bytes are skipped without being held in memory; a gzip file's lines alike.
- gzip is decompressed as a stream (by ISA-L's igzip, 2-2.5x zlib's speed: the gzip module's interface); a
  truncated or corrupt gzip stops the file (its lines cannot be counted).
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from isal import igzip, isal_zlib

from tokenledger.errors import InputFileError

CHUNK_BYTES = 16 << 20
MAX_LINE_BYTES = 16 << 20
# Large binary: a chunk's offsets are 64-bit, so a chunk plus a carried line may exceed 2 GiB without overflow.
# file_index: the file's position in the list a reader was given (0 for a reader of one file).
SCHEMA = pa.schema([("source_line", pa.int64()), ("line", pa.large_binary()), ("problem", pa.string()),
                    ("file_index", pa.int32())])

_UTF8_BOM = b"\xef\xbb\xbf"
_WIDE_BOMS = {b"\xff\xfe\x00\x00": "UTF-32", b"\x00\x00\xfe\xff": "UTF-32", b"\xff\xfe": "UTF-16",
              b"\xfe\xff": "UTF-16"}


# What a damaged gzip raises while it is read: a bad header or CRC, a stream cut short, a corrupt deflate block.
_GZIP_ERRORS = (gzip.BadGzipFile, EOFError, zlib.error, isal_zlib.error)


def _open(path: Path) -> BinaryIO:
    return igzip.open(path, "rb") if path.name.endswith(".gz") else path.open("rb")  # type: ignore[return-value]


def _check_encoding(path: Path, head: bytes) -> bytes:
    """`head` without a UTF-8 byte-order mark; an error for a file in a wide Unicode encoding."""
    for bom, name in _WIDE_BOMS.items():
        if head.startswith(bom):
            raise InputFileError(
                f"{path}: is {name} text (it starts with a {name} byte-order mark); tokenledger reads UTF-8 JSON "
                f"Lines. Convert it (for example `iconv -f {name} -t UTF-8`) or move it out of the landing folder, "
                "then re-run the day.")
    return head[len(_UTF8_BOM):] if head.startswith(_UTF8_BOM) else head


# The start of the problem of a line over the limit (`too_long_problem`), which readers.check_some_records counts.
TOO_LONG = "line longer than "


def too_long_problem(line_no: int, max_line: int = MAX_LINE_BYTES) -> str:
    """Why line `line_no` is not read: it holds more than `max_line` bytes (DuckDB's JSON reader is given the same
    limit, `maximum_object_size`)."""
    size = f"{max_line // (1 << 20)} MiB" if max_line % (1 << 20) == 0 else f"{max_line:,} bytes"
    return (f"{TOO_LONG}{size} (line {line_no:,}): tokenledger reads a line of at most {max_line:,} bytes, so "
            "this one is not read as a record")


class _Batches:
    """Turns chunks of bytes into batches of whole lines, carrying an incomplete last line to the next chunk."""

    def __init__(self, max_line: int, file_index: int = 0) -> None:
        self.max_line = max_line
        self.file_index = file_index
        self.line_no = 0
        self.carry = b""
        self.skipping = False  # inside a line already reported as too long: drop bytes up to its end

    def _batch(self, buf: bytes, ends: np.ndarray) -> pa.RecordBatch:
        """The lines of `buf` ending (exclusive) at `ends`, the first starting at 0."""
        count = len(ends)
        offsets = np.empty(count + 1, dtype=np.int64)
        offsets[0] = 0
        offsets[1:] = ends
        lengths = np.diff(offsets)
        numbers = np.arange(self.line_no + 1, self.line_no + 1 + count, dtype=np.int64)
        self.line_no += count
        too_long = lengths > self.max_line + 1  # + 1: the line's own newline
        lines = pa.LargeBinaryArray.from_buffers(pa.large_binary(), count, [None, pa.py_buffer(offsets),
                                                                            pa.py_buffer(buf)])
        problem = pa.nulls(count, pa.string())
        if too_long.any():
            mask = pa.array(too_long)
            lines = pc.if_else(mask, pa.scalar(None, pa.large_binary()), lines)
            said = np.full(count, None, dtype=object)
            said[too_long] = [self._too_long(int(n)) for n in numbers[too_long]]
            problem = pa.array(said, pa.string())
        return pa.record_batch([pa.array(numbers), lines, problem, self._file_indexes(count)], schema=SCHEMA)

    def _file_indexes(self, count: int) -> pa.Array:
        return pa.array(np.full(count, self.file_index, dtype=np.int32))

    def _too_long(self, line_no: int) -> str:
        return too_long_problem(line_no, self.max_line)

    def _reported_too_long(self) -> pa.RecordBatch:
        self.line_no += 1
        return pa.record_batch([pa.array([self.line_no], pa.int64()), pa.nulls(1, pa.large_binary()),
                                pa.array([self._too_long(self.line_no)], pa.string()), self._file_indexes(1)],
                               schema=SCHEMA)

    def feed(self, data: bytes) -> Iterator[pa.RecordBatch]:
        if self.skipping:
            end = data.find(b"\n")
            if end < 0:
                return
            data = data[end + 1:]
            self.skipping = False
        buf = self.carry + data if self.carry else data
        newlines = np.flatnonzero(np.frombuffer(buf, dtype=np.uint8) == 10)
        if len(newlines):
            ends = newlines + 1
            yield self._batch(buf, ends)
            self.carry = buf[int(ends[-1]):]
        else:
            self.carry = buf
        if len(self.carry) > self.max_line:
            yield self._reported_too_long()
            self.carry = b""
            self.skipping = True

    def finish(self) -> Iterator[pa.RecordBatch]:
        if self.carry and not self.skipping:
            yield self._batch(self.carry, np.array([len(self.carry)], dtype=np.int64))
        self.carry = b""


def line_batches(path: Path, chunk_bytes: int = CHUNK_BYTES, max_line: int = MAX_LINE_BYTES, file_index: int = 0
                 ) -> Iterator[pa.RecordBatch]:
    """Arrow batches of `(source_line, line, problem, file_index)` covering every physical line of `path` in
    order."""
    batches = _Batches(max_line, file_index)
    try:
        with _open(path) as f:
            first = True
            while data := f.read(chunk_bytes):
                if first:
                    data = _check_encoding(path, data)
                    first = False
                yield from batches.feed(data)
            yield from batches.finish()
    except _GZIP_ERRORS as exc:
        raise InputFileError(
            f"{path}: is not a readable gzip file ({exc}); {batches.line_no:,} line(s) were read before the damage, "
            "so the file cannot be reconciled line by line. Replace it with a complete copy (or move it out of the "
            "landing folder), then re-run the day.") from None


def physical_lines(path: Path, max_line: int = MAX_LINE_BYTES) -> int | None:
    """How many lines `line_batches` gives `path`, when DuckDB's JSON reader cannot read any of them otherwise; else
    None, and the file is read line by line.

    The JSON reader skips a line of whitespace without a trace (so its rows, numbered in order, would no longer be
    the physical lines: that is what the count is compared with) and counts a vertical tab or form feed as
    whitespace around a record, where JSON does not. A line of `max_line` bytes or more, a file in a wide Unicode
    encoding or a damaged gzip is left to `line_batches` too, which says what it is. Bytes are only counted here,
    a chunk at a time: memory does not grow with the file."""
    lines = 0
    run = 0  # bytes since the last newline: the line being read
    try:
        with _open(path) as f:
            first = True
            while data := f.read(max_line // 2 or 1):
                if first:
                    if any(data.startswith(bom) for bom in _WIDE_BOMS):
                        return None
                    data = data[len(_UTF8_BOM):] if data.startswith(_UTF8_BOM) else data
                    first = False
                if b"\x0b" in data or b"\x0c" in data:
                    return None
                end = data.rfind(b"\n")
                if end < 0:
                    run += len(data)
                else:
                    # A chunk is shorter than max_line, so only a line running across chunks can reach it.
                    if run + data.find(b"\n") >= max_line:
                        return None
                    lines += data.count(b"\n")
                    run = len(data) - end - 1
                if run >= max_line:
                    return None
    except (OSError, *_GZIP_ERRORS):
        return None
    return lines + (1 if run else 0)


class LineStream:
    """The line batches of `paths`, one file after the other. DuckDB reports an error raised while it scans them
    as its own (an InvalidInputException holding a Python traceback): `failure` keeps the InputFileError itself,
    so that the reader's caller can raise it with its message intact."""

    def __init__(self, paths: Path | list[Path], chunk_bytes: int = CHUNK_BYTES, max_line: int = MAX_LINE_BYTES
                 ) -> None:
        files = [paths] if isinstance(paths, Path) else paths
        self.failure: InputFileError | None = None
        self._batches = (batch for index, path in enumerate(files)
                         for batch in line_batches(path, chunk_bytes, max_line, file_index=index))

    def reader(self) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(SCHEMA, self)

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        return self

    def __next__(self) -> pa.RecordBatch:
        try:
            return next(self._batches)
        except InputFileError as exc:
            self.failure = exc
            raise
