"""What the call log writes: one small record per row insert or update.

A record carries its row's client-generated id, so writing it twice (a retry, a replay
from the spool) leaves one row. Records round-trip through JSON for the spool.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

#: "call": insert the call row; "turn", "event": insert a turn/event; "alive": the calls
#: (``ids``) were up at ``at``; "end": close the call.
RecordKind = Literal["call", "turn", "event", "alive", "end"]
KINDS: tuple[RecordKind, ...] = ("call", "turn", "event", "alive", "end")

_UUID_KEYS = frozenset({"id", "call_id"})
_UUID_LIST_KEYS = frozenset({"ids"})


@dataclass(frozen=True)
class Record:
    """One row to insert (``call``, ``turn``, ``event``), calls still up (``alive``), or
    one call to close (``end``)."""

    kind: RecordKind
    row: dict[str, Any]

    def to_json(self) -> str:
        """One JSON line (no newline)."""
        return json.dumps({"kind": self.kind, "row": self.row}, default=_encode)

    @classmethod
    def from_json(cls, line: str) -> Record:
        """Parse a line written by ``to_json``; raises ``ValueError`` on a bad line."""
        data = json.loads(line)
        kind = data.get("kind")
        if kind not in KINDS or not isinstance(data.get("row"), dict):
            raise ValueError(f"not a call-log record: {line[:80]!r}")
        row = {k: _decode(k, v) for k, v in data["row"].items()}
        return cls(kind=kind, row=row)


def _encode(value: object) -> object:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    raise TypeError(f"cannot spool {type(value).__name__}")


def _decode(key: str, value: Any) -> Any:
    if value is None:
        return None
    if key in _UUID_KEYS:
        return uuid.UUID(value)
    if key in _UUID_LIST_KEYS:
        return [uuid.UUID(v) for v in value]
    if key == "at" or key.endswith("_at"):
        return datetime.fromisoformat(value)
    return value


def utc(ts: float) -> datetime:
    """A ``time.time()`` value as an aware UTC datetime."""
    return datetime.fromtimestamp(ts, UTC)
