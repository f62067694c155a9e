"""Receipt handles: opaque to the client, signed by the broker, naming exactly one delivery of one message.

A handle is ``base64url(payload) "." base64url(HMAC-SHA256(secret, payload))[:22]``; the payload is the JSON of
``ReceiptHandle``. The secret is the broker's own, created once in its store directory (``pop_secret``, mode
0600), so handles stay valid across a restart and a handle of another broker or an edited one is refused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
from dataclasses import asdict, dataclass
from pathlib import Path

from graymq.broker_ext.store.atomic_file import write_atomic

SECRET_BYTES = 32
_SIGNATURE_CHARS = 22  # 128 bits of the HMAC, base64url


class InvalidReceiptHandle(ValueError):
    """Not a handle this broker signed."""


@dataclass(frozen=True, slots=True)
class ReceiptHandle:
    """One delivery: the message's queue and offset, its attempt (1-based) and the delivery's serial (unique per
    broker run and delivery: a newer delivery of the same message makes older handles stale)."""

    group: str
    topic: str
    queue_id: int
    offset: int
    attempt: int
    serial: int
    popped_at_ms: int
    invisible_ms: int


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class ReceiptSigner:
    """``sign(handle) -> str`` and ``verify(str) -> handle`` with one secret.

    >>> signer = ReceiptSigner(b"k" * 32)
    >>> handle = ReceiptHandle("G", "T", 1, 7, 1, 3, 1000, 30000)
    >>> signer.verify(signer.sign(handle)) == handle
    True
    """

    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def _mac(self, payload: str) -> str:
        return _b64(hmac.new(self._secret, payload.encode(), hashlib.sha256).digest())[:_SIGNATURE_CHARS]

    def sign(self, handle: ReceiptHandle) -> str:
        payload = _b64(json.dumps(asdict(handle), separators=(",", ":")).encode())
        return f"{payload}.{self._mac(payload)}"

    def verify(self, text: str) -> ReceiptHandle:
        payload, _, mac = text.partition(".")
        if not payload or not hmac.compare_digest(self._mac(payload), mac):
            raise InvalidReceiptHandle("the receipt handle was not issued by this broker")
        try:
            return ReceiptHandle(**json.loads(_unb64(payload)))
        except (ValueError, TypeError) as exc:  # signed by us, so only a different layout gets here
            raise InvalidReceiptHandle(f"the receipt handle cannot be read: {exc}") from None


def load_secret(path: Path) -> bytes:
    """The broker's handle secret at ``path``, created (0600, written atomically) when absent."""
    if path.exists():
        secret = path.read_bytes()
        if len(secret) >= SECRET_BYTES:
            return secret
    secret = secrets.token_bytes(SECRET_BYTES)
    write_atomic(path, secret)
    os.chmod(path, 0o600)
    return secret
