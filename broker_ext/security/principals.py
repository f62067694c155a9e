"""The principals a broker authenticates connections against: token digests and rights, from the name server.

The name server lists them at ``GET /v1/principals/digests`` (the SHA-256 of each token, never the token, and
the access key and secret key of those that have one: stock RocketMQ 5 clients sign with them, and an HMAC can
only be checked with its secret); the registry fetches that list every registration round. The table is written
to ``config/principals.json`` (created owner-only, as every atomic write is) whenever it changes, so a broker
restarted while every name server is down still authenticates its clients; an unreadable file is logged and
treated as empty (every connection is then refused until a name server answers), never as "allow everyone".
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graymq.broker_ext.store.atomic_file import read_json, write_json_atomic
from graymq.protocol.acl import ALL_RIGHTS, Rights

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Principal:
    name: str
    rights: Rights


DEV_PRINCIPAL = Principal("dev", ALL_RIGHTS)


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class PrincipalTable:
    """Token digest -> principal, access key -> (secret key, principal); ``version`` is the name server's version of
    the list (``""``: none yet)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.version = ""
        self._by_digest: dict[str, Principal] = {}
        self._by_access_key: dict[str, tuple[str, Principal]] = {}

    def __len__(self) -> int:
        return len(self._by_digest)

    def load(self) -> None:
        """Read the table the broker last learned; a damaged file leaves it empty (logged)."""
        try:
            self._replace(read_json(self.path, {"version": "", "principals": []}))
        except (OSError, ValueError, TypeError, KeyError) as exc:
            log.error("ignoring the cached principals in %s (%s): connections are refused until a name server "
                      "lists them", self.path, exc)
            self.version, self._by_digest, self._by_access_key = "", {}, {}

    def get(self, digest: str) -> Principal | None:
        return self._by_digest.get(digest)

    def by_access_key(self, access_key: str) -> tuple[str, Principal] | None:
        """The secret key and principal of ``access_key``, or ``None``."""
        return self._by_access_key.get(access_key)

    def apply(self, answer: Any) -> bool:
        """Take the name server's list (``ValueError`` if malformed); persists it. Returns whether it changed."""
        if not isinstance(answer, dict):
            raise ValueError(f"the principals answer is a JSON {type(answer).__name__}, not an object")
        if str(answer.get("version", "")) == self.version and self.version:
            return False
        try:
            self._replace(answer)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed principals answer: {exc!r}") from exc
        write_json_atomic(self.path, {"version": self.version, "principals": answer["principals"]})
        return True

    def _replace(self, answer: dict[str, Any]) -> None:
        table, access_keys = {}, {}
        for raw in answer["principals"]:
            # a name server from before broker names were bound lists none: its broker tokens acted as any broker
            rights = Rights.of(list(raw.get("produce", [])), list(raw.get("consume", [])),
                               bool(raw.get("admin", False)), bool(raw.get("broker", False)),
                               list(raw.get("broker_names", ["*"])))
            principal = table[str(raw["token_sha256"])] = Principal(str(raw["name"]), rights)
            if raw.get("access_key") and raw.get("secret_key"):
                access_keys[str(raw["access_key"])] = (str(raw["secret_key"]), principal)
        self.version, self._by_digest, self._by_access_key = str(answer.get("version", "")), table, access_keys
