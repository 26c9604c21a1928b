"""The intent cache's settings, composed by the node as ``SWITCHBOARD_INTENT_CACHE__<FIELD>``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, FilePath, SecretStr, field_validator

from bot.intents.signing import MIN_KEY_BYTES


class IntentCacheSettings(BaseModel):
    """Where the intent cache's shared copy lives and how long a node trusts its own copy.

    The Redis itself is ``SWITCHBOARD_REDIS_URL`` (``redis://`` or, with TLS, ``rediss://``);
    its password, client certificate and the key that signs what the nodes write are here.
    """

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
    #: The key every node signs and checks the shared entries with (HMAC-SHA256; the same on
    #: every node, at least 16 bytes, e.g. ``openssl rand -hex 32``). Needed with Redis:
    #: an entry or index that fails the check is not used.
    signing_key: SecretStr | None = None
    #: Redis ACL user (Redis 6+); unset: the default user.
    username: str | None = Field(None, min_length=1)
    #: Redis password (``requirepass`` or the ACL user's). Never logged. One in the URL
    #: (``redis://:pw@host``) works too; this one wins.
    password: SecretStr | None = None
    #: With a ``rediss://`` URL: the CA that signed the server's certificate (unset: the
    #: system's CAs), and this node's certificate and key when the server asks for one.
    tls_ca_file: FilePath | None = None
    tls_cert_file: FilePath | None = None
    tls_key_file: FilePath | None = None

    @field_validator("signing_key")
    @classmethod
    def _long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value().encode()) < MIN_KEY_BYTES:
            raise ValueError(f"at least {MIN_KEY_BYTES} bytes (e.g. `openssl rand -hex 32`)")
        return value
