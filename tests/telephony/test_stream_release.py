"""A call's stream leaves the conference bridge before its media is torn down, whichever
side ends the call (``telephony.stream_release``): the pjproject race it avoids aborted a
process that ended a call while the bridge's clock was sending its RTP."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from telephony import AudioIn, CallHandle, pjsip_c
from telephony.dialer import dial
from telephony.pjsip_c import bye_call_id
from tests.telephony.nodekit import tone, wait_until

BYE = (
    b"BYE sip:bot@127.0.0.1:5060 SIP/2.0\r\n"
    b"Via: SIP/2.0/UDP 127.0.0.1:5070;branch=z9hG4bK-1\r\n"
    b"From: <sip:a@127.0.0.1>;tag=1\r\nTo: <sip:bot@127.0.0.1>;tag=2\r\n"
    b"%s\r\nCSeq: 2 BYE\r\nContent-Length: 0\r\n\r\n"
)


@pytest.mark.parametrize(
    ("header", "want"),
    [
        (b"Call-ID: abc-123@host", "abc-123@host"),
        (b"call-id:abc", "abc"),
        (b"i: short-form ", "short-form"),
        (b"CALL-ID :\tx@y", "x@y"),
    ],
)
def test_the_bye_s_call_id_is_read_from_its_text(header: bytes, want: str) -> None:
    head = b"\x00\x17\x80binary transport data" + bytes(40)
    assert bye_call_id(head + BYE % header + b"\x00leftover Call-ID: not-this") == want


def test_no_call_id_is_read_from_what_is_not_a_bye_with_one() -> None:
    assert bye_call_id(BYE % b"X-Other: 1") is None
    assert bye_call_id(b"INVITE sip:x SIP/2.0\r\nCall-ID: a\r\n\r\n") is None
    # The body is not headers.
    assert bye_call_id(BYE % b"X: 1" + b"Call-ID: in-the-body\r\n") is None


@pytest.mark.sip
async def test_each_ending_takes_the_stream_out_first(make_endpoint: Any) -> None:
    """The caller's BYE (seen by the node before pjsip acts on it) and the node's own BYE
    (seen by the dialer) each end a call whose stream had left the bridge on both sides."""
    hang_up: set[str] = set()

    async def echo_or_hang_up(handle: CallHandle) -> None:
        if hang_up:
            await asyncio.sleep(1.0)
            await handle.hangup()
            return
        async for event in handle.receive():
            if isinstance(event, AudioIn):
                handle.send(event.pcm)

    async with make_endpoint(echo_or_hang_up) as ep:
        uri = f"sip:bot@127.0.0.1:{ep.config.port}"
        by_caller = await dial(uri, play=tone(600.0, 1.0), record_seconds=1.6)
        assert by_caller.sip_final_status == 200, by_caller.error
        assert not by_caller.ended_by_remote
        await wait_until(lambda: ep.stats()["streams_released"] == 1, what="the caller's BYE")
        hang_up.add("yes")
        by_node = await dial(uri, play=tone(600.0, 0.5), record_seconds=6.0)
        assert by_node.sip_final_status == 200, by_node.error
        assert by_node.ended_by_remote
        await wait_until(lambda: ep.stats()["streams_released"] == 2, what="the node's BYE")
    assert by_caller.stream_released, "the dialer's own BYE went before its stream left"
    assert by_node.stream_released, "the node's BYE reached the dialer's teardown first"


@pytest.mark.sip
async def test_a_bye_whose_call_id_cannot_be_read_is_counted_and_still_ends_the_call(
    make_endpoint: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A pjproject whose ``pjsip_rx_data`` has another layout (the Call-ID is read from
    where 2.15.1 keeps the packet's text): the watcher reads nothing, and says so."""
    monkeypatch.setattr(pjsip_c, "bye_call_id", lambda raw: None)

    async def echo(handle: CallHandle) -> None:
        async for event in handle.receive():
            if isinstance(event, AudioIn):
                handle.send(event.pcm)

    async with make_endpoint(echo) as ep:
        uri = f"sip:bot@127.0.0.1:{ep.config.port}"
        for _ in range(2):
            result = await dial(uri, play=tone(600.0, 0.5), record_seconds=1.0)
            assert result.sip_final_status == 200, result.error
        await wait_until(lambda: ep.stats()["calls_active"] == 0, what="both calls ended")
        stats = ep.stats()
    assert stats["byes_unread"] == 2
    assert stats["streams_released"] == 0
    said = [r.getMessage() for r in caplog.records if "Call-ID could not be read" in r.getMessage()]
    assert len(said) == 1, said  # once, not once a call
