"""A caller's REFER never makes the node place a call (toll fraud), and never crashes it.

The caller sends REFERs inside its call naming a listener on loopback; the node must decline
each one, dial nothing (the listener hears no INVITE), and keep its worker serving calls.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import pytest

from telephony import CallEnded, CallHandle
from telephony.remote_call import RemoteCall
from tests.support.sipp_scenarios import ANSWERED_ALONG_ROUTE, bye_to_contact, caller_refer
from tests.telephony.nodekit import alive, wait_until

pytestmark = pytest.mark.sip


class Listening:
    """A UDP socket on loopback that keeps every datagram sent to it (the 'attacker')."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]

    def received(self) -> list[bytes]:
        got: list[bytes] = []
        while True:
            try:
                got.append(self.sock.recv(65535))
            except BlockingIOError:
                return got

    def close(self) -> None:
        self.sock.close()


class Holding:
    """on_call: keeps the call up and notes how it ended."""

    def __init__(self) -> None:
        self.ended: list[CallEnded] = []

    async def __call__(self, handle: CallHandle | RemoteCall) -> None:
        async for event in handle.receive():
            if isinstance(event, CallEnded):
                self.ended.append(event)


@pytest.mark.parametrize("listed", [False, True], ids=["unlisted", "listed-target"])
async def test_a_callers_refer_is_declined_and_nothing_is_dialled(
    make_node: Callable[..., Any], sipp: Any, helpers: Any, listed: bool
) -> None:
    h = helpers
    app = Holding()
    listener = Listening()
    target = f"sip:attacker@127.0.0.1:{listener.port}"
    # Even a target the operator lists for the bot's own transfers is not the caller's to use.
    overrides: dict[str, Any] = {"max_calls": 2}
    if listed:
        overrides["transfer_targets"] = (target,)
    try:
        async with make_node(app, **overrides) as node:
            pids = list(node.worker_pids)
            xml = h.scenario(
                h.invite(h.sdp()),
                ANSWERED_ALONG_ROUTE,
                caller_refer(target, 2, 603),
                caller_refer(target + ";transport=udp", 3, 603),
                caller_refer(f"{target}?Replaces=abc%3Bto-tag%3D1%3Bfrom-tag%3D2", 4, 603),
                h.pause(3000),
                bye_to_contact(5),
            )
            res = await sipp(xml, node.config.port)
            assert res.ok, res.stdout + res.errors
            await wait_until(lambda: len(app.ended) == 1, 10.0)
            assert listener.received() == [], "the node sent something to the REFER's target"
            # The worker is alive and answers the next caller (a pjsua leg nobody owned used
            # to crash it 15-23 s after the REFERs; nothing is created now, so nothing waits).
            assert all(alive(p) for p in pids)
            res = await sipp(
                h.scenario(
                    h.invite(h.sdp()), ANSWERED_ALONG_ROUTE, h.pause(500), bye_to_contact(2)
                ),
                node.config.port,
            )
            assert res.ok, res.stdout + res.errors
            await wait_until(lambda: len(app.ended) == 2, 10.0)
            # Counted (the workers' counters reach the node about once a second).
            await wait_until(lambda: node.stats()["refer_refused"] == 3, 5.0, "refer_refused")
    finally:
        listener.close()
