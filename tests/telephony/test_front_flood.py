"""Floods at a running node's SIP front: a legitimate caller from another address is answered.

Every flood here is bounded (a few thousand datagrams) and stays on loopback.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from typing import Any

import pytest

from telephony.floodguard import FrontLimits
from tests.telephony.nodekit import Calls, dial_tone, wait_until

pytestmark = pytest.mark.sip

FLOODER = "127.0.0.3"
PCMU_SDP = (
    b"v=0\r\no=- 1 1 IN IP4 127.0.0.3\r\ns=-\r\nc=IN IP4 127.0.0.3\r\nt=0 0\r\n"
    b"m=audio 9 RTP/AVP 0\r\n"
)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def request(method: str, n: int, port: int) -> bytes:
    body = PCMU_SDP if method == "INVITE" else b""
    head = (
        f"{method} sip:{n}@127.0.0.1 SIP/2.0\r\n"
        f"Via: SIP/2.0/UDP {FLOODER}:{port};branch=z9hG4bK-flood-{n}\r\n"
        f"From: <sip:scanner@{FLOODER}>;tag=f{n}\r\nTo: <sip:{n}@127.0.0.1>\r\n"
        f"Call-ID: flood-{method}-{n}@{FLOODER}\r\nCSeq: 1 {method}\r\nMax-Forwards: 70\r\n"
        f"Contact: <sip:scanner@{FLOODER}:{port}>\r\n"
    )
    if body:
        head += "Content-Type: application/sdp\r\n"
    return (head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def flood(
    port: int,
    methods: tuple[str, ...],
    count: int,
    pace_every: int = 50,
    window: int | None = None,
) -> int:
    """Send ``count`` requests (fresh Call-IDs) from FLOODER; returns the answers read.

    With ``window``, at most that many requests are unanswered at a time (a flood the node
    keeps up with, none lost in socket buffers however busy the machine); without it, as
    fast as the pacing allows. Answers still on their way are read until 1 s of quiet."""
    answers = 0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((FLOODER, 0))
        me = s.getsockname()[1]

        def read(wait_s: float) -> bool:
            nonlocal answers
            s.settimeout(wait_s)
            try:
                s.recv(65535)
            except (TimeoutError, BlockingIOError):
                return False
            answers += 1
            return True

        deadline = time.monotonic() + 60.0
        for n in range(count):
            s.sendto(request(methods[n % len(methods)], n, me), ("127.0.0.1", port))
            if n % pace_every == pace_every - 1:
                time.sleep(0.002)  # not past the kernel's socket buffer at once
            while window is not None and n + 1 - answers >= window:
                if not read(1.0) or time.monotonic() > deadline:
                    window = None  # answers stopped coming: send the rest unpaced
            while read(0.0):
                pass
        while read(1.0):
            pass
    return answers


async def test_options_flood_makes_no_relay_and_no_descriptor(make_node: Any) -> None:
    """OPTIONS with fresh Call-IDs are answered by the front: no route, no socket, no worker."""
    limits = FrontLimits(per_source_burst=100_000, node_burst=100_000)
    async with make_node(Calls(), max_calls=3, limits=limits) as node:
        fds = open_fds()
        answers = await asyncio.to_thread(
            flood, node.config.port, ("OPTIONS",), 3000, 10, window=64
        )
        stats = node.stats()
        # Paced by its answers, the flood loses none in the kernel's socket buffers.
        assert stats["front_answered_options"] == 3000 and answers == 3000, (stats, answers)
        assert stats["front_relays_open"] == 0 and stats["front_relayed_to_workers"] == 0
        assert open_fds() - fds <= 2, "descriptors grew with the flood"


async def test_flooding_source_is_banned_while_another_caller_talks(
    make_node: Any, hears_own_tone: Any
) -> None:
    """A scanner floods OPTIONS and INVITEs (fresh Call-IDs) from 127.0.0.3 while a caller on
    127.0.0.1 dials in: the scanner is cut to its rate, then banned; the caller is answered
    and hears its own tone back; the node's descriptors and routes stay bounded."""
    calls = Calls()
    calls.echo = True
    limits = FrontLimits(per_source_rate=20, per_source_burst=40, ban_after_drops=100, ban_s=60)
    async with make_node(calls, max_calls=6, codecs=("G722",), limits=limits) as node:
        fds = open_fds()
        port = node.config.port
        flooding = asyncio.create_task(
            asyncio.to_thread(flood, port, ("OPTIONS", "INVITE", "REGISTER"), 4000)
        )
        await asyncio.sleep(0.2)  # the flood is under way when the caller dials
        res = await dial_tone(port, 700.0, 2.5, codecs=("G722",))
        answers = await flooding
        stats = node.stats()
        hears_own_tone(res, 700.0)
        assert len(calls.calls) == 1 and calls.calls[0].remote_uri.find(FLOODER) < 0
        front = node._front
        assert front is not None and front.guard.banned(FLOODER, time.monotonic())
        assert stats["front_bans"] == 1 and stats["front_dropped_banned"] > 0
        # Over its rate: at most the burst and the rate for the flood's length got through.
        assert answers <= 40 + 20 * 10, answers
        assert stats["front_dropped_rate"] >= 100
        relayed = stats["front_relayed_to_workers"]
        assert relayed <= 40 + 20 * 10, relayed  # the flood's INVITEs that got through, and ours
        assert open_fds() - fds <= 60, "descriptors grew with the flood"
        assert stats["rejected_codec"] >= 1  # the scanner's INVITEs that got through: 488
        await wait_until(lambda: node.stats()["calls_active"] == 0, 10, "call ended")
