"""Pure-Python parts of telephony/: no SIP traffic."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pjsua2 as pj
import pytest
from pydantic import ValidationError

from telephony.config import EndpointConfig
from telephony.endpoint import _Core
from telephony.events import AudioIn, CallEnded
from telephony.framebuf import FAST_PATH, read_frame, write_frame
from telephony.media_port import InboundSink, PlayoutBuffer
from telephony.sdp import has_common_codec, parse_audio_offers, sip_body
from telephony.sipcheck import request_defect

CODECS = ("G722", "PCMU", "PCMA")


def test_sdp_static_and_dynamic_formats() -> None:
    sdp = "v=0\r\nm=audio 4000 RTP/AVP 0 8 96 101\r\na=rtpmap:96 opus/48000/2\r\n"
    (offer,) = parse_audio_offers(sdp)
    assert offer.port == 4000
    assert offer.formats == ("PCMU", "PCMA", "OPUS", "PT101")
    assert has_common_codec(sdp, CODECS)


@pytest.mark.parametrize(
    "sdp",
    [
        "m=audio 4000 RTP/AVP 3\r\n",  # GSM only
        "m=audio 4000 RTP/AVP 96\r\na=rtpmap:96 opus/48000/2\r\n",
        "m=audio 0 RTP/AVP 0\r\n",  # declined stream
        "m=video 4000 RTP/AVP 31\r\n",
    ],
)
def test_sdp_without_common_codec(sdp: str) -> None:
    assert not has_common_codec(sdp, CODECS)


def test_sdp_malformed_media_line_raises() -> None:
    with pytest.raises(ValueError, match="malformed audio media line"):
        parse_audio_offers("m=audio x RTP/AVP 0\r\n")


def test_no_sdp_means_we_offer() -> None:
    assert has_common_codec("", CODECS)
    assert sip_body("INVITE sip:a SIP/2.0\r\nCall-ID: x\r\n\r\n") == ""


def test_request_defects() -> None:
    ok = "INVITE sip:a@b SIP/2.0\r\nContent-Length: 3\r\n\r\nabc"
    assert request_defect(ok) is None
    assert request_defect(ok.replace("INVITE sip", "INVITE  sip")) == "Malformed Request-Line"
    assert request_defect(ok.replace("SIP/2.0\r\n", "SIP/2.0 \r\n", 1)) is not None
    assert request_defect(ok.replace(": 3", ": 9999")) == "Content-Length larger than message"


def test_playout_splits_carries_and_clears() -> None:
    buf = PlayoutBuffer(320)
    buf.push(b"\x01" * 700)  # 2 frames + 60-byte remainder
    assert len(buf) == 3
    assert buf.pop() == b"\x01" * 320
    buf.push(b"\x02" * 260)  # completes the remainder into a third whole frame
    assert len(buf) == 2
    assert buf.clear() == 2
    assert buf.pop() is None
    assert buf.frames_played == 1


def test_playout_pads_trailing_partial_frame() -> None:
    buf = PlayoutBuffer(320)
    buf.push(b"\x03" * 100)
    frame = buf.pop()
    assert frame is not None and len(frame) == 320 and frame[100:] == bytes(220)
    assert buf.pop() is None


def test_playout_counts_underrun_only_for_a_gap_mid_stream() -> None:
    buf = PlayoutBuffer(320)
    buf.push(bytes(320))
    buf.pop()  # ran dry
    buf.pop()
    buf.push(bytes(320))  # came back within 100 ms: a gap the caller heard
    assert buf.underruns == 1
    for _ in range(20):
        buf.pop()
    buf.push(bytes(320))  # a new utterance much later is not an underrun
    assert buf.underruns == 1


def test_framebuf_fast_path_round_trip() -> None:
    assert FAST_PATH  # the libstdc++ layout check passed on this wheel
    frame = pj.MediaFrame()
    data = bytes(range(256)) + bytes(64)
    write_frame(frame, data)
    assert frame.size == 320 and frame.type == pj.PJMEDIA_FRAME_TYPE_AUDIO
    assert read_frame(frame) == data


async def test_inbound_sink_orders_events_and_stops_after_call_ended() -> None:
    sink = InboundSink(asyncio.get_running_loop(), max_frames=2)
    for i in range(3):
        sink.put(AudioIn(bytes([i]), time.monotonic()))
    sink.put(CallEnded("200 BYE", True, time.monotonic()))
    sink.put(AudioIn(b"late", time.monotonic()))  # after the end: ignored
    got = [await sink.get() for _ in range(3)]
    assert [type(e).__name__ for e in got] == ["AudioIn", "AudioIn", "CallEnded"]
    assert sink.dropped == 1 and sink.closed


class _EndedCall:
    """A call whose INVITE session pjsua has ended before its DISCONNECTED callback ran."""

    disconnected = False

    def __init__(self) -> None:
        self.port = type("Port", (), {"closed": False})()
        self.asked = 0

    def getInfo(self) -> object:
        self.asked += 1
        raise pj.Error()


async def test_the_stats_refresh_survives_a_call_that_has_just_ended() -> None:
    # This raised out of the endpoint thread's loop, and the worker process died with all
    # of its calls.
    core = _Core(EndpointConfig(), lambda call: None, asyncio.get_running_loop())
    ended = _EndedCall()
    core.calls[0] = ended  # type: ignore[assignment]
    core._drain()
    assert ended.asked == 1
    assert core.counters["rtp_packets_in"] == 0


def test_transfer_targets_are_sip_or_tel_uris() -> None:
    listed: Any = "sip:agents@pbx.example.com, tel:+15550100"
    cfg = EndpointConfig(transfer_targets=listed)
    assert cfg.transfer_targets == ("sip:agents@pbx.example.com", "tel:+15550100")
    as_json: Any = '["sips:a@b"]'
    assert EndpointConfig(transfer_targets=as_json).transfer_targets == ("sips:a@b",)
    with pytest.raises(ValidationError, match="not a sip:, sips: or tel: URI"):
        EndpointConfig(transfer_targets=("http://example.com",))
