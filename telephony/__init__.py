"""SIP/RTP endpoint on pjsua2 exposing each call to asyncio as 20 ms PCM frames."""

from telephony.call import CallHandle
from telephony.config import EndpointConfig
from telephony.endpoint import EndpointError, SipEndpoint
from telephony.events import AudioIn, CallEnded, DtmfIn, InboundEvent
from telephony.server import SipServer

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
