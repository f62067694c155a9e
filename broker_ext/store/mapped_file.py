"""A fixed-size file mapped into memory: commit-log segments and consume-queue files.

Files are named by their 20-digit zero-padded start offset and preallocated with
``posix_fallocate`` so that writing through the mapping can never hit a full disk (which would
kill the process with SIGBUS); running out of space surfaces as ``DiskFullError`` when a file is
created instead.

Durability: ``sync`` calls ``fdatasync`` on the file. On Linux the page cache is shared between
the mapping and the file, so this writes back pages dirtied through the mapping as well; it
releases the GIL, unlike ``mmap.flush``, so it can run in a worker thread while the event loop
keeps appending. The mapping keeps its own duplicate of the descriptor; the commit log's active
segment also holds one for ``write`` (``pwrite``), closed when the segment is sealed.

A file opened ``read_only`` (``graymq broker verify``) is mapped for reading and never changed: no
preallocation; a file shorter than its size reads as if zero-filled to it.
"""

from __future__ import annotations

import errno
import mmap
import os
from pathlib import Path

from graymq.protocol.errors import DiskFullError

NAME_DIGITS = 20


def file_name(start: int) -> str:
    """``00000000001073741824`` for 1 GiB."""
    return f"{start:0{NAME_DIGITS}d}"


def list_files(directory: Path) -> list[tuple[int, Path]]:
    """(start offset, path) of every offset-named file in ``directory``, oldest first."""
    if not directory.is_dir():
        return []
    found = [
        (int(p.name), p) for p in directory.iterdir() if len(p.name) == NAME_DIGITS and p.name.isdigit()
    ]
    return sorted(found)


class MappedFile:
    """One fixed-size file, preallocated and mapped read-write; ``view`` is a memoryview of the mapping."""

    __slots__ = ("path", "start", "size", "mm", "view", "file_backed", "_write_fd")

    def __init__(self, path: Path, start: int, size: int, read_only: bool = False) -> None:
        self.path = path
        self.start = start
        self.size = size
        self._write_fd: int | None = None
        self.file_backed = True
        if read_only:
            self.mm, self.file_backed = _map_for_reading(path, size)
            self.view = memoryview(self.mm)
            return
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        actual = 0
        try:
            actual = os.fstat(fd).st_size
            if actual > size:
                raise ValueError(f"{path} is {actual} bytes, larger than the configured {size}")
            if actual < size:
                try:
                    os.posix_fallocate(fd, 0, size)
                except OSError as exc:
                    if exc.errno == errno.ENOSPC:
                        raise DiskFullError(f"no space left to create {path} ({size} bytes)") from exc
                    raise
            self.mm = mmap.mmap(fd, size)
        except BaseException:
            os.close(fd)
            if actual == 0:
                path.unlink(missing_ok=True)
            raise
        os.close(fd)
        self.view = memoryview(self.mm)

    def write(self, pos: int, data: bytes) -> None:
        """Write ``data`` at ``pos`` with ``pwrite`` (the mapping sees it: one page cache).

        A store into the mapping faults on every page it reaches first and on every page cleaned by a
        flush since; on ext4 such a fault can wait ~10 ms for a journal commit, which stalls the event
        loop and every connection with it. ``pwrite`` pays a system call instead, and never waits so.
        """
        if self._write_fd is None:
            self._write_fd = os.open(self.path, os.O_WRONLY)
        os.pwrite(self._write_fd, data, pos)

    def release_pages(self) -> None:
        """Unmap the pages this process touched (``MADV_DONTNEED``): a shared file mapping loses nothing, pages
        dirtied through it stay dirty in the page cache, and the next access maps them again from there. Only
        for the file's own pages: a read-only copy of a short file is memory of ours, whose pages are the data."""
        if self.file_backed and not self.mm.closed:
            self.mm.madvise(mmap.MADV_DONTNEED)

    def seal(self) -> None:
        """No more writes: close the write descriptor (reads go on through the mapping)."""
        if self._write_fd is not None:
            os.close(self._write_fd)
            self._write_fd = None

    @property
    def end(self) -> int:
        return self.start + self.size

    def sync(self) -> None:
        """fdatasync the file (pages written through the mapping included)."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return  # deleted meanwhile (retention): nothing left to make durable
        try:
            os.fdatasync(fd)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, str(self.path)) from exc
        finally:
            os.close(fd)

    def data_ranges(self, start: int, end: int) -> list[tuple[int, int]]:
        """The ranges of ``[start, end)`` that may hold anything but zeros, as the file system reports its data
        extents (``SEEK_DATA`` / ``SEEK_HOLE``): preallocated space never written, and whatever lies past the end
        of the file, is left out without being read. Without that support the whole range is returned."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return [(start, end)]
        ranges = []
        try:
            pos = start
            while pos < end:
                try:
                    data = os.lseek(fd, pos, os.SEEK_DATA)
                except OSError as exc:
                    if exc.errno != errno.ENXIO:  # no SEEK_DATA here: everything may be data
                        ranges.append((pos, end))
                    break
                if data >= end:
                    break
                pos = min(os.lseek(fd, data, os.SEEK_HOLE), end)
                ranges.append((data, pos))
        finally:
            os.close(fd)
        return ranges

    def zero_from(self, pos: int) -> None:
        """Discard everything from ``pos`` on: the file is cut there and extended again with zeros.

        Only for recovery (nothing else may touch the mapping meanwhile); it costs no write of the
        discarded range, unlike zeroing through the mapping.
        """
        os.truncate(self.path, pos)
        fd = os.open(self.path, os.O_RDWR)
        try:
            os.posix_fallocate(fd, 0, self.size)
        finally:
            os.close(fd)

    def close(self) -> None:
        """Unmap; views still held by readers keep the mapping alive until they are dropped."""
        self.seal()
        self.view.release()
        try:
            self.mm.close()
        except BufferError:
            pass  # a reader still holds a record view; the mapping is freed with the last one

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


def _map_for_reading(path: Path, size: int) -> tuple[mmap.mmap, bool]:
    """A read-only mapping of ``size`` bytes of ``path``, and whether it maps the file: a shorter file is copied
    into zero-filled anonymous memory instead."""
    fd = os.open(path, os.O_RDONLY)
    try:
        actual = os.fstat(fd).st_size
        if actual > size:
            raise ValueError(f"{path} is {actual} bytes, larger than the expected {size}")
        if actual == size:
            return mmap.mmap(fd, size, access=mmap.ACCESS_READ), True
        mm = mmap.mmap(-1, size)
        mm[:actual] = os.pread(fd, actual, 0)
        return mm, False
    finally:
        os.close(fd)
