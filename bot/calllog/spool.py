"""The on-disk spool: records that could not reach the database wait here, in order.

Each process appends to its own JSON-lines file, holding an exclusive ``flock`` on it for
its lifetime. A file whose lock is free belongs to a process that is gone (crashed or
stopped with the database down): the next process adopts its records, ahead of its own.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import uuid
from collections.abc import Iterable
from pathlib import Path

from bot.calllog.records import Record

log = logging.getLogger(__name__)

SUFFIX = ".jsonl"


class Spool:
    """An append-only, fsync'd JSON-lines file of records, replayed front to back."""

    def __init__(
        self, directory: Path, name: str = "calllog", *, max_bytes: int | None = None
    ) -> None:
        self.directory = directory
        self._name = name
        #: The file's bound: an append that would pass it drops the oldest records first.
        self.max_bytes = max_bytes
        self._fd: int | None = None
        self.path: Path | None = None

    def open(self) -> None:
        """Create and lock this process's spool file."""
        self.directory.mkdir(parents=True, exist_ok=True)
        stem = f"{self._name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        # Locked under a name adoption ignores, then renamed: no other process can adopt
        # (and delete) the file between its creation and its lock.
        tmp = self.directory / f"{stem}.new"
        fd = os.open(tmp, os.O_CREAT | os.O_RDWR | os.O_APPEND, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self.path = self.directory / f"{stem}{SUFFIX}"
        os.replace(tmp, self.path)
        self._fd = fd

    def adopt_orphans(self) -> int:
        """Move the records of spool files no live process holds into this one; count them."""
        adopted = 0
        for path in sorted(self.directory.glob(f"*{SUFFIX}"), key=_mtime):
            if path == self.path:
                continue
            try:
                fd = os.open(path, os.O_RDWR)
            except FileNotFoundError:
                continue  # another process adopted it first
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # its process is alive
                records = list(_parse(_read_all(fd), path))
                self.append(records)
                path.unlink()
                adopted += len(records)
                if records:
                    log.warning("adopted %d call-log records from %s", len(records), path.name)
            finally:
                os.close(fd)
        return adopted

    def append(self, records: Iterable[Record], replayed: int = 0) -> tuple[bool, int]:
        """Append records and fsync (blocking: run it off the event loop).

        ``replayed``: bytes at the file's start already in the database. When the append
        would pass ``max_bytes``, the file is rewritten without those and without as many
        of the oldest records as it takes to fit. Returns (rewritten, records dropped); a
        rewritten file's replay starts again at offset 0.
        """
        lines = [(rec.to_json() + "\n").encode() for rec in records]
        if not lines:
            return False, 0
        fd = self._require()
        size = os.fstat(fd).st_size
        added = sum(len(line) for line in lines)
        if self.max_bytes is not None and size + added > self.max_bytes:
            return True, self._rewrite(fd, replayed, lines)
        _write_all(fd, b"".join(lines))
        os.fsync(fd)
        return False, 0

    def _rewrite(self, fd: int, replayed: int, new: list[bytes]) -> int:
        assert self.max_bytes is not None
        with open(os.dup(fd), "rb") as f:
            f.seek(replayed)
            kept = [line for line in f.readlines() if line.endswith(b"\n")]
        kept += new
        total = sum(len(line) for line in kept)
        dropped = 0
        while dropped < len(kept) and total > self.max_bytes:
            total -= len(kept[dropped])
            dropped += 1
        kept = kept[dropped:]
        os.ftruncate(fd, 0)
        _write_all(fd, b"".join(kept))
        os.fsync(fd)
        return dropped

    def read_from(self, offset: int, limit: int) -> tuple[list[Record], int]:
        """Up to ``limit`` records from byte ``offset``, and the offset after them."""
        fd = self._require()
        size = os.fstat(fd).st_size
        records: list[Record] = []
        with open(os.dup(fd), "rb") as f:
            f.seek(offset)
            while len(records) < limit and offset < size:
                line = f.readline()
                if not line.endswith(b"\n"):
                    break  # an append in progress (never torn in our own file otherwise)
                offset += len(line)
                records.extend(_parse([line], self.path))
        return records, offset

    def clear(self) -> None:
        """Empty the file once every record in it is in the database."""
        fd = self._require()
        os.ftruncate(fd, 0)
        os.fsync(fd)

    def size(self) -> int:
        """Bytes waiting in the spool file."""
        return os.fstat(self._require()).st_size

    def close(self) -> None:
        """Release the lock; an empty file is removed, a non-empty one waits for adoption."""
        if self._fd is None:
            return
        if self.size() == 0 and self.path is not None:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        os.close(self._fd)
        self._fd = None

    def _require(self) -> int:
        if self._fd is None:
            raise RuntimeError("spool is not open")
        return self._fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0


def _read_all(fd: int) -> list[bytes]:
    with open(os.dup(fd), "rb") as f:
        return f.readlines()


def _parse(lines: Iterable[bytes], path: Path | None) -> Iterable[Record]:
    for line in lines:
        try:
            yield Record.from_json(line.decode())
        except (ValueError, UnicodeDecodeError):
            # Only a write cut short by a crash can leave a bad line (the last one).
            log.warning("skipped a torn line in %s", path)
