"""All runtime settings, from environment variables prefixed ``SWITCHBOARD_``.

Nested sections use a double underscore: ``SWITCHBOARD_SIP__PORT=5070``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_PROFILE = Path(__file__).parent / "profiles" / "default.toml"


class SipSettings(BaseModel):
    """Where the SIP endpoint listens and how many calls it admits."""

    host: str = "127.0.0.1"
    port: int = Field(5060, ge=1, le=65535)
    public_host: str | None = None
    max_calls: int = Field(20, ge=1)
    retry_after_s: int = Field(30, ge=1)
    codecs: tuple[str, ...] = ("G722", "PCMU", "PCMA")
    rtp_port_start: int = Field(40000, ge=1024, le=65000)
    rtp_port_range: int = Field(1000, ge=2)
    log_level: int = Field(1, ge=0, le=6)
    #: Receive jitter buffer (ms; -1: pjmedia's default). See telephony/config.py.
    jb_init_ms: int = Field(-1, ge=-1)
    jb_min_pre_ms: int = Field(-1, ge=-1)
    jb_max_pre_ms: int = Field(-1, ge=-1)
    jb_max_ms: int = Field(-1, ge=-1)


class ModelSettings(BaseModel):
    """Which model backend serves each stage, and where its weights are.

    The defaults are the CPU models that ship inside Python packages; the paths let a
    GPU deployment point the same loaders at bigger models.
    """

    #: Whisper on a 10 s window instead of its 30 s one: a third of the time, same accuracy
    #: on the test set (serve/README.md has the figures). "whisper" is the full window.
    asr: str = "whisper-window"
    asr_model_path: str | None = None
    llm: str = "llama-cpp"
    llm_model_path: str | None = None
    tts: str = "piper"
    tts_voice_path: str | None = None
    vad: str = "silero"
    embedder: str | None = None
    #: Threads of each speech model (ASR, embedder). One: with every call's speech work
    #: in parallel, two threads per model fought over 2 cores (10 calls: cache route P95
    #: 682 ms with 2, 568 ms with 1; one call: P50 341 ms with 2, 314 ms with 1).
    threads: int = Field(1, ge=1)
    #: Niceness of the LLM's thread (0-19): when every core is busy, the caller's speech
    #: work (VAD, ASR, cached answers) runs first and the LLM takes what is left.
    llm_nice: int = Field(10, ge=0, le=19)
    #: Longest wait of the CPU LLM (llama.cpp), before each token, while callers' speech
    #: is being transcribed or looked up (ms; 0: never waits). On a GPU node: no effect.
    llm_yield_ms: int = Field(250, ge=0, le=5000)
    #: Niceness of the synthesizer's own thread: a caller's finished turn is transcribed
    #: before the next sentence of another call's LLM answer is synthesized.
    tts_nice: int = Field(5, ge=0, le=19)


def default_data_dir() -> Path:
    """Where the embedded call log and its spool live: ``$XDG_DATA_HOME/switchboard``."""
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "switchboard"


class CallLogSettings(BaseModel):
    """How the call log writes, and how long it keeps what callers said."""

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


class IntentCacheSettings(BaseModel):
    """Where the intent cache's shared copy lives and how long a node trusts its own copy."""

    #: Key prefix in Redis (one per bot configuration sharing a Redis).
    prefix: str = Field("switchboard:intents", min_length=1)
    #: Redis unreachable for longer than this: lookups are refused (the LLM answers) until
    #: it is back, since another node may have changed the configuration meanwhile.
    stale_after_s: float = Field(10.0, gt=0)
    #: How often the node checks Redis while no change is announced.
    heartbeat_s: float = Field(1.0, gt=0)
    #: Longest wait between reconnection attempts (backoff doubles from 0.2 s).
    retry_max_s: float = Field(5.0, gt=0)
    #: Redis command timeout.
    timeout_s: float = Field(1.0, gt=0)


class Settings(BaseSettings):
    """The bot node's settings."""

    model_config = SettingsConfigDict(
        env_prefix="SWITCHBOARD_", env_nested_delimiter="__", extra="forbid"
    )

    profile: Path = DEFAULT_PROFILE
    sip: SipSettings = SipSettings()
    models: ModelSettings = ModelSettings()
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["json", "text"] = "json"
    #: Also log what callers and the bot said. Transcripts are personal data: off by default.
    log_transcripts: bool = False
    #: Carry out the intents' actions (transfer, hang-up). False: the bot answers as the
    #: profile says and records an ``action_skipped`` call event instead: for load tests,
    #: and for trying a profile on a line that must not be transferred.
    call_actions: bool = True
    #: How often the event loop's lateness is written as a ``loop_lag`` log line (s).
    loop_lag_report_s: float = Field(60.0, gt=0.0)
    #: The call log's database: ``postgresql+psycopg://...`` or ``sqlite+aiosqlite:///...``.
    #: Default: the SQLite file ``<data_dir>/switchboard.db``.
    database_url: str | None = None
    data_dir: Path = Field(default_factory=default_data_dir)
    #: This node's name in the call log. Default: ``<hostname>:<sip port>``.
    node_name: str | None = None
    calllog: CallLogSettings = CallLogSettings()
    #: Redis shared by every node for the intent cache (``redis://host:6379/0``). Unset:
    #: the cache lives in this process only (the embedded default).
    redis_url: str | None = None
    intent_cache: IntentCacheSettings = IntentCacheSettings()
