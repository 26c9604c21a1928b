"""SIP/RTP endpoint on pjsua2 exposing each call to asyncio as 20 ms PCM frames, and WebRTC
calls (``telephony.webrtc``, aiortc) as the second transport of the same ``CallPort``.

The package's contract (``telephony.events``, ``telephony.config``, ``telephony.stats``,
``telephony.remote_call``, ``telephony.server``) loads without pjsua2: only the worker
processes and the in-process endpoint (``telephony.endpoint``, ``call``, ``bridge``,
``media_port``, ``dialer``) need the SIP stack. The names below are therefore resolved on first
use (PEP 562), so that ``import telephony.events`` does not start pjsua2's import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from telephony.call import CallHandle
    from telephony.config import EndpointConfig
    from telephony.endpoint import SipEndpoint
    from telephony.events import AudioIn, CallEnded, DtmfIn, InboundEvent
    from telephony.server import SipServer
    from telephony.stats import EndpointError

_WHERE = {
    "AudioIn": "telephony.events",
    "CallEnded": "telephony.events",
    "DtmfIn": "telephony.events",
    "InboundEvent": "telephony.events",
    "EndpointConfig": "telephony.config",
    "EndpointError": "telephony.stats",
    "SipServer": "telephony.server",
    "CallHandle": "telephony.call",
    "SipEndpoint": "telephony.endpoint",
}

__all__ = [
    "AudioIn",
    "CallEnded",
    "CallHandle",
    "DtmfIn",
    "EndpointConfig",
    "EndpointError",
    "InboundEvent",
    "SipEndpoint",
    "SipServer",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'telephony' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
