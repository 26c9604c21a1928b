"""Where recordings go and how long they stay: ``SWITCHBOARD_RECORDINGS__<FIELD>``.

Whether a bot records at all is the profile's ``[recording]`` (``bot.profile``).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class RecordingSettings(BaseModel):
    """The node's recordings folder and their retention."""

    model_config = ConfigDict(extra="forbid")
    #: Default: ``<data_dir>/recordings``; one folder a day, one WAV file a call.
    dir: Path | None = None
    #: Recordings of calls answered longer ago than this are deleted by `db purge`.
    retention_days: int = Field(30, ge=1)
