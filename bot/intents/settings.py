"""The intent cache's settings, composed by the node as ``SWITCHBOARD_INTENT_CACHE__<FIELD>``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class IntentCacheSettings(BaseModel):
    """Where the intent cache's shared copy lives and how long a node trusts its own copy."""

    model_config = ConfigDict(extra="forbid")

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
