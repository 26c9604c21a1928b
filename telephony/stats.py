"""What the rest of the product may know of the SIP endpoint without loading pjsua2: its
counters' names, its call limit, its error.

The node process (admin's metrics, the server that spreads calls over worker processes, the
bot) imports these; only the worker processes load pjsua2 (``telephony.endpoint``).
"""

from __future__ import annotations

from telephony.config import EndpointConfig

# Compile-time PJSUA_MAX_CALLS of the pjsua2-python 2.15.1.post1 wheel, measured: the fifth
# simultaneous call fails with PJ_ETOOMANY whatever uaConfig.maxCalls says. One slot is kept
# free so that we (not pjsua, which would say 486) can answer the overflow with 503.
WHEEL_MAX_CALLS = 4

#: A worker's counters (summed over the workers by the node).
STAT_KEYS = (
    "calls_active",
    "calls_total",
    "rejected_busy",
    "rejected_codec",
    "rejected_malformed",
    "calls_cancelled",
    "calls_failed",
    "calls_unacked",  # answered, never ACKed within 64*T1: ended, its source told of
    "rtp_frames_in",
    "rtp_frames_out",
    "rtp_packets_in",
    "rtp_packets_out",
    "playout_underruns",
    "rtp_discarded",
    "rtp_foreign_switches",
    "rtp_frames_muted",
    "inbound_frames_dropped",
    "refer_refused",
    "rejected_unstamped",  # a new INVITE that did not come through the front: 403
    "strangers_dropped",  # a request outside every dialog that was not a new INVITE
    "streams_released",  # call streams taken out of the bridge before their teardown
    "byes_unread",  # a BYE whose Call-ID could not be read: its stream left at teardown
)


class EndpointError(RuntimeError):
    """The SIP endpoint could not start or a command on its thread failed."""


def call_limit(config: EndpointConfig) -> int:
    """Calls answered at once: ``max_calls``, capped by what the pjsua2 build can hold."""
    return max(0, min(config.max_calls, WHEEL_MAX_CALLS - 1))


def node_stat_keys() -> tuple[str, ...]:
    """Every counter a node's ``SipServer.stats()`` may carry: the workers', the front's
    and the registration's (what admin's metrics read)."""
    from telephony.registration import REGISTER_KEYS  # noqa: PLC0415
    from telephony.sip_dispatch import FRONT_KEYS  # noqa: PLC0415

    return (*STAT_KEYS, *FRONT_KEYS, *REGISTER_KEYS)
