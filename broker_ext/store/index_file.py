"""Key index: find messages by key (KEYS property) or msg id (UNIQ_KEY) within a topic.

Layout: one append-only file per commit-log segment under ``index/``, named like the segment,
holding fixed ENTRY records in commit-log order (one per key of each message). Puts append to a
buffer written out with one ``write`` per ``WRITE_BUFFER`` bytes, before every read of the file, at
close and before each checkpoint (so its fsync covers them). Entries a killed process had not
written are rebuilt by recovery, which rescans the log from a segment start after a crash.

There is no hash table to maintain: a lookup searches the newest file first for the 4-byte key
hash with ``mmap.rfind`` (C speed, no Python loop over entries), keeps hits aligned on an entry
boundary, and walks back in time; store timestamps never decrease, so the scan stops at ``begin_ms``.
Hits are only candidates (32-bit hashes collide): the caller verifies each by reading the record.
The top bit of every hash is set, which the high bytes of offsets and timestamps never are, so
unaligned false hits are rare.

Entries are rebuilt by recovery from the commit log: entries pointing at no sound record (past the
log end, into a hole) are dropped, missing ones are appended for records after the last entry of a
segment's file. The files of a segment are deleted with it. Opened ``read_only`` (``graymq broker
verify``), nothing is changed.
"""

from __future__ import annotations

import bisect
import functools
import mmap
import os
import struct
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path

from graymq.broker_ext.store.atomic_file import write_atomic
from graymq.broker_ext.store.mapped_file import file_name, list_files
from graymq.protocol.constants import KEY_SEPARATOR, PROPERTY_KEYS, PROPERTY_MSG_ID
from graymq.protocol.native import pick

# One entry: key hash uint32 (top bit set), commit-log offset int64, store timestamp int64 (ms).
ENTRY = struct.Struct(">Iqq")
KEY_HASH = struct.Struct(">I")
HASH_TOP_BIT = 0x8000_0000
WRITE_BUFFER = 64 * 1024  # entry bytes held before one write (about 3,000 messages)


@functools.lru_cache(maxsize=4096)
def _topic_seed(topic: str) -> int:
    return zlib.crc32(f"{topic}\x01".encode())


def key_hash(topic: str, key: str) -> int:
    return zlib.crc32(key.encode(), _topic_seed(topic)) | HASH_TOP_BIT


def index_entries_py(topic: str, properties: Mapping[str, str], physical_offset: int, store_timestamp: int) -> bytes:
    """The entries of one message: one per distinct key and one for its msg id; the reference of the compiled
    ``index_entries``."""
    keys = properties.get(PROPERTY_KEYS)
    msg_id = properties.get(PROPERTY_MSG_ID)
    seed = _topic_seed(topic)
    if not keys:  # the common case: a msg id only
        return ENTRY.pack(zlib.crc32(msg_id.encode(), seed) | HASH_TOP_BIT, physical_offset, store_timestamp) \
            if msg_id else b""
    names = keys.split(KEY_SEPARATOR)
    if msg_id:
        names.append(msg_id)
    pack = ENTRY.pack
    return b"".join([
        pack(zlib.crc32(name.encode(), seed) | HASH_TOP_BIT, physical_offset, store_timestamp)
        for name in dict.fromkeys(names) if name
    ])



index_entries = pick("index_entries", index_entries_py)

