"""Bridged transfer from a worker: the project's dialer calls in, the worker calls an agent
(baresip answering by itself, or sipp refusing) and joins the two calls."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from telephony import CallEnded
from telephony.dialer import dial
from telephony.events import AudioIn, TransferResult
from telephony.remote_call import RemoteCall
from testkit.ports import free_udp_port
from tests.support.agents import RINGING_UAS, baresip_agent, busy_uas, sipp_agent
from tests.telephony.conftest import tone_ratio

pytestmark = pytest.mark.sip

RATE = 8000
#: What baresip prints when its call ends.
AGENT_CALL_OVER = " terminated (duration"


def tone(freq: float, seconds: float, amp: int = 8000) -> bytes:
    t = np.arange(int(seconds * RATE)) / RATE
    return (amp * np.sin(2 * np.pi * freq * t)).astype("<i2").tobytes()


def voiced_s(samples: np.ndarray) -> float:
    """Seconds of 20 ms frames louder than -40 dBFS."""
    n = len(samples) // 160
    frames = samples[: n * 160].reshape(n, 160).astype(np.float64)
    return float((np.sqrt((frames**2).mean(axis=1)) > 330).sum()) * 0.02


@dataclass
class Bridging:
    """on_call: bridges the call to ``target`` ``after_s`` after the answer."""

    target: str
    timeout_s: float = 10.0
    after_s: float = 0.5
    summary: bytes = b""
    results: list[TransferResult] = field(default_factory=list)
    ended: list[CallEnded] = field(default_factory=list)
    frames_after: int = 0  # caller frames the bot got once the bridge was reported up
    result_at: float | None = None

    async def __call__(self, handle: RemoteCall) -> None:
        task = asyncio.get_running_loop().create_task(self._bridge(handle))
        async for event in handle.receive():
            if isinstance(event, CallEnded):
                self.ended.append(event)
            # (frames already on their way when the join was made may still come)
            elif isinstance(event, AudioIn) and self.result_at is not None:
                self.frames_after += event.at > self.result_at + 0.2
        await task

    async def _bridge(self, handle: RemoteCall) -> None:
        await asyncio.sleep(self.after_s)
        result = await handle.bridge(self.target, timeout_s=self.timeout_s, summary=self.summary)
        self.result_at = time.monotonic()
        self.results.append(result)


async def wait_for(cond: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


async def test_the_agent_and_the_caller_hear_each_other_until_the_agent_hangs_up(
    make_node: Any, speech: Any, tmp_path: Path
) -> None:
    port = free_udp_port()
    app = Bridging(f"sip:agent@127.0.0.1:{port}")
    agent_voice = tone(1000, 6.0)  # then baresip hangs up: its WAV is over
    async with (
        make_node(app, max_calls=2) as node,
        baresip_agent(port, agent_voice, tmp_path / "agent", timeout_s=30) as agent,
    ):
        caller_voice = speech.samples.tobytes()
        result = await dial(
            f"sip:bot@127.0.0.1:{node.config.port}",
            play=caller_voice,
            play_at_s=2.0,
            record_seconds=15,
        )
        await wait_for(lambda: len(app.ended) == 1)
    assert app.results == [TransferResult(True, 200, "bridged")], app.results
    assert result.sip_final_status == 200, result.error
    # The agent ended it: the caller got the BYE, the bot's call says why.
    assert result.ended_by_remote
    assert app.ended[0].reason == "agent hung up"
    assert len(result.received) < 11 * RATE, len(result.received) / RATE
    # The caller heard the agent's tone; the agent heard the caller's speech.
    heard = result.received[int(1.5 * RATE) :]
    assert voiced_s(heard) > 3.0 and tone_ratio(heard, 1000) > 0.8, voiced_s(heard)
    assert voiced_s(agent.heard) > 1.5, (voiced_s(agent.heard), agent.log[-2000:])
    # ...and the bot no longer got the caller's audio once the calls were joined.
    assert app.frames_after == 0


async def test_a_warm_handoff_plays_the_summary_to_the_agent_first(
    make_node: Any, speech: Any, tmp_path: Path
) -> None:
    port = free_udp_port()
    summary = tone(500, 2.0)
    app = Bridging(f"sip:agent@127.0.0.1:{port}", summary=summary)
    async with (
        make_node(app, max_calls=2) as node,
        baresip_agent(port, tone(1000, 20.0), tmp_path / "agent", timeout_s=30) as agent,
    ):
        result = await dial(
            f"sip:bot@127.0.0.1:{node.config.port}",
            play=speech.samples.tobytes(),
            play_at_s=4.0,
            record_seconds=8,
        )
        await wait_for(lambda: len(app.ended) == 1)
        await asyncio.sleep(1.0)  # the agent's leg gets its BYE
    assert app.results == [TransferResult(True, 200, "bridged")], app.results
    # The agent's first voiced audio is the summary, the caller's speech after it.
    heard = agent.heard
    voiced = np.flatnonzero(np.abs(heard) > 1000)
    assert voiced.size, agent.log[-2000:]
    start = int(voiced[0])
    assert tone_ratio(heard[start : start + int(1.8 * RATE)], 500) > 0.8
    assert voiced_s(heard[start + int(2.2 * RATE) :]) > 1.0
    # The caller did not hear the summary: the caller's side was not joined yet.
    assert tone_ratio(result.received, 500) < 0.05
    # The caller hung up: the agent's leg ended with it (baresip saw the call end).
    assert not result.ended_by_remote
    assert app.ended[0].by_remote
    assert AGENT_CALL_OVER in agent.log, agent.log[-2000:]


@pytest.mark.parametrize(
    ("uas", "status"),
    [(busy_uas(486, "Busy Here"), 486), (RINGING_UAS, 408)],
    ids=["busy", "no-answer"],
)
async def test_a_failed_agent_leg_leaves_the_caller_with_the_bot(
    make_node: Any, tmp_path: Path, uas: str, status: int
) -> None:
    port = free_udp_port()
    app = Bridging(f"sip:agent@127.0.0.1:{port}", timeout_s=2.0)
    async with (
        make_node(app, max_calls=2) as node,
        sipp_agent(uas, port, tmp_path / "agent", timeout_s=15) as sipp_status,
    ):
        result = await dial(
            f"sip:bot@127.0.0.1:{node.config.port}", play=tone(700, 1.0), play_at_s=4.5,
            record_seconds=7,
        )  # fmt: skip
        await wait_for(lambda: len(app.ended) == 1)
    ((res),) = app.results
    assert (res.ok, res.status) == (False, status), res
    assert sipp_status == [0]  # the agent saw the INVITE end as its scenario expected
    # The call went on with the bot: the caller's tone after the failure reached it.
    assert result.sip_final_status == 200 and not result.ended_by_remote
    assert app.ended[0].by_remote
    assert app.frames_after > 50  # ...and the bot kept getting the caller's audio


async def test_an_agent_call_that_cannot_be_placed_is_a_failure(
    make_node: Any, tmp_path: Path
) -> None:
    app = Bridging("sip:agent@")  # pjsip cannot parse it
    async with make_node(app, max_calls=2) as node:
        await dial(f"sip:bot@127.0.0.1:{node.config.port}", record_seconds=2)
        await wait_for(lambda: len(app.ended) == 1)
    ((res),) = app.results
    assert not res.ok and "agent call not placed" in res.reason, res


@dataclass
class Staggered:
    """on_call: the first call bridges at once, the others once it is up."""

    target: str
    results: list[TransferResult] = field(default_factory=list)
    calls: int = 0

    async def __call__(self, handle: RemoteCall) -> None:
        self.calls += 1
        delay = 0.3 if self.calls == 1 else 3.0
        task = asyncio.get_running_loop().create_task(self._bridge(handle, delay))
        async for _ in handle.receive():
            pass
        await task

    async def _bridge(self, handle: RemoteCall, delay: float) -> None:
        await asyncio.sleep(delay)
        self.results.append(await handle.bridge(self.target, timeout_s=5.0))


async def test_a_full_worker_refuses_a_second_bridge_at_once(
    make_node: Any, tmp_path: Path
) -> None:
    """Three calls in one worker leave one slot: one bridge, the others fail and say why."""
    port = free_udp_port()
    app = Staggered(f"sip:agent@127.0.0.1:{port}")
    async with (
        make_node(app, max_calls=3) as node,
        baresip_agent(port, tone(1000, 12.0), tmp_path / "agent", timeout_s=30),
    ):
        assert len(node.worker_pids) == 1
        uri = f"sip:bot@127.0.0.1:{node.config.port}"
        first = asyncio.create_task(dial(uri, record_seconds=7))
        await asyncio.sleep(1.0)
        rest = [asyncio.create_task(dial(uri, record_seconds=6)) for _ in range(2)]
        await asyncio.gather(first, *rest)
        await wait_for(lambda: len(app.results) == 3)
    assert app.results[0] == TransferResult(True, 200, "bridged"), app.results
    for res in app.results[1:]:
        assert (res.ok, res.reason) == (False, "agent call not placed: no free call slot"), res


async def test_an_agent_who_hangs_up_during_the_summary_is_a_failure(
    make_node: Any, tmp_path: Path
) -> None:
    port = free_udp_port()
    app = Bridging(f"sip:agent@127.0.0.1:{port}", summary=tone(500, 4.0))
    async with (
        make_node(app, max_calls=2) as node,
        # baresip hangs up when its 0.5 s WAV is over: long before the summary is
        baresip_agent(port, tone(1000, 0.5), tmp_path / "agent", timeout_s=30),
    ):
        # The caller stays 12 s: the agent's answer and hang-up (a few seconds on a loaded
        # machine) come well before the caller's own hang-up would end the bridge instead.
        result = await dial(
            f"sip:bot@127.0.0.1:{node.config.port}", play=tone(700, 1.0), play_at_s=4.0,
            record_seconds=12,
        )  # fmt: skip
        await wait_for(lambda: len(app.ended) == 1)
    ((res),) = app.results
    assert res == TransferResult(False, 0, "the agent hung up before the caller joined"), res
    # The caller stayed with the bot, which kept getting the caller's audio.
    assert result.sip_final_status == 200 and not result.ended_by_remote
    assert app.frames_after > 50
