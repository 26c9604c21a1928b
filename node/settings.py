"""The node's settings: every part's own settings model, composed once.

Read from environment variables prefixed ``SWITCHBOARD_``; a nested section uses a double
underscore (``SWITCHBOARD_SIP__PORT=5070``). Each section is the model of the part it
configures (telephony's ``EndpointConfig``, serve's ``ModelSpec``, the call log's and the
intent cache's settings), so each default is written once, beside the code that uses it.

``load_settings`` is the only way the node reads them: an unknown ``SWITCHBOARD_`` variable
or an invalid value is a ``SettingsError`` naming the variable (or the command-line flag) and
the reason, instead of being ignored or ending in a traceback.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from pydantic_settings import SettingsError as PydanticSettingsError

from admin.settings import AdminSettings
from bot.calllog.settings import CallLogSettings
from bot.intents.settings import IntentCacheSettings
from bot.pipeline.speech_cache import SpeechCacheSettings
from bot.profile import DEFAULT_PROFILE
from bot.queue.settings import QueueSettings
from bot.recording.settings import RecordingSettings
from serve.registry import ModelSpec
from serve.scale.settings import TierSettings
from telephony.config import EndpointConfig

PREFIX = "SWITCHBOARD_"
#: Variables with the prefix that are not settings of a running node: read by
#: infra/install.sh only.
INSTALL_VARIABLES = frozenset({"SWITCHBOARD_TORCH_INDEX", "SWITCHBOARD_WHEELHOUSE"})


def default_data_dir() -> Path:
    """Where the embedded call log and its spool live: ``$XDG_DATA_HOME/switchboard``."""
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "switchboard"


class Settings(BaseSettings):
    """The bot node's settings."""

    model_config = SettingsConfigDict(
        env_prefix=PREFIX, env_nested_delimiter="__", extra="forbid", case_sensitive=False
    )

    #: The bot profile (greeting, prompts, intents, endpointing): a TOML file.
    profile: Path = DEFAULT_PROFILE
    sip: EndpointConfig = EndpointConfig()
    models: ModelSpec = ModelSpec()
    #: Where the models run: in this process (default) or on a Ray Serve tier.
    tier: TierSettings = TierSettings()
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
    #: The REST config API and web console (admin/).
    admin: AdminSettings = AdminSettings()
    #: Secrets the profile's lookups send in their auth header, by the name a lookup's
    #: ``auth_secret`` gives: JSON, e.g. ``{"orders": "s3cr3t"}``. Never logged.
    lookup_secrets: dict[str, SecretStr] = {}
    #: Where call recordings go and how long they stay (the profile says whether to record).
    recordings: RecordingSettings = RecordingSettings()
    #: The call queue: conversations at once, and callers waiting beyond them.
    queue: QueueSettings = QueueSettings()
    #: Pre-synthesized phrases kept on disk for the next start (same voice, same words).
    speech_cache: SpeechCacheSettings = SpeechCacheSettings()

    @model_validator(mode="after")
    def _queue_fits_sip_slots(self) -> Settings:
        problem = self.queue.capacity_problem(self.sip.max_calls)
        if problem is not None:
            raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _overflow_target_is_listed(self) -> Settings:
        target, listed = self.queue.overflow_target, self.sip.transfer_targets
        if target is not None and listed and target not in listed:
            raise ValueError(
                f"SWITCHBOARD_QUEUE__OVERFLOW_TARGET ({target}) is not in "
                "SWITCHBOARD_SIP__TRANSFER_TARGETS: the endpoint would refuse every overflow "
                "transfer; add it to the list"
            )
        return self

    @model_validator(mode="after")
    def _shared_cache_is_locked(self) -> Settings:
        cache = self.intent_cache
        if self.redis_url is None:
            return self
        if cache.signing_key is None:
            raise ValueError(
                "SWITCHBOARD_REDIS_URL is set but SWITCHBOARD_INTENT_CACHE__SIGNING_KEY is not: "
                "the nodes sign what they share in Redis and use nothing unsigned (set the "
                "same key, e.g. `openssl rand -hex 32`, on every node)"
            )
        tls_files = (cache.tls_ca_file, cache.tls_cert_file, cache.tls_key_file)
        if any(tls_files) and not self.redis_url.startswith("rediss://"):
            raise ValueError(
                "SWITCHBOARD_INTENT_CACHE__TLS_* files are set but SWITCHBOARD_REDIS_URL is not "
                "rediss://: TLS would not be used"
            )
        return self


