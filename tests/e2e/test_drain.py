"""SIGTERM drains a real ``switchboard run``: no new call, live calls go on, every record kept.

Each test starts a bot of its own (it is stopped by the test), so each pays a model load.
"""

from __future__ import annotations

import asyncio
import re
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np
import pytest
from aiortc import RTCPeerConnection, RTCSessionDescription
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from bot.calllog.models import Call, TurnRow
from bot.calllog.store import make_engine
from telephony.dialer import dial
from testkit.botproc import BotProcess, run_bot
from testkit.voices import speak
from tests.admin.conftest import add_token, bearer
from tests.admin.test_webrtc_limits import offer_of

pytestmark = [pytest.mark.sip, pytest.mark.models]

QUESTION = "Where is my order?"  # one of the default profile's intents: a cached answer


async def wait_for(cond: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        await asyncio.sleep(0.05)


def logged(bot: BotProcess, text: str) -> bool:
    return any(text in line for line in list(bot.lines))


def ask(port: int, method: str) -> str:
    """Send one out-of-dialog request to the bot; its final answer's first lines."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        me = s.getsockname()[1]
        body = (
            "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n"
            "m=audio 9 RTP/AVP 0\r\n"
            if method == "INVITE"
            else ""
        )
        msg = (
            f"{method} sip:bot@127.0.0.1:{port} SIP/2.0\r\n"
            f"Via: SIP/2.0/UDP 127.0.0.1:{me};branch=z9hG4bK-drain-{method}\r\n"
            f"From: <sip:late@127.0.0.1>;tag=l1\r\nTo: <sip:bot@127.0.0.1>\r\n"
            f"Call-ID: drain-{method}@127.0.0.1\r\nCSeq: 1 {method}\r\nMax-Forwards: 70\r\n"
            f"Contact: <sip:late@127.0.0.1:{me}>\r\nContent-Type: application/sdp\r\n"
            f"Content-Length: {len(body)}\r\n\r\n{body}"
        )
        s.settimeout(3.0)
        s.sendto(msg.encode(), ("127.0.0.1", port))
        while True:
            reply = s.recv(65535).decode(errors="replace")
            if not reply.startswith("SIP/2.0 1"):
                return reply


def call_rows(data_dir: Path) -> list[tuple[Call, int]]:
    engine = create_engine(f"sqlite:///{data_dir / 'switchboard.db'}")
    try:
        with Session(engine) as session:
            out = []
            for call in session.scalars(select(Call)):
                turns = session.scalars(select(TurnRow).where(TurnRow.call_id == call.id)).all()
                out.append((call, len(turns)))
            return out
    finally:
        engine.dispose()


def rms(samples: np.ndarray) -> float:
    x = samples.astype(np.float64)
    return float(np.sqrt(np.mean(x * x))) if x.size else 0.0


async def test_sigterm_refuses_new_calls_lets_the_live_one_finish_and_keeps_its_records(
    tmp_path: Path,
) -> None:
    env = {
        "SWITCHBOARD_DATA_DIR": str(tmp_path),
        "SWITCHBOARD_SIP__DRAIN_S": "60",
        "SWITCHBOARD_SIP__RETRY_AFTER_S": "7",
    }
    with run_bot(env=env) as bot:
        # The caller asks its question 5 s into the call and hangs up at 14 s.
        live = asyncio.ensure_future(
            dial(bot.uri, script=[(5.0, speak(QUESTION))], record_seconds=14)
        )
        await wait_for(lambda: logged(bot, "greeting queued"), 20, "the call answered")
        signalled = time.monotonic()
        bot.proc.send_signal(signal.SIGTERM)
        await wait_for(lambda: logged(bot, "draining"), 5, "the drain started")
        # A new call and an OPTIONS ping get 503 with Retry-After: a trunk goes elsewhere.
        for method in ("INVITE", "OPTIONS"):
            reply = await asyncio.to_thread(ask, bot.port, method)
            assert reply.startswith("SIP/2.0 503 "), (method, reply[:200])
            assert re.search(r"^Retry-After: 7\r$", reply, re.M), reply
        result = await live
        # The live call went on: answered before the signal, ended by the caller, and the
        # bot answered the question asked after the signal.
        assert result.sip_final_status == 200 and not result.ended_by_remote, result.error
        assert result.first_tick_at is not None
        after = int((signalled + 3.0 - result.first_tick_at) / 0.02) * 160
        assert rms(result.received[after:]) > 300, "nothing heard from the bot after SIGTERM"
        assert await asyncio.to_thread(bot.proc.wait, 20) == 0
        assert logged(bot, "drained: no live call")
        stats = bot.records("sip_stats")[-1]  # the counters, logged once more at the stop
        assert stats["front_rejected_draining"] == 1 and stats["front_answered_options"] == 1
        assert stats["calls_total"] == 1
    ((call, turns),) = call_rows(tmp_path)
    assert call.ended_at is not None and call.end_reason is not None
    assert turns >= 1, "the turn asked after SIGTERM is not in the call log"


async def test_a_second_sigterm_stops_at_once_and_keeps_the_records(tmp_path: Path) -> None:
    env = {"SWITCHBOARD_DATA_DIR": str(tmp_path), "SWITCHBOARD_SIP__DRAIN_S": "300"}
    with run_bot(env=env) as bot:
        live = asyncio.ensure_future(dial(bot.uri, record_seconds=40))
        await wait_for(lambda: logged(bot, "greeting queued"), 20, "the call answered")
        bot.proc.send_signal(signal.SIGTERM)
        await wait_for(lambda: logged(bot, "draining"), 5, "the drain started")
        await asyncio.sleep(1.0)
        assert bot.proc.poll() is None  # draining: the live call holds the node
        stopped_at = time.monotonic()
        bot.proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(bot.proc.wait, 15) == 0
        assert time.monotonic() - stopped_at < 10
        result = await live
        assert result.sip_final_status == 200 and result.ended_by_remote  # the bot's BYE
    ((call, _),) = call_rows(tmp_path)
    assert call.ended_at is not None and call.end_reason is not None


async def test_browser_calls_count_against_the_call_limit_and_the_drain_waits_for_them(
    tmp_path: Path,
) -> None:
    """One SIP and one browser call on a limit of two: a third call of either kind gets
    503; SIGTERM's drain waits for both, the browser call after the SIP call has ended."""
    env = {
        "SWITCHBOARD_DATA_DIR": str(tmp_path),
        "SWITCHBOARD_SIP__DRAIN_S": "60",
        "SWITCHBOARD_SIP__MAX_CALLS": "2",
    }
    peers = [RTCPeerConnection(), RTCPeerConnection()]
    with run_bot(env=env) as bot:
        engine = make_engine(f"sqlite+aiosqlite:///{tmp_path / 'switchboard.db'}")
        try:
            token = await add_token(engine, "vic", "viewer")
        finally:
            await engine.dispose()
        sip_call = asyncio.ensure_future(dial(bot.uri, record_seconds=20))
        try:
            await wait_for(lambda: logged(bot, "greeting queued"), 30, "the SIP call answered")
            async with httpx.AsyncClient(
                base_url=bot.admin_url, headers=bearer(token), timeout=30
            ) as api:

                async def live() -> list[str]:
                    r = await api.get("/api/v1/calls/live")
                    return sorted(c["caller"] for c in r.json())

                async def browser_offer(pc: RTCPeerConnection) -> httpx.Response:
                    offer = {"sdp": await offer_of(pc), "type": "offer"}
                    return await api.post("/api/v1/webrtc/offer", json=offer)

                r = await browser_offer(peers[0])
                assert r.status_code == 200, r.text
                await peers[0].setRemoteDescription(RTCSessionDescription(**r.json()))
                for _ in range(300):
                    if len(await live()) == 2:
                        break
                    await asyncio.sleep(0.1)
                assert (await live())[-1] == "webrtc:vic"

                # Two calls on a limit of two: the next of either kind gets 503.
                reply = await asyncio.to_thread(ask, bot.port, "INVITE")
                assert reply.startswith("SIP/2.0 503 "), reply[:200]
                r = await browser_offer(peers[1])
                assert r.status_code == 503 and "call limit" in r.text, r.text

                bot.proc.send_signal(signal.SIGTERM)
                await wait_for(
                    lambda: logged(bot, "for 2 live (1 SIP, 1 browser)"), 10, "the drain"
                )
                result = await sip_call  # its caller hangs up at 20 s
                assert result.sip_final_status == 200 and not result.ended_by_remote
                for _ in range(300):
                    if await live() == ["webrtc:vic"]:
                        break
                    await asyncio.sleep(0.1)
                assert await live() == ["webrtc:vic"]
                assert bot.proc.poll() is None, "the drain did not wait for the browser call"
            await peers[0].close()  # the browser hangs up: the node has no call left
            assert await asyncio.to_thread(bot.proc.wait, 30) == 0
            assert logged(bot, "drained: no live call")
        finally:
            sip_call.cancel()
            for pc in peers:
                await pc.close()
