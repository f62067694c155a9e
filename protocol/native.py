"""Picks the compiled hot path (``graymq.protocol._speedups``, a Cython extension built at install) or the
pure-Python reference functions it mirrors.

``GRAYMQ_PURE=1`` forces the pure path. When the extension is missing (no compiler at install, a source
checkout never built) the pure path is used and ONE warning line says why. ``SPEEDUPS`` is the compiled
module, or ``None`` on the pure path; ``REASON`` says which path runs and why.

Why Cython rather than mypyc: a prototype of both on the same code (CPython 3.11, 1 KiB bodies, CPU µs a call,
best of 5, the shared 2-core machine at load 10-13): encode_record pure 2.31, mypyc 2.60, Cython 1.56;
encode_frame of 64 KiB pure 2.12, mypyc 2.78, Cython 1.81. mypyc compiles the same ``struct``/``join`` calls
(no gain); Cython writes each byte string once in C. Cython also: encode_properties 1.42 → 0.48, frame parse
of 64 KiB 6.63 → 2.03, batch decode 2.75 → 1.94 a record; index_entries no gain (0.75 / 0.81: its cost is
the CRC calls: see below). The batched send path in one process (frame parse, request parse, store
append, answer frame): 22.9 → 17.3 µs a message; the client's batch decode 4.9 → 2.8 µs a message. Then
the batch's per-message loops of the send path (``to_puts``, ``queue_offsets``, ``place_puts``: the broker
profile's largest own costs, ``python -m graymq.bench profile``): request parse to answer in one process, min of 30
windows of 20 batches of 100 x 1 KiB, load 15-19: 8.7-10.1 → 7.5-7.7 CPU µs a message. Then a SEND_BATCH's
messages read from its wire bytes (``wire_puts``, which replaced a compiled loop over the parsed messages: 2.2 →
0.86 µs a message), the properties section joined then checked once (1.83 → 1.19 µs a record with the encode),
key and tag hashes by a table CRC inside the module (the Python call to zlib's cost more than the bytes): the
same path 6.9 → 5.5 µs a message (64 x 1 KiB).
"""

from __future__ import annotations

import logging
import os
from types import ModuleType
from typing import TypeVar

log = logging.getLogger(__name__)
F = TypeVar("F")


def _load() -> tuple[ModuleType | None, str]:
    if os.environ.get("GRAYMQ_PURE", "") not in ("", "0"):
        return None, "pure Python (GRAYMQ_PURE is set)"
    try:
        from graymq.protocol import _speedups  # type: ignore[attr-defined]
    except ImportError as exc:
        reason = f"pure Python: the compiled graymq.protocol._speedups is not available ({exc})"
        log.warning("graymq runs its %s; reinstall with a C compiler to build it, GRAYMQ_PURE=1 to silence", reason)
        return None, reason
    return _speedups, "compiled (graymq.protocol._speedups)"


SPEEDUPS, REASON = _load()


def pick(name: str, pure: F) -> F:
    """The compiled function ``name`` when the compiled path runs, else ``pure`` (its reference)."""
    return pure if SPEEDUPS is None else getattr(SPEEDUPS, name)  # type: ignore[no-any-return]
