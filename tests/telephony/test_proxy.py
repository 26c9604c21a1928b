"""Kamailio (infra/kamailio/kamailio.cfg) in front of two nodes: round robin and failover.

Real SIP through a real proxy over loopback: each call goes through Kamailio to a node, whose
on_call echoes the caller's tone; a draining node (what SIGTERM does) answers 503 and the
proxy moves the call to the other node, while the drained node's live call goes on to its BYE
through the proxy (Record-Route).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from telephony.dialer import dial
from tests.support.kamailio import kamailio_binary, run_kamailio
from tests.telephony.nodekit import Calls, tone, wait_until
from tests.telephony.rawua import RawUA, header

pytestmark = [
    pytest.mark.sip,
    pytest.mark.skipif(
        kamailio_binary() is None,
        reason="kamailio not installed (`bash infra/install.sh --test` installs it)",
    ),
]

#: No OPTIONS probes during the test: only a call's 503 or timeout takes a node out.
NO_PROBES_S = 3600


async def call_through(proxy_port: int, freq: float, seconds: float) -> Any:
    return await dial(
        f"sip:bot@127.0.0.1:{proxy_port}",
        play=tone(freq, seconds - 1.0),
        play_at_s=0.2,
        record_seconds=seconds,
    )


async def test_calls_through_kamailio_fail_over_from_a_draining_node(
    make_node: Any, hears_own_tone: Any
) -> None:
    calls_a, calls_b = Calls(), Calls()
    calls_a.echo = calls_b.echo = True
    async with (
        make_node(calls_a, max_calls=4) as node_a,
        make_node(calls_b, max_calls=4) as node_b,
    ):
        nodes = {"a": (node_a, calls_a), "b": (node_b, calls_b)}
        with run_kamailio([node_a.config.port, node_b.config.port], ping_s=NO_PROBES_S) as proxy:
            # Two calls one after the other: round robin gives one to each node.
            for f in (440.0, 620.0):
                hears_own_tone(await call_through(proxy.port, f, 3.0), f)
            assert len(calls_a.calls) == 1 and len(calls_b.calls) == 1, proxy.log.read_text()
            for node, _ in nodes.values():
                assert node.stats()["front_rejected_draining"] == 0

            # A long call is up on one node; that node then drains as on SIGTERM.
            live = asyncio.get_running_loop().create_task(call_through(proxy.port, 300.0, 8.0))
            await wait_until(
                lambda: node_a.active_calls + node_b.active_calls == 1, 10, "live call"
            )
            name = "a" if node_a.active_calls == 1 else "b"
            drained, drained_calls = nodes[name]
            other, other_calls = nodes["b" if name == "a" else "a"]
            drain = asyncio.get_running_loop().create_task(drained.drain(30.0))
            await wait_until(lambda: drained.draining, what="drain started")
            before = len(other_calls.calls)

            # New calls: round robin sends one of them to the draining node, which answers 503;
            # the proxy moves it to the other node. Every one is answered and echoed there.
            for f in (500.0, 700.0):
                hears_own_tone(await call_through(proxy.port, f, 3.0), f)
            assert len(other_calls.calls) == before + 2
            assert len(drained_calls.calls) == 2  # the first call and the live one, no new one
            assert drained.stats()["front_rejected_draining"] >= 1, proxy.log.read_text()
            assert other.stats()["front_rejected_draining"] == 0
            assert "next node" in proxy.log.read_text()

            # The drained node's live call went on and ended by its BYE through the proxy.
            hears_own_tone(await live, 300.0)
            assert await drain is True
            assert drained_calls.calls[-1].ended
            assert drained.stats()["calls_total"] == 2


async def test_calls_through_kamailio_skip_a_node_that_does_not_answer(
    make_node: Any, hears_own_tone: Any
) -> None:
    calls_a, calls_b = Calls(), Calls()
    calls_a.echo = calls_b.echo = True
    async with (
        make_node(calls_a, max_calls=4) as node_a,
        make_node(calls_b, max_calls=4) as node_b,
    ):
        ports = [node_a.config.port, node_b.config.port]
        with run_kamailio(ports, ping_s=NO_PROBES_S, node_timeout_ms=1000) as proxy:
            await node_a.stop()  # gone: its port is closed, nothing answers there
            # Round robin sends one of the two calls to the stopped node first: no reply in
            # 1 s, and the proxy relays it to the other node, which answers both.
            for f in (440.0, 620.0):
                hears_own_tone(await call_through(proxy.port, f, 3.0), f)
            assert not calls_a.calls
            assert len(calls_b.calls) == 2
            assert "next node" in proxy.log.read_text()


async def test_kamailio_probes_take_a_draining_node_out_before_any_call(
    make_node: Any, hears_own_tone: Any
) -> None:
    calls_a, calls_b = Calls(), Calls()
    calls_a.echo = calls_b.echo = True
    async with (
        make_node(calls_a, max_calls=4) as node_a,
        make_node(calls_b, max_calls=4) as node_b,
    ):
        ports = [node_a.config.port, node_b.config.port]
        with run_kamailio(ports, ping_s=1) as proxy:
            drain = asyncio.get_running_loop().create_task(node_a.drain(30.0))
            await wait_until(lambda: node_a.draining, what="drain started")
            probes = node_a.stats()["front_answered_options"]
            # Two OPTIONS probes answered 503 since: the first one's reply has been taken
            # by the proxy a second before the second probe came.
            await wait_until(
                lambda: node_a.stats()["front_answered_options"] >= probes + 2,
                10,
                "two probes of the draining node",
            )
            for f in (440.0, 620.0):
                hears_own_tone(await call_through(proxy.port, f, 3.0), f)
            assert len(calls_b.calls) == 2, proxy.log.read_text()
            # The proxy knew from its probes: no call was even offered to the draining node.
            assert not calls_a.calls
            assert node_a.stats()["front_rejected_draining"] == 0
            assert await drain is True


async def test_the_proxy_stays_on_the_route_of_the_dialog(make_node: Any) -> None:
    calls = Calls()

    async def hang_up_soon(call: Any) -> None:
        await asyncio.sleep(0.5)
        await call.hangup()

    calls.action = hang_up_soon
    async with make_node(calls, max_calls=4) as node:
        with run_kamailio([node.config.port], ping_s=NO_PROBES_S) as proxy:
            ua = RawUA("127.0.0.1")
            try:
                ua.invite(("127.0.0.1", proxy.port), "through-proxy")
                await wait_until(lambda: ua.finals("through-proxy") == [200], 10, "200 OK")
                ok = next(r for r in ua.got if r.first.startswith("SIP/2.0 200"))
                # The 200 came back through the proxy, which record-routed the dialog...
                assert ok.src == ("127.0.0.1", proxy.port)
                record_route = header(ok.head, "record-route") or ""
                assert f"127.0.0.1:{proxy.port};" in record_route and ";lr" in record_route
                # ...so the node's BYE comes through the proxy too, as does our 200 to it.
                await wait_until(lambda: bool(ua.requests("BYE")), 10, "the node's BYE")
                assert all(r.src == ("127.0.0.1", proxy.port) for r in ua.requests("BYE"))
                await wait_until(lambda: node.active_calls == 0, 10, "call ended on the node")
                await wait_until(lambda: bool(calls.ended()), 10, "call ended event")
            finally:
                ua.close()
