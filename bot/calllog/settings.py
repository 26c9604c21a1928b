"""The call log's settings, composed by the node as ``SWITCHBOARD_CALLLOG__<FIELD>``."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class CallLogSettings(BaseModel):
    """How the call log writes, and how long it keeps what callers said."""

    model_config = ConfigDict(extra="forbid")

    #: Transcripts, answers and DTMF digits older than this are blanked by `db purge`.
    transcript_retention_days: int = Field(30, ge=1)
    batch_size: int = Field(200, ge=1)
    batch_window_ms: int = Field(50, ge=0)
    #: Records held in memory before the writer diverts to the spool on disk.
    max_pending: int = Field(10_000, ge=1)
    write_timeout_s: float = Field(5.0, gt=0)
    retry_s: float = Field(2.0, gt=0)
    #: Default: ``<data_dir>/spool``.
    spool_dir: Path | None = None
    #: The spool file's bound: past it the oldest records are dropped (and counted in the
    #: log) rather than the disk filled.
    spool_max_bytes: int = Field(1 << 30, ge=4096)
    #: How often the node marks its calls alive (one ``UPDATE`` for all of them): a call
    #: the node's crash leaves open is closed at its last mark, so its length is kept to
    #: within this.
    heartbeat_s: float = Field(5.0, ge=0.1, le=300.0)
    #: Ask the caller who ends the conversation with the bot (the goodbye intent's hang-up)
    #: whether their question was answered, before the bot hangs up: ``post_call_prompt``,
    #: then up to ``post_call_wait_s`` for key 1 or 2, or a spoken yes or no. The answer is
    #: stored with the call (``calls.post_call_answer``). Off by default.
    post_call_question: bool = False
    post_call_prompt: str = Field(
        "Did we answer your question? Press 1 for yes, 2 for no.", min_length=1, max_length=300
    )
    post_call_wait_s: float = Field(5.0, ge=1.0, le=30.0)