class IndexFile:
    """The entries of one commit-log segment, appended through an O_APPEND descriptor; ``size`` counts the
    bytes written, ``buffered`` the entries not written yet."""

    __slots__ = ("path", "segment_start", "fd", "size", "dirty", "buffered")

    def __init__(self, path: Path, segment_start: int, read_only: bool = False) -> None:
        self.path = path
        self.segment_start = segment_start
        self.fd = os.open(path, os.O_RDONLY if read_only else os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        size = os.fstat(self.fd).st_size
        self.size = size - size % ENTRY.size
        if self.size != size and not read_only:  # torn last entry
            os.ftruncate(self.fd, self.size)
        self.dirty = False
        self.buffered = bytearray()

    def append(self, entries: bytes) -> None:
        self.buffered += entries
        if len(self.buffered) >= WRITE_BUFFER:
            self.write_buffered()

    def write_buffered(self) -> None:
        """Write the buffered entries (loop thread only: puts fill the buffer there). On a failed write they are
        dropped, as an unwritten put's were: recovery cannot tell, a key lookup misses them."""
        if not self.buffered:
            return
        entries = bytes(self.buffered)
        self.buffered.clear()
        written = os.write(self.fd, entries)
        if written != len(entries):
            raise OSError(f"short write to {self.path}: {written} of {len(entries)} bytes")
        self.size += written
        self.dirty = True

    def entry(self, index: int) -> tuple[int, int, int]:
        self.write_buffered()
        return ENTRY.unpack(os.pread(self.fd, ENTRY.size, index * ENTRY.size))

    def read_entries(self) -> bytes:
        """Every entry of the file, buffered ones included."""
        self.write_buffered()
        return os.pread(self.fd, self.size, 0)

    def rewrite(self, entries: bytes) -> None:
        """Replace the file's entries with ``entries`` (recovery: dropping bad ones), atomically."""
        self.write_buffered()
        write_atomic(self.path, entries)
        os.close(self.fd)
        self.fd = os.open(self.path, os.O_RDWR | os.O_APPEND)
        self.size = len(entries)
        self.dirty = False

    def truncate_from(self, physical_offset: int) -> None:
        """Drop the entries pointing at or past ``physical_offset``."""
        self.write_buffered()
        count = self.size // ENTRY.size
        keep = bisect.bisect_left(range(count), physical_offset, key=lambda i: self.entry(i)[1])
        if keep < count:
            self.size = keep * ENTRY.size
            os.ftruncate(self.fd, self.size)

    def search(self, needle: bytes) -> Iterator[tuple[int, int, int]]:
        """Entries whose hash bytes equal ``needle``, newest first."""
        self.write_buffered()
        if not self.size:
            return
        with mmap.mmap(self.fd, self.size, access=mmap.ACCESS_READ) as mm:
            end = self.size
            while (pos := mm.rfind(needle, 0, end)) >= 0:
                end = pos + len(needle) - 1
                if pos % ENTRY.size == 0:
                    yield ENTRY.unpack_from(mm, pos)

    def sync(self) -> None:
        """fdatasync what was written (safe in a worker thread: leaves the buffer alone)."""
        if self.dirty:
            self.dirty = False
            try:
                os.fdatasync(self.fd)
            except OSError as exc:
                raise OSError(exc.errno, exc.strerror, str(self.path)) from exc

    def close(self) -> None:
        try:
            self.write_buffered()
        finally:
            os.close(self.fd)


class KeyIndex:
    """The index files of a store, one per commit-log segment."""

    def __init__(self, directory: Path, read_only: bool = False) -> None:
        self.directory = directory
        self.read_only = read_only
        self.files: dict[int, IndexFile] = {}

    def load(self) -> None:
        if not self.read_only:
            self.directory.mkdir(parents=True, exist_ok=True)
        for start, path in list_files(self.directory):
            self.files[start] = IndexFile(path, start, self.read_only)

    def add(self, segment_start: int, entries: bytes) -> None:
        file = self.files.get(segment_start)
        if file is None:
            file = self.files[segment_start] = IndexFile(self.directory / file_name(segment_start), segment_start)
        file.append(entries)

    def candidates(self, topic: str, key: str, begin_ms: int, end_ms: int) -> Iterator[int]:
        """Commit-log offsets of entries matching (topic, key) stored in [begin_ms, end_ms], newest first."""
        needle = KEY_HASH.pack(key_hash(topic, key))
        for start in sorted(self.files, reverse=True):
            for _, physical_offset, store_timestamp in self.files[start].search(needle):
                if store_timestamp < begin_ms:
                    return
                if store_timestamp <= end_ms:
                    yield physical_offset

    def truncate_from(self, physical_offset: int) -> None:
        """Drop entries pointing at or past ``physical_offset`` (files left empty are deleted)."""
        for start, file in list(self.files.items()):
            file.truncate_from(physical_offset)
            if not file.size:
                self.delete(start)

    def delete(self, segment_start: int) -> None:
        file = self.files.pop(segment_start, None)
        if file is not None:
            file.close()
            file.path.unlink(missing_ok=True)

    def delete_below(self, physical_offset: int) -> None:
        """Delete the files of segments that start below ``physical_offset`` (the commit log's min)."""
        for start in [s for s in self.files if s < physical_offset]:
            self.delete(start)

    def write_buffered(self) -> None:
        """Write every file's buffered entries (loop thread; before a checkpoint is taken)."""
        for file in self.files.values():
            file.write_buffered()

    def sync(self) -> None:
        """fdatasync the written entries (worker thread); call ``write_buffered`` first on the loop."""
        for file in list(self.files.values()):
            file.sync()

    def close(self) -> None:
        for file in self.files.values():
            file.close()
        self.files.clear()