class SettingsError(ValueError):
    """Settings the node cannot start with; one line per problem, each naming its source."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def variable_name(loc: tuple[str | int, ...]) -> str:
    """The environment variable of a settings field: ("sip", "port") -> SWITCHBOARD_SIP__PORT."""
    return PREFIX + "__".join(str(part).upper() for part in loc)


def _fields(model: type[BaseModel]) -> dict[str, type[BaseModel] | None]:
    """Each field of ``model``, with its model class when it is a nested section."""
    out: dict[str, type[BaseModel] | None] = {}
    for name, info in model.model_fields.items():
        ann = info.annotation
        out[name] = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
    return out


def _unknown(key: str) -> str | None:
    """Why the ``SWITCHBOARD_`` variable ``key`` names no setting, or None when it does."""
    parts = key[len(PREFIX) :].lower().split("__")
    model: type[BaseModel] | None = Settings
    path: list[str] = []
    for i, part in enumerate(parts):
        if model is None:
            return f"{key}: {variable_name(tuple(path))} has no sub-settings"
        fields = _fields(model)
        if part not in fields:
            known = [variable_name((*path, f)) for f in fields]
            close = difflib.get_close_matches(variable_name((*path, part)), known, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            return f"{key}: unknown setting{hint}"
        path.append(part)
        model = fields[part]
        if model is not None and i == len(parts) - 1:
            example = variable_name((*path, next(iter(_fields(model)))))
            return f"{key}: is a section; set its fields, e.g. {example}"
    return None


def _value(data: Mapping[str, Any] | None, loc: tuple[str | int, ...]) -> Any:
    cur: Any = data
    for part in loc:
        if not isinstance(cur, Mapping) or part not in cur:
            return None
        cur = cur[part]
    return cur


def load_settings(
    overrides: Mapping[str, Any] | None = None,
    *,
    flags: Mapping[tuple[str, ...], str] | None = None,
) -> Settings:
    """The node's settings from the environment, with ``overrides`` on top.

    ``overrides`` (nested dicts, e.g. from command-line flags) win over the environment and
    pass the same validation; ``flags`` names the flag of each overridden field, so that an
    error says ``--port`` rather than a variable nobody set.
    """
    problems = [
        why
        for key in sorted(os.environ)
        if key.upper().startswith(PREFIX) and key.upper() not in INSTALL_VARIABLES
        for why in [_unknown(key.upper())]
        if why is not None
    ]
    if problems:
        raise SettingsError(problems)
    try:
        return Settings(**dict(overrides or {}))
    except ValidationError as exc:
        raise SettingsError(_describe(exc, overrides, flags or {})) from None
    except PydanticSettingsError as exc:
        raise SettingsError([f"settings: {exc}"]) from None


def _describe(
    exc: ValidationError,
    overrides: Mapping[str, Any] | None,
    flags: Mapping[tuple[str, ...], str],
) -> list[str]:
    lines = []
    for err in exc.errors(include_url=False):
        # A model-level check (e.g. the RTP range) has no field of its own: it is
        # reported on its section.
        loc = tuple(p for p in err["loc"] if isinstance(p, str) and p not in {"__root__"})
        field = tuple(p for p in loc if not p.startswith(("function-", "literal[")))
        source = flags.get(field) if _value(overrides, field) is not None else None
        name = source or variable_name(field) if field else "settings"
        reason = err["msg"].removeprefix("Value error, ")
        got = err.get("input")
        shown = "" if isinstance(got, dict | BaseModel) or got is None else f" (got {got!r})"
        line = f"{name}: {reason}{shown}"
        if line not in lines:
            lines.append(line)
    return lines
