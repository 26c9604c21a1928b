"""Signatures on what the intent cache keeps in Redis, so that a node uses only what a node wrote.

Every node reads answers, confirmation questions, actions and transfer targets from the shared
Redis. Anyone who can write to that Redis (a leaked password, a neighbour on a shared server)
could otherwise make every node say something else, or transfer callers somewhere else. Each
entry and the index therefore carry an HMAC-SHA256 made with the nodes' shared key
(``SWITCHBOARD_INTENT_CACHE__SIGNING_KEY``); a node checks it before using what it read, and
an entry or index that fails is treated as absent (counted and logged).

The signature covers the entry's Redis key (an entry copied under another key fails) and each
field as length-prefixed bytes in a fixed order (no two different entries give the same input).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

#: Written into every signed input: a key used for something else signs nothing valid here.
DOMAIN = b"switchboard:intent-cache:v1\x00"
#: The shortest key accepted (bytes): HMAC-SHA256 gains nothing above 32, loses below 16.
MIN_KEY_BYTES = 16


class Signer:
    """Signs and checks the intent cache's Redis values with one shared key."""

    def __init__(self, key: bytes) -> None:
        if len(key) < MIN_KEY_BYTES:
            raise ValueError(f"the signing key has {len(key)} bytes; {MIN_KEY_BYTES} at least")
        self._key = key

    def _mac(self, kind: bytes, name: str, fields: Mapping[str, bytes]) -> str:
        mac = hmac.new(self._key, DOMAIN + kind + b"\x00", hashlib.sha256)
        for part in (name.encode(), *(f.encode() + b"=" + fields[f] for f in sorted(fields))):
            mac.update(len(part).to_bytes(8, "big"))
            mac.update(part)
        return mac.hexdigest()

    def sign(self, kind: str, name: str, fields: Mapping[str, bytes]) -> str:
        """The signature of ``fields`` stored as ``kind`` (``entry``, ``index``) under ``name``."""
        return self._mac(kind.encode(), name, fields)

    def check(self, kind: str, name: str, fields: Mapping[str, bytes], signature: str) -> bool:
        """Whether ``signature`` was made with this key for exactly these fields."""
        return hmac.compare_digest(self._mac(kind.encode(), name, fields), signature)
