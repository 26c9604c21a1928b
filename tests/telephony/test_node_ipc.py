"""SipServer's IPC framing and the parent-side call (``RemoteCall``) accounting."""

from __future__ import annotations

import asyncio
import json
import struct

import pytest

from telephony import AudioIn, CallEnded, DtmfIn, EndpointConfig
from telephony.events import TransferResult
from telephony.ipc import (
    HEADER,
    MAX_PAYLOAD,
    SEND_CHUNK,
    AudioFrame,
    CallStarted,
    CallStopped,
    ClearPlayout,
    Dtmf,
    FrameDecoder,
    Hangup,
    HopTimes,
    IpcError,
    Message,
    MsgType,
    Ready,
    SendAudio,
    Stats,
    Stop,
    Transfer,
    TransferStatus,
    config_from_json,
    config_to_json,
    encode,
    encode_send,
)
from telephony.remote_call import MAX_QUEUED_EVENTS, RemoteCall

PCM = bytes(range(256)) + bytes(64)  # 320 bytes

MESSAGES: list[Message] = [
    Ready(1234, 40000),
    CallStarted(7, "abc@host", "<sip:a@b>", "<sip:bot@c>", "PCMU/8000", 8000, 0.25),
    AudioFrame(7, 3, 11, 1, 9600, 12.5, 12.501, PCM),
    Dtmf(7, "#", 120, 0.01),
    CallStopped(7, "200 Normal call clearing", True, 42),
    Stats({"calls_active": 1, "rtp_frames_in": 500}),
    SendAudio(7, 99.5, PCM * 3),
    ClearPlayout(7),
    Hangup(7),
    Transfer(7, "sip:agents@127.0.0.1:5070", 30.0),
    Transfer(7, "sip:agents@127.0.0.1:5070", 20.0, "bridge", PCM * 50),
    TransferStatus(7, False, 603, "Decline"),
    Stop(),
]


def test_every_message_survives_a_stream_cut_anywhere() -> None:
    stream = b"".join(encode(m) for m in MESSAGES)
    assert FrameDecoder().feed(stream) == MESSAGES
    for cut in range(len(stream) + 1):
        dec = FrameDecoder()
        got = dec.feed(stream[:cut]) + dec.feed(stream[cut:])
        assert got == MESSAGES, cut
        assert dec.pending == 0
    dec = FrameDecoder()
    one_by_one = [m for i in range(len(stream)) for m in dec.feed(stream[i : i + 1])]
    assert one_by_one == MESSAGES


