"""The admin console's settings, composed by the node as ``SWITCHBOARD_ADMIN__<FIELD>``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class AdminSettings(BaseModel):
    """Where the REST API and console listen, and how logins are guarded."""

    model_config = ConfigDict(extra="forbid")

    #: Serve the API and console from ``switchboard run`` (``switchboard admin`` always does).
    enabled: bool = True
    #: Loopback by default: the console is reachable from other machines only when an
    #: operator says so (and should then sit behind TLS).
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    #: The session cookie's ``Secure`` flag. Browsers accept it on http://localhost and
    #: http://127.0.0.1; turn it off only for a plain-HTTP name other than those.
    cookie_secure: bool = True
    #: How long a console login lasts without activity (hours).
    session_hours: float = Field(12.0, gt=0.0, le=24.0 * 30)
    #: Failed logins allowed per user name, and per client address, in ``login_window_s``
    #: before further attempts are refused with 429.
    login_max_failures: int = Field(5, ge=1, le=1000)
    login_window_s: int = Field(300, ge=1, le=86_400)
    #: Serve ``/metrics`` without credentials (for a Prometheus on a trusted network);
    #: otherwise it needs an API token like the rest of the API.
    metrics_public: bool = False
    #: How often a node checks the database for a new configuration version (s).
    config_poll_s: float = Field(2.0, gt=0.0, le=3600.0)
