"""The admin console's settings, composed by the node as ``SWITCHBOARD_ADMIN__<FIELD>``."""

from __future__ import annotations

from ipaddress import IPv4Network, IPv6Network

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
    #: Failed logins allowed for one user name from one client address in
    #: ``login_window_s``; further attempts from that address at that name are refused (429).
    #: Another address is not refused for it: a stranger cannot lock a user out.
    login_max_failures: int = Field(5, ge=1, le=1000)
    #: Failed logins allowed from one client address in the window, whatever the names.
    login_max_failures_per_client: int = Field(20, ge=1, le=100_000)
    login_window_s: int = Field(300, ge=1, le=86_400)
    #: Past ``login_max_failures`` failures at a name from anywhere in the window, each
    #: attempt at it is answered after a delay that doubles with each further failure, up to
    #: this (s): guessing slows down, and the user still gets in.
    login_delay_max_s: float = Field(8.0, ge=0.0, le=60.0)
    #: Proxies whose ``X-Forwarded-For`` is believed (addresses or networks, e.g.
    #: ``["127.0.0.1/32"]``). Empty: the header is ignored and the client is the address
    #: that connected; otherwise the client is the rightmost address in the header that is
    #: not one of these proxies.
    trusted_proxies: list[IPv4Network | IPv6Network] = []
    #: The largest request body (bytes); larger is refused with 413.
    max_body_bytes: int = Field(262_144, ge=1024, le=16 * 1024 * 1024)
    #: Serve ``/metrics`` without credentials (for a Prometheus on a trusted network);
    #: otherwise it needs an API token like the rest of the API.
    metrics_public: bool = False
    #: Browser test calls one user may have at once on a node (further offers: 429).
    webrtc_max_calls_per_user: int = Field(2, ge=0, le=100)
    #: Browser test calls a node takes at once (further offers: 503). They are calls of the
    #: node, and count against its own call limit too.
    webrtc_max_calls: int = Field(4, ge=0, le=1000)
    #: Seconds a browser test call has to connect (ICE and DTLS) after its offer is
    #: answered; one that does not is dropped and its place freed.
    webrtc_connect_timeout_s: float = Field(10.0, gt=0.0, le=120.0)
    #: How often a node checks the database for a new configuration version (s).
    config_poll_s: float = Field(2.0, gt=0.0, le=3600.0)