def test_long_audio_is_sent_in_chunks() -> None:
    pcm = bytes(range(256)) * 400  # 102400 bytes
    msgs = FrameDecoder().feed(encode_send(5, 1.0, pcm))
    assert len(msgs) == -(-len(pcm) // SEND_CHUNK)
    assert all(isinstance(m, SendAudio) and m.key == 5 for m in msgs)
    assert b"".join(m.pcm for m in msgs if isinstance(m, SendAudio)) == pcm


@pytest.mark.parametrize(
    ("frame", "error"),
    [
        (HEADER.pack(MAX_PAYLOAD + 1, MsgType.AUDIO), "exceeds"),
        (HEADER.pack(0, 99), "unknown message type"),
        (HEADER.pack(4, MsgType.AUDIO) + b"abcd", "truncated audio"),
        (HEADER.pack(2, MsgType.SEND_AUDIO) + b"ab", "truncated send-audio"),
        (HEADER.pack(3, MsgType.HANGUP) + b"abc", "bad call-key"),
        (HEADER.pack(5, MsgType.READY) + b"{oops", "bad JSON"),
        (HEADER.pack(2, MsgType.STATS) + b"[]", "not an object"),
        (HEADER.pack(9, MsgType.READY) + b'{"pid":1}', "bad message"),
    ],
)
def test_broken_frames_raise_ipc_error(frame: bytes, error: str) -> None:
    with pytest.raises(IpcError, match=error):
        FrameDecoder().feed(frame)


@pytest.mark.parametrize(
    ("fields", "error"),
    [({"mode": "conference"}, "unknown transfer mode"), ({"summary": "not base64!"}, "bad")],
)
def test_a_bad_transfer_is_refused(fields: dict[str, str], error: str) -> None:
    body = {"key": 7, "target": "sip:a@b", "timeout_s": 5.0, **fields}
    payload = json.dumps(body).encode()
    with pytest.raises(IpcError, match=error):
        FrameDecoder().feed(HEADER.pack(len(payload), MsgType.TRANSFER) + payload)


def test_hop_times_summary() -> None:
    hops = HopTimes(keep=100)
    assert hops.summary("x") == {"x_p50_us": 0, "x_p99_us": 0, "x_max_us": 0}
    for i in range(1, 201):
        hops.add(i / 1e6)
    assert hops.count == 200
    assert hops.summary("x") == {"x_p50_us": 150, "x_p99_us": 199, "x_max_us": 200}


def test_config_round_trip() -> None:
    cfg = EndpointConfig(port=0, codecs=("PCMA",), max_calls=3, answer_delay_ms=250)
    assert config_from_json(config_to_json(cfg)) == cfg


# ------------------------------------------------------------------------- RemoteCall


class FakeLink:
    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.clears = 0
        self.hangups = 0
        self.transfers: list[tuple[int, str, float]] = []

    def send_audio(self, key: int, pcm: bytes) -> None:
        self.sent.append(pcm)

    def clear_playout(self, key: int) -> None:
        self.clears += 1

    def hangup(self, key: int) -> None:
        self.hangups += 1

    def transfer(self, key: int, target: str, timeout_s: float) -> None:
        self.transfers.append((key, target, timeout_s))

    def bridge(self, key: int, target: str, timeout_s: float, summary: bytes) -> None:
        self.transfers.append((key, target, timeout_s))


def make_call(link: FakeLink) -> RemoteCall:
    return RemoteCall(
        key=1,
        link=link,
        call_id="c1",
        remote_uri="<sip:caller@x>",
        local_uri="<sip:bot@y>",
        codec="PCMU/8000",
        sample_rate=8000,
        answered_at=10.0,
        frame_bytes=320,
    )


def report(call: RemoteCall, *, queued: int, played: int, clears: int, applied: int) -> None:
    call.on_audio(AudioFrame(1, queued, played, clears, applied, 0.0, 0.0, PCM), 1.0)


async def test_queued_frames_follow_sends_and_worker_reports() -> None:
    link = FakeLink()
    call = make_call(link)
    call.send(b"\x01" * 1000)  # 3 frames + a partial one
    call.send(b"")
    assert link.sent == [b"\x01" * 1000]
    assert call.queued_frames == 4  # nothing reported yet: all in flight
    report(call, queued=4, played=0, clears=0, applied=1000)
    assert call.queued_frames == 4
    call.send(b"\x02" * 640)
    assert call.queued_frames == 6  # 4 in the worker, 2 in flight
    report(call, queued=5, played=1, clears=0, applied=1640)
    assert call.queued_frames == 5 and call.frames_played == 1
    drained = asyncio.get_running_loop().create_task(call.wait_playout_drained())
    await asyncio.sleep(0)
    assert not drained.done()
    report(call, queued=0, played=6, clears=0, applied=1640)
    await asyncio.wait_for(drained, 1.0)
    assert call.queued_frames == 0 and call.frames_played == 6


async def test_clear_playout_counts_only_what_follows_it() -> None:
    link = FakeLink()
    call = make_call(link)
    call.send(bytes(3200))
    report(call, queued=10, played=0, clears=0, applied=3200)
    assert call.clear_playout() == 10
    assert link.clears == 1
    assert call.queued_frames == 0  # the clear is in flight: only later sends count
    report(call, queued=9, played=1, clears=0, applied=3200)  # sent before the clear landed
    assert call.queued_frames == 0
    call.send(bytes(640))
    assert call.queued_frames == 2
    report(call, queued=2, played=1, clears=1, applied=3840)  # the worker applied both
    assert call.queued_frames == 2
    report(call, queued=0, played=3, clears=1, applied=3840)
    assert call.queued_frames == 0
    await asyncio.wait_for(call.wait_playout_drained(), 1.0)


async def test_events_in_order_then_end() -> None:
    link = FakeLink()
    call = make_call(link)
    report(call, queued=0, played=0, clears=0, applied=0)
    call.on_dtmf("5", 100, 2.0)
    call.send(bytes(320))
    waiting = asyncio.get_running_loop().create_task(call.wait_playout_drained())
    call.on_ended("200 Normal call clearing", True, played=0)
    call.on_ended("again", False)  # ignored
    report(call, queued=1, played=0, clears=0, applied=0)  # late frame: ignored
    await asyncio.wait_for(waiting, 1.0)  # an ended call counts as drained
    events = [e async for e in call.receive()]
    assert [type(e) for e in events] == [AudioIn, DtmfIn, CallEnded]
    assert isinstance(events[0], AudioIn) and events[0].at == 1.0 and events[0].pcm == PCM
    assert isinstance(events[2], CallEnded) and events[2].by_remote
    assert call.ended and call.queued_frames == 0 and call.clear_playout() == 0
    call.send(bytes(320))
    await call.hangup()
    assert len(link.sent) == 1 and link.hangups == 0


async def test_hangup_once_and_unconsumed_audio_is_bounded() -> None:
    link = FakeLink()
    call = make_call(link)
    await call.hangup()
    await call.hangup()
    assert link.hangups == 1
    for _ in range(MAX_QUEUED_EVENTS + 5):
        report(call, queued=0, played=0, clears=0, applied=0)
    assert call.dropped == 5


def test_audio_frame_layout_is_fixed() -> None:
    frame = encode(AudioFrame(1, 2, 3, 4, 5, 6.0, 7.0, PCM))
    assert len(frame) == HEADER.size + struct.calcsize("<IIIIQdd") + len(PCM)


async def test_transfer_waits_for_the_workers_status() -> None:
    link = FakeLink()
    call = make_call(link)
    pending = asyncio.ensure_future(call.transfer("sip:agents@pbx", timeout_s=10.0))
    await asyncio.sleep(0)
    assert link.transfers == [(1, "sip:agents@pbx", 10.0)]
    # A second transfer while the first is out is refused without a message to the worker.
    again = await call.transfer("sip:other@pbx")
    assert not again.ok and "under way" in again.reason and len(link.transfers) == 1
    call.on_transfer_status(True, 200, "OK")
    assert await pending == TransferResult(True, 200, "OK")

    failing = asyncio.ensure_future(call.transfer("sip:agents@pbx"))
    await asyncio.sleep(0)
    call.on_ended("200 OK", True)  # the call ends before the worker reports
    assert await failing == TransferResult(False, 0, "call ended")
    after = await call.transfer("sip:agents@pbx")
    assert (after.ok, after.reason) == (False, "call ended") and len(link.transfers) == 2


async def test_transfer_gives_up_when_the_worker_never_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("telephony.remote_call.TRANSFER_REPLY_GRACE_S", 0.05)
    call = make_call(FakeLink())
    result = await call.transfer("sip:agents@pbx", timeout_s=0.05)
    assert (result.ok, result.status) == (False, 408)
