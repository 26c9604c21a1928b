"""Endpoint configuration."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class EndpointConfig:
    """Where the SIP endpoint listens and how it treats calls."""

    host: str = "127.0.0.1"
    port: int = 5060  # UDP
    public_host: str | None = None  # address written in Contact/SDP when behind NAT
    max_calls: int = 20  # beyond this an INVITE gets 503 + Retry-After
    retry_after_s: int = 30
    codecs: tuple[str, ...] = ("G722", "PCMU", "PCMA")  # priority order
    rtp_port_start: int = 40000
    rtp_port_range: int = 1000
    sample_rate: int = 8000  # rate of the PCM frames exposed to asyncio
    log_level: int = 1  # pjsip log level, written to stderr
    user_agent: str = "Switchboard"
    answer_delay_ms: int = 0  # ring (180) this long before 200 OK; 0 answers at once
    # Mute a call's inbound audio while pjmedia has latched its RTP onto an address other
    # than the one in the caller's SDP. Turn off for callers behind NAT that send from an
    # address their SDP does not name (no SBC in front).
    strict_rtp_source: bool = True
    # Receive jitter buffer (pjmedia's adaptive one), in ms; -1 keeps pjmedia's default.
    # Its prefetch delays every caller word on its way to the end-of-turn detector.
    jb_init_ms: int = -1
    jb_min_pre_ms: int = -1
    jb_max_pre_ms: int = -1
    jb_max_ms: int = -1

    @property
    def frame_bytes(self) -> int:
        """Bytes in one 20 ms PCM16 mono frame."""
        return self.sample_rate // 50 * 2
