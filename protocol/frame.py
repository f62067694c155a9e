"""Wire framing after TubeMQ: ``MsgToken(4) SerialNo(4) ListSize(4) { Length(4) Data }*``, big-endian.

The data blocks of one frame, concatenated, are one serialized ``Envelope``. Every length is
checked against the limits *before* any buffer for it is allocated; any violation raises
``ProtocolError`` and the connection that sent it must be closed.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from graymq.protocol.errors import ProtocolError
from graymq.protocol.native import pick

MSG_TOKEN = 0xFF7FF4FE
# token (uint32), serial number (uint32), number of data blocks (uint32)
FRAME_HEADER = struct.Struct(">III")
# length of one data block; signed so that a negative length on the wire is detectable
BLOCK_LENGTH = struct.Struct(">i")

DEFAULT_MAX_FRAME_SIZE = 16 * 1024 * 1024
BLOCK_SIZE = 1024 * 1024  # encoder splits payloads into blocks of at most this many bytes
MAX_BLOCKS = 4096


@dataclass(frozen=True, slots=True)
class Frame:
    serial_no: int
    payload: bytes


def encode_frame_py(serial_no: int, payload: bytes, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> bytes:
    """One frame carrying ``payload`` (split into blocks of at most ``BLOCK_SIZE`` bytes); the reference of the
    compiled ``encode_frame``."""
    size = len(payload)
    if size > max_frame_size:
        raise ProtocolError(f"payload of {size} bytes exceeds the frame limit of {max_frame_size}")
    if not 0 <= serial_no <= 0xFFFFFFFF:
        raise ProtocolError(f"serial number {serial_no} outside uint32")
    if size <= BLOCK_SIZE:
        return b"".join((FRAME_HEADER.pack(MSG_TOKEN, serial_no, 1), BLOCK_LENGTH.pack(size), payload))
    view = memoryview(payload)
    parts = [FRAME_HEADER.pack(MSG_TOKEN, serial_no, (size + BLOCK_SIZE - 1) // BLOCK_SIZE)]
    for start in range(0, size, BLOCK_SIZE):
        block = view[start : start + BLOCK_SIZE]
        parts.append(BLOCK_LENGTH.pack(len(block)))
        parts.append(block)  # type: ignore[arg-type]
    return b"".join(parts)


class BufferBudget:
    """Bytes of partial frames buffered over many connections, held under one limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def move(self, before: int, after: int) -> None:
        """A connection's buffered bytes went from ``before`` to ``after``; ``ProtocolError`` over the limit
        (the growth is counted anyway: the caller closes the connection, which gives it back)."""
        self.used += after - before
        if after > before and self.used > self.limit:
            raise ProtocolError(f"partial frames over every connection exceed {self.limit} bytes: closing the "
                                f"connection holding {after}")


class FrameDecoder:
    """Incremental decoder: feed it bytes as they arrive, in any chunking; it returns whole frames.

    After a ``ProtocolError`` the decoder is poisoned: the stream cannot be resynchronised.
    """

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE, max_blocks: int = MAX_BLOCKS) -> None:
        self.max_frame_size = max_frame_size
        self.max_blocks = max_blocks
        self._buf = bytearray()
        self._failed: ProtocolError | None = None

    def feed(self, data: bytes) -> list[Frame]:
        if self._failed is not None:
            raise self._failed
        self._buf += data
        frames: list[Frame] = []
        start = 0
        buf, max_frame_size, max_blocks = self._buf, self.max_frame_size, self.max_blocks
        try:
            while (parsed := parse_frame(buf, start, max_frame_size, max_blocks)) is not None:
                serial_no, payload, start = parsed
                frames.append(Frame(serial_no, payload))
        except ProtocolError as exc:
            self._failed = exc
            self._buf.clear()
            raise
        if start:
            del self._buf[:start]
        return frames

    def eof(self) -> None:
        """Call when the stream ends: raises ``ProtocolError`` if a frame was cut short."""
        if self._failed is None and self._buf:
            self._failed = ProtocolError(f"truncated frame: stream ended with {len(self._buf)} bytes pending")
            raise self._failed

    def release(self) -> None:
        """Drop the bytes of a partial frame once the stream is closed. Their memory goes back at once: left to
        the decoder, it would wait for the garbage collector to break its connection's reference cycles."""
        self._buf = bytearray()

    @property
    def pending(self) -> int:
        """Bytes received that do not form a whole frame yet."""
        return len(self._buf)


def parse_frame_py(buf: bytearray, start: int, max_frame_size: int, max_blocks: int) -> tuple[int, bytes, int] | None:
    """The frame at ``start`` of ``buf`` as ``(serial_no, payload, end)``, ``None`` while bytes are missing;
    ``ProtocolError`` on a bad token, block count, block length or size. The reference of ``parse_frame``."""
    end = len(buf)
    if end - start < 4:
        # A wrong token is reported as soon as its bytes are there, even partially.
        if end > start and not _token_prefix_ok(buf[start:end]):
            raise ProtocolError(f"bad frame token {bytes(buf[start:end]).hex()}")
        return None
    if end - start < FRAME_HEADER.size:
        if int.from_bytes(buf[start : start + 4], "big") != MSG_TOKEN:
            raise ProtocolError(f"bad frame token {bytes(buf[start : start + 4]).hex()}")
        return None
    token, serial_no, list_size = FRAME_HEADER.unpack_from(buf, start)
    if token != MSG_TOKEN:
        raise ProtocolError(f"bad frame token 0x{token:08x}")
    if not 1 <= list_size <= max_blocks:
        raise ProtocolError(f"frame block count {list_size} outside 1..{max_blocks}")
    pos = start + FRAME_HEADER.size
    total = 0
    spans: list[tuple[int, int]] = []
    for _ in range(list_size):
        if end - pos < BLOCK_LENGTH.size:
            return None
        (length,) = BLOCK_LENGTH.unpack_from(buf, pos)
        if length < 0:
            raise ProtocolError(f"negative block length {length}")
        total += length
        if total > max_frame_size:
            raise ProtocolError(f"frame of at least {total} bytes exceeds the limit of {max_frame_size}")
        pos += BLOCK_LENGTH.size
        if end - pos < length:
            return None
        spans.append((pos, pos + length))
        pos += length
    payload = bytes(buf[spans[0][0] : spans[0][1]]) if len(spans) == 1 else b"".join(buf[a:b] for a, b in spans)
    return serial_no, payload, pos


def _token_prefix_ok(prefix: bytearray) -> bool:
    return MSG_TOKEN.to_bytes(4, "big").startswith(bytes(prefix))


encode_frame = pick("encode_frame", encode_frame_py)
parse_frame = pick("parse_frame", parse_frame_py)
