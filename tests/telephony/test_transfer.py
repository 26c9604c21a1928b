"""Blind transfer (REFER) from the endpoint, against sipp playing the caller's phone."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from telephony import CallEnded, CallHandle, EndpointConfig, SipServer
from telephony.events import TransferResult
from telephony.remote_call import RemoteCall
from tests.support.sipp_scenarios import (
    ANSWERED_ALONG_ROUTE,
    bye_to_contact,
    logged_refer_to,
    refer_notify,
    refer_received,
    refer_response,
)

pytestmark = pytest.mark.sip

TARGET = "sip:agents@127.0.0.1:5070"


async def wait_until(cond: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


class Transferring:
    """on_call: transfers the call shortly after answer; hangs up when it succeeded."""

    def __init__(self, timeout_s: float = 10.0) -> None:
        self.timeout_s = timeout_s
        self.results: list[TransferResult] = []
        self.ended: list[CallEnded] = []

    async def __call__(self, handle: CallHandle | RemoteCall) -> None:
        asyncio.get_running_loop().create_task(self._transfer(handle))
        async for event in handle.receive():
            if isinstance(event, CallEnded):
                self.ended.append(event)

    async def _transfer(self, handle: CallHandle | RemoteCall) -> None:
        await asyncio.sleep(0.3)
        result = await handle.transfer(TARGET, timeout_s=self.timeout_s)
        self.results.append(result)
        if result.ok:
            await handle.hangup()


def run_dir(tmp_path: Path) -> Path:
    (workdir,) = [p for p in tmp_path.iterdir() if p.name.startswith("sipp")]
    return workdir


async def test_accepted_transfer_then_our_bye(
    make_endpoint: Any, sipp: Any, helpers: Any, tmp_path: Path
) -> None:
    h = helpers
    app = Transferring()
    async with make_endpoint(app) as ep:
        xml = h.scenario(
            h.invite(h.sdp()),
            ANSWERED_ALONG_ROUTE,
            refer_received(10_000),
            refer_response(202, "Accepted"),
            refer_notify("SIP/2.0 200 OK"),
            h.answer_bye(),
        )
        res = await sipp(xml, ep.config.port, extra=("-trace_logs",))
        assert res.ok, res.stdout + res.errors
        await wait_until(lambda: len(app.ended) == 1)
    assert app.results == [TransferResult(True, 200, "OK")]
    assert logged_refer_to(run_dir(tmp_path)) == [TARGET]
    assert not app.ended[0].by_remote


@pytest.mark.parametrize(
    ("steps", "status"),
    [
        ((refer_response(603, "Decline"),), 603),
        ((refer_response(202, "Accepted"), refer_notify("SIP/2.0 486 Busy Here")), 486),
    ],
    ids=["refused", "target-busy"],
)
async def test_failed_transfer_leaves_the_call_up(
    make_endpoint: Any, sipp: Any, helpers: Any, steps: tuple[str, ...], status: int
) -> None:
    h = helpers
    app = Transferring()
    async with make_endpoint(app) as ep:
        xml = h.scenario(
            h.invite(h.sdp()),
            ANSWERED_ALONG_ROUTE,
            refer_received(10_000),
            *steps,
            h.pause(1500),
            bye_to_contact(),  # the call was still up: the caller ends it
        )
        res = await sipp(xml, ep.config.port)
        assert res.ok, res.stdout + res.errors
        await wait_until(lambda: len(app.ended) == 1)
    ((result),) = app.results
    assert (result.ok, result.status) == (False, status)
    assert app.ended[0].by_remote


async def test_transfer_without_outcome_times_out(
    make_endpoint: Any, sipp: Any, helpers: Any
) -> None:
    h = helpers
    app = Transferring(timeout_s=1.0)
    async with make_endpoint(app) as ep:
        xml = h.scenario(
            h.invite(h.sdp()),
            ANSWERED_ALONG_ROUTE,
            refer_received(10_000),
            refer_response(202, "Accepted"),  # ...and never a NOTIFY
            h.pause(2500),
            bye_to_contact(),
        )
        res = await sipp(xml, ep.config.port)
        assert res.ok, res.stdout + res.errors
        await wait_until(lambda: len(app.ended) == 1)
    ((result),) = app.results
    assert (result.ok, result.status) == (False, 408)


@pytest.mark.parametrize("accepted", [True, False], ids=["accepted", "refused"])
async def test_transfer_through_a_node_and_its_worker(
    sipp: Any, helpers: Any, free_udp_port: Callable[[], int], tmp_path: Path, accepted: bool
) -> None:
    """The same over IPC: the node's RemoteCall asks the worker, which holds the call."""
    h = helpers
    app = Transferring()
    cfg = EndpointConfig(
        port=free_udp_port(),
        rtp_port_start=random.randrange(30000, 38000, 2),
        rtp_port_range=400,
        log_level=1,
        max_calls=2,
    )
    node = SipServer(cfg, app)
    await node.start()
    try:
        outcome = (
            (refer_response(202, "Accepted"), refer_notify("SIP/2.0 200 OK"), h.answer_bye())
            if accepted
            else (refer_response(603, "Decline"), h.pause(1000), bye_to_contact())
        )
        xml = h.scenario(h.invite(h.sdp()), ANSWERED_ALONG_ROUTE, refer_received(10_000), *outcome)
        res = await sipp(xml, cfg.port, extra=("-trace_logs",))
        assert res.ok, res.stdout + res.errors
        await wait_until(lambda: len(app.ended) == 1)
    finally:
        await asyncio.wait_for(node.stop(), timeout=20)
    assert logged_refer_to(run_dir(tmp_path)) == [TARGET]
    ((result),) = app.results
    assert (result.ok, result.status) == ((True, 200) if accepted else (False, 603))
    assert app.ended[0].by_remote is not accepted


async def test_a_target_outside_transfer_targets_never_gets_a_refer(
    sipp: Any, helpers: Any, free_udp_port: Callable[[], int]
) -> None:
    """The worker's last check: a REFER the operator's list does not allow is not sent."""
    h = helpers
    app = Transferring()
    cfg = EndpointConfig(
        port=free_udp_port(),
        rtp_port_start=random.randrange(30000, 38000, 2),
        rtp_port_range=400,
        log_level=1,
        max_calls=2,
        transfer_targets=("sip:agents@127.0.0.1:5071",),
    )
    node = SipServer(cfg, app)
    await node.start()
    try:
        # sipp fails the scenario on any message it does not expect, a REFER included.
        xml = h.scenario(h.invite(h.sdp()), ANSWERED_ALONG_ROUTE, h.pause(1500), bye_to_contact(2))
        res = await sipp(xml, cfg.port)
        assert res.ok, res.stdout + res.errors
        await wait_until(lambda: len(app.ended) == 1)
    finally:
        await asyncio.wait_for(node.stop(), timeout=20)
    assert app.results == [TransferResult(False, 403, "transfer target not allowed")]
    assert app.ended[0].by_remote
