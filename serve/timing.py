"""Per-request stage timings, passed explicitly by the caller (no global state)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class StageTimings:
    """Marks (``time.monotonic()`` seconds) and durations (ms) of the stages of one request."""

    marks: dict[str, float] = field(default_factory=dict)
    durations_ms: dict[str, float] = field(default_factory=dict)

    def mark(self, stage: str, at: float | None = None) -> None:
        """Record that ``stage`` happened at ``at`` (default: now)."""
        self.marks[stage] = time.monotonic() if at is None else at

    def record(self, stage: str, ms: float) -> None:
        """Record that ``stage`` took ``ms`` milliseconds."""
        self.durations_ms[stage] = ms
