"""The SIP endpoint's settings, owned here and composed by the node's settings."""

from __future__ import annotations

import json
import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import NoDecode

from telephony.floodguard import FrontLimits
from telephony.peers import Peer
from telephony.registration import RegistrationSettings
from telephony.sip_stream import StreamSettings

#: Rate of the PCM frames every call exposes to asyncio (narrowband telephony; G.722 is
#: resampled by pjmedia's conference bridge). The one place this number is written.
SAMPLE_RATE = 8000
#: Length of one PCM frame.
FRAME_MS = 20

Codec = Literal["G722", "PCMU", "PCMA"]
#: SRTP (SDES keying, RFC 4568) on a call's media: ``optional`` answers an offer of
#: RTP/SAVP with a=crypto with SRTP and a plain offer with plain RTP; ``mandatory`` refuses a
#: plain offer (488); ``off`` answers plain RTP only (an RTP/SAVP offer gets 488).
SrtpUse = Literal["optional", "mandatory", "off"]
#: A transfer target as the profile allows one.
_TARGET = re.compile(r"(sips?|tel):[^\s<>,]+")
CODECS: tuple[Codec, ...] = ("G722", "PCMU", "PCMA")


class EndpointConfig(BaseModel):
    """Where the SIP endpoint listens and how it treats calls.

    Set from the environment as ``SWITCHBOARD_SIP__<FIELD>`` (e.g. ``SWITCHBOARD_SIP__PORT``).
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    host: str = Field("127.0.0.1", min_length=1)
    #: UDP port of the SIP front (0: any free port, for tests).
    port: int = Field(5060, ge=0, le=65535)
    #: Address written in Contact and SDP when the node is behind NAT.
    public_host: str | None = None
    #: Calls answered at once; beyond this an INVITE gets 503 + Retry-After (0: every one,
    #: e.g. while a node is taken out of service).
    max_calls: int = Field(20, ge=0, le=10_000)
    retry_after_s: int = Field(30, ge=1, le=3600)
    #: Codecs offered and accepted, in priority order (comma-separated in the environment).
    codecs: Annotated[tuple[Codec, ...], NoDecode] = CODECS
    rtp_port_start: int = Field(40000, ge=1024, le=65534)
    rtp_port_range: int = Field(1000, ge=2)
    #: pjsip's log level (0-6), written to stderr.
    log_level: int = Field(1, ge=0, le=6)
    #: The Server (responses) and User-Agent (requests) header of the front and the workers.
    #: Empty (the default): no such header, so that a scanner is not told what answers.
    user_agent: str = Field("", max_length=128, pattern=r"^[^\r\n]*$")
    #: RFC 3261's T1 (the round-trip estimate), in ms: the workers' SIP timers follow it
    #: (``telephony.siptimers``). A 200 OK not ACKed within 64*T1 (32 s) ends its call and
    #: counts against its source (``limits.ban_after_unacked``); a BYE unanswered for 64*T1
    #: frees its call slot.
    t1_ms: int = Field(500, ge=20, le=5000)
    #: Ring (180) this long before the 200 OK; 0 answers at once.
    answer_delay_ms: int = Field(0, ge=0, le=60_000)
    #: Mute a call's inbound audio while pjmedia has latched its RTP onto an address other
    #: than the one in the caller's SDP. Turn off for callers behind NAT that send from an
    #: address their SDP does not name (no SBC in front).
    strict_rtp_source: bool = True
    #: Receive jitter buffer (pjmedia's adaptive one), in ms; -1 keeps pjmedia's default.
    #: Its prefetch delays every caller word on its way to the turn detector.
    jb_init_ms: int = Field(-1, ge=-1, le=10_000)
    jb_min_pre_ms: int = Field(-1, ge=-1, le=10_000)
    jb_max_pre_ms: int = Field(-1, ge=-1, le=10_000)
    jb_max_ms: int = Field(-1, ge=-1, le=10_000)
    #: SRTP on inbound calls (see ``SrtpUse``). The keys travel in the SDP, over the same
    #: UDP signalling as the rest of the call: only as private as the network the SIP runs
    #: on (a trusted network, or an SBC terminating TLS in front of the node).
    srtp: SrtpUse = "optional"
    #: SRTP on the calls the node places itself (the agent leg of a bridged transfer):
    #: ``off`` (plain RTP, what most agent phones and PBX queues expect) unless set.
    agent_srtp: SrtpUse = "off"
    #: The SIP front's rate limits, bans and table bounds.
    limits: FrontLimits = FrontLimits()
    #: SIP over TCP and TLS besides UDP (``telephony.sip_stream``).
    stream: StreamSettings = StreamSettings()
    #: Who may call (JSON list, e.g. ``[{"name": "trunk", "networks": ["203.0.113.0/24"]}]``,
    #: with ``username``/``password`` for digest authentication). Empty: anyone may call.
    peers: tuple[Peer, ...] = ()
    #: Realm of the digest challenges.
    realm: str = Field("switchboard", min_length=1, max_length=64)
    #: The only targets a transfer (REFER) may name, e.g. ``["sip:agents@pbx.example.com"]``
    #: (JSON list or comma-separated). Empty: those the bot profile names. Checked by the
    #: bot and again by the endpoint just before the REFER, so that neither a rewritten
    #: shared cache entry nor a profile mistake sends a caller to another number.
    transfer_targets: Annotated[tuple[str, ...], NoDecode] = ()
    #: Registering with a PBX or provider (``SWITCHBOARD_SIP__REGISTRATION__REGISTRARS`` etc.;
    #: ``telephony.registration``). No registrar: the node registers nowhere.
    registration: RegistrationSettings = RegistrationSettings()
    #: On SIGTERM: live calls may go on this long before they are hung up (new calls get
    #: 503 + Retry-After from the moment the signal arrives).
    drain_s: float = Field(300.0, ge=0.0, le=86_400.0)

    @field_validator("codecs", mode="before")
    @classmethod
    def _known_codecs(cls, value: object) -> object:
        if isinstance(value, str) and value.lstrip().startswith("["):
            value = json.loads(value)
        elif isinstance(value, str):
            value = [part for part in value.split(",") if part.strip()]
        if not isinstance(value, list | tuple):
            return value  # pydantic's own error
        names = [str(v).strip().upper() for v in value]
        for name in names:
            if name not in CODECS:
                raise ValueError(f"unknown codec {name!r}; known: {', '.join(CODECS)}")
        if not names:
            raise ValueError(f"no codec given; known: {', '.join(CODECS)}")
        if len(set(names)) != len(names):
            raise ValueError("a codec is listed twice")
        return tuple(names)

    @field_validator("srtp", "agent_srtp", mode="before")
    @classmethod
    def _srtp_lower(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("transfer_targets", mode="before")
    @classmethod
    def _targets_are_uris(cls, value: object) -> object:
        if isinstance(value, str) and value.lstrip().startswith("["):
            value = json.loads(value)
        elif isinstance(value, str):
            value = [part for part in value.split(",") if part.strip()]
        if not isinstance(value, list | tuple):
            return value  # pydantic's own error
        targets = tuple(str(v).strip() for v in value)
        for target in targets:
            if not _TARGET.fullmatch(target):
                raise ValueError(f"transfer target {target!r} is not a sip:, sips: or tel: URI")
        return targets

    @model_validator(mode="after")
    def _rtp_range_fits(self) -> EndpointConfig:
        last = self.rtp_port_start + self.rtp_port_range - 1
        if last > 65535:
            raise ValueError(
                f"RTP ports {self.rtp_port_start}-{last} pass 65535: lower rtp_port_start "
                "or rtp_port_range"
            )
        return self

    @property
    def sample_rate(self) -> int:
        """Rate of the PCM frames exposed to asyncio."""
        return SAMPLE_RATE

    @property
    def frame_bytes(self) -> int:
        """Bytes in one 20 ms PCM16 mono frame."""
        return SAMPLE_RATE * FRAME_MS // 1000 * 2
