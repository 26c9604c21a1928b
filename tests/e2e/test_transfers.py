"""Bridged and warm transfers over real SIP, to agents this module starts.

A real ``switchboard run`` (the default profile, its transfer targets pointed at agents on
loopback ports) is called by the project's dialer. The agents are baresip answering by
itself (saying what its WAV holds, recording what it hears, hanging up when the WAV ends)
and sipp refusing with 486. What the caller and the agent heard is transcribed with the
packaged Whisper; the call log (SQLite) and the bot's log lines are read back.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from bot.profile import DEFAULT_PROFILE, load_profile
from telephony.dialer import dial
from testkit.botproc import BotProcess, run_bot
from testkit.ports import free_udp_port
from testkit.voices import speak
from testkit.wire import voiced_frames
from tests.e2e.conftest import Listener
from tests.e2e.test_call_flows import call_row, ends_with, voiced_s, window
from tests.support.agents import baresip_agent, busy_uas, sipp_agent
from tests.support.text import word_error_rate

pytestmark = [pytest.mark.sip, pytest.mark.models]

RATE = 8000
ANNOUNCEMENT = "This call is recorded for quality and training."
AGENT_HELLO = "Hello, you are through to Sam in customer service."
CALLER_TO_AGENT = "I would like to change my delivery address please."
UNLISTED = "sip:unlisted@127.0.0.1:5999"


@dataclass
class TransferBot:
    bot: BotProcess
    bridge_port: int  # key 0 (the talk_to_person intent): a bridged transfer
    warm_port: int  # key 8: a warm handoff
    busy_port: int  # key 7: an agent that answers 486
    desk_port: int  # key 5: REFER first (the dialer declines it), then a bridge


def transfer_profile(path: Path, bridge: int, warm: int, busy: int, desk: int) -> Path:
    """The default profile with three listed targets, an unlisted one, and a recording
    announcement."""
    text = DEFAULT_PROFILE.read_text(encoding="utf-8")
    bridge_uri = f"sip:agents@127.0.0.1:{bridge}"
    old_target = 'transfer_to = "sip:agents@127.0.0.1:5070"'
    text = text.replace(old_target, f'transfer_to = "{bridge_uri}"')
    warm_uri, busy_uri = f"sip:sam@127.0.0.1:{warm}", f"sip:busy@127.0.0.1:{busy}"
    text = text.replace(
        '    { key = "0", intent = "talk_to_person" },\n',
        '    { key = "0", intent = "talk_to_person" },\n'
        f'    {{ key = "8", say = "Putting you through.", transfer_to = "{warm_uri}" }},\n'
        f'    {{ key = "7", transfer_to = "{busy_uri}" }},\n'
        f'    {{ key = "6", transfer_to = "{UNLISTED}" }},\n'
        f'    {{ key = "5", transfer_to = "sip:desk@127.0.0.1:{desk}" }},\n',
    )
    assert f"127.0.0.1:{busy}" in text
    text += f"""
[[transfer_targets]]
uri = "{bridge_uri}"
mode = "bridge"

[[transfer_targets]]
uri = "{warm_uri}"
mode = "warm"

[[transfer_targets]]
uri = "{busy_uri}"
mode = "bridge"

[[transfer_targets]]
uri = "sip:desk@127.0.0.1:{desk}"
mode = "refer"
bridge_on_refer_failure = true

[recording]
enabled = true
announcement = "{ANNOUNCEMENT}"
"""
    path.write_text(text, encoding="utf-8")
    load_profile(path)
    return path


@pytest.fixture(scope="module")
def transfer_bot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TransferBot]:
    ports = (free_udp_port(), free_udp_port(), free_udp_port(), free_udp_port())
    path = tmp_path_factory.mktemp("profile") / "transfers.toml"
    with run_bot(profile=transfer_profile(path, *ports)) as bot:
        yield TransferBot(bot, *ports)


def transfer_lines(bot: BotProcess, first: int) -> str:
    """The bot's log lines about transfers since line ``first`` (for a failure's message)."""
    keys = ("transfer", "bridge", "agent")
    return "\n".join(line for line in bot.lines[first:] if any(k in line for k in keys))


def last_utterance(samples: npt.NDArray[np.int16], gap_s: float = 1.0) -> Any:
    """The last stretch of voiced audio after at least ``gap_s`` of quiet (Whisper, given a
    long window, may leave out what follows a first sentence)."""
    voiced = voiced_frames(samples)
    idx = np.flatnonzero(voiced)
    assert idx.size, "nothing heard"
    gap = int(gap_s / 0.02)
    start = int(idx[0])
    for prev, cur in itertools.pairwise(idx):
        if cur - prev > gap:
            start = int(cur)
    begin = max(0, start - 10) * 160
    return samples[begin : (int(idx[-1]) + 10) * 160]


def agent_voice(lead_s: float, words: str, tail_s: float) -> bytes:
    """Quiet for ``lead_s``, then ``words``, then quiet for ``tail_s`` (then baresip hangs
    up: its WAV is over)."""
    return bytes(int(lead_s * RATE) * 2) + speak(words, "rms") + bytes(int(tail_s * RATE) * 2)


async def test_a_bridged_transfer_joins_the_caller_and_the_agent(
    transfer_bot: TransferBot, listener: Listener, tmp_path: Path
) -> None:
    tb = transfer_bot
    bot = tb.bot
    first = len(bot.lines)
    caller_words = await asyncio.to_thread(speak, CALLER_TO_AGENT, "slt")
    voice = await asyncio.to_thread(agent_voice, 2.0, AGENT_HELLO, 6.0)
    async with baresip_agent(
        tb.bridge_port, voice, tmp_path / "agent", timeout_s=60, user="agents"
    ) as agent:
        # Key 0: the talk_to_person intent's answer, then the bridge. The caller speaks to
        # the agent once through.
        result = await dial(
            bot.uri, dtmf=[(1.0, "0")], play=caller_words, play_at_s=12.0, record_seconds=30
        )
    assert result.sip_final_status == 200, result.error
    assert agent.answered, (agent.log[-2000:], transfer_lines(bot, first))
    # The agent's WAV ended, it hung up: the caller got the BYE.
    assert result.ended_by_remote, "the caller's leg did not end with the agent's"
    # The agent heard the caller (energy, then the words).
    heard_by_agent = await listener.hear(agent.heard)
    assert voiced_s(agent.heard) > 1.0, agent.log[-2000:]
    assert word_error_rate(CALLER_TO_AGENT, heard_by_agent) <= 0.35, heard_by_agent
    # The caller heard the agent after the bot's answer (2 s of the agent's quiet between).
    heard = await listener.hear(last_utterance(result.received))
    assert word_error_rate(AGENT_HELLO, heard) <= 0.35, heard
    # The bot's media stopped: the caller's words to the agent made no turn.
    turns = bot.records("turn", since=first)
    assert [(t["route"], t["intent"]) for t in turns] == [("keypad", "talk_to_person")], turns
    row, events = await asyncio.to_thread(call_row, bot, first)
    assert row["end_reason"] == "transferred"
    uri = f"sip:agents@127.0.0.1:{tb.bridge_port}"
    kinds = [(e["kind"], e["detail"]) for e in events]
    assert ("transfer", uri) in kinds and ("bridged", f"bridge {uri}") in kinds, kinds
    assert kinds[-1] == ("bridge_ended", "agent hung up"), kinds


async def test_a_warm_handoff_briefs_the_agent_before_the_caller_is_joined(
    transfer_bot: TransferBot, listener: Listener, tmp_path: Path
) -> None:
    tb = transfer_bot
    bot = tb.bot
    first = len(bot.lines)
    question = await asyncio.to_thread(speak, "What are your opening hours?", "slt")
    # The agent says hello once it has heard the summary (it answers at once: its WAV's
    # quiet start covers the summary).
    voice = await asyncio.to_thread(agent_voice, 14.0, AGENT_HELLO, 1.0)
    async with baresip_agent(
        tb.warm_port, voice, tmp_path / "agent", timeout_s=90, user="sam"
    ) as agent:
        # The question after the announcement and the greeting; key 8 after its answer.
        result = await dial(
            bot.uri, play=question, play_at_s=7.5, dtmf=[(15.0, "8")], record_seconds=45
        )
    assert result.sip_final_status == 200, result.error
    assert agent.answered, agent.log[-2000:]
    row, events = await asyncio.to_thread(call_row, bot, first)
    kinds = [(e["kind"], e["detail"]) for e in events]
    summaries = [d for k, d in kinds if k == "handoff_summary"]
    assert len(summaries) == 1, kinds
    # The caller's question, as the bot heard it (flite's "opening hours" may reach Whisper
    # over G.711 as "opening now").
    assert "opening" in summaries[0].lower(), summaries
    # The agent heard the summary first: who called and what they asked.
    briefing = (await listener.hear(agent.heard[: int(12 * RATE)])).lower()
    # Both of its sentences ("Call from ...", "The caller said: ...") and the question's topic
    # word. The summary's synthetic voice reaches the agent over G.711 and Whisper, which may
    # hear "opening hours" as "opening now" and "call from" as "paul from".
    assert "from" in briefing and "caller said" in briefing and "opening" in briefing, briefing
    assert word_error_rate(summaries[0], briefing) <= 0.4, (summaries[0], briefing)
    # The caller did not hear the summary, and heard the agent once joined.
    heard = (await listener.hear(window(result.received, 15.0, 45))).lower()
    assert "call from" not in heard, heard
    hello = (await listener.hear(last_utterance(result.received))).lower()
    assert word_error_rate(AGENT_HELLO, hello) <= 0.35, hello
    assert result.ended_by_remote  # the agent hung up after its hello
    assert row["end_reason"] == "transferred"
    assert ("bridged", f"warm sip:sam@127.0.0.1:{tb.warm_port}") in kinds, kinds
    assert kinds[-1] == ("bridge_ended", "agent hung up"), kinds


async def test_a_busy_agent_hands_the_caller_back_to_the_bot(
    transfer_bot: TransferBot, listener: Listener, tmp_path: Path
) -> None:
    tb = transfer_bot
    bot = tb.bot
    profile = load_profile(DEFAULT_PROFILE)
    assert profile.transfer_failed is not None
    first = len(bot.lines)
    async with sipp_agent(busy_uas(), tb.busy_port, tmp_path / "agent", timeout_s=30) as status:
        # Key 7: the busy agent; then key 3 (delivery times): the bot answers again.
        result = await dial(bot.uri, dtmf=[(1.0, "7"), (11.0, "3")], record_seconds=19)
    assert status == [0], "the agent did not see its INVITE refused as scripted"
    assert result.sip_final_status == 200 and not result.ended_by_remote, result.error
    failed = await listener.hear(window(result.received, 1.2, 11.0))
    assert ends_with(profile.transfer_failed, failed), failed
    after = (await listener.hear(window(result.received, 11.2, 19))).lower()
    assert "delivery" in after, after
    row, events = await asyncio.to_thread(call_row, bot, first)
    kinds = [(e["kind"], e["detail"]) for e in events]
    uri = f"sip:busy@127.0.0.1:{tb.busy_port}"
    assert ("transfer", uri) in kinds and ("transfer_failed", "486 Busy Here") in kinds, kinds
    assert ("menu", "main: 3") in kinds, kinds
    assert row["end_reason"] != "transferred"


async def test_an_unlisted_target_is_refused_and_the_call_is_announced_as_recorded(
    transfer_bot: TransferBot, listener: Listener
) -> None:
    bot = transfer_bot.bot
    profile = load_profile(DEFAULT_PROFILE)
    assert profile.transfer_failed is not None
    first = len(bot.lines)
    result = await dial(bot.uri, dtmf=[(7.5, "6")], record_seconds=15)
    assert result.sip_final_status == 200, result.error
    # The recording announcement comes first, then the greeting.
    start = (await listener.hear(window(result.received, 0, 7.4))).lower()
    assert word_error_rate(ANNOUNCEMENT.lower(), " ".join(start.split()[:8])) <= 0.35, start
    refused = await listener.hear(window(result.received, 7.6, 15))
    assert ends_with(profile.transfer_failed, refused), refused
    row, events = await asyncio.to_thread(call_row, bot, first)
    kinds = [(e["kind"], e["detail"]) for e in events]
    assert ("transfer_refused", UNLISTED) in kinds, kinds
    assert not [k for k, _ in kinds if k in ("transfer", "bridged")], kinds
    assert any("not configured" in line for line in bot.lines[first:])
    assert row["recording_path"]


async def test_a_refused_refer_falls_back_to_a_bridge(
    transfer_bot: TransferBot, listener: Listener, tmp_path: Path
) -> None:
    tb = transfer_bot
    bot = tb.bot
    first = len(bot.lines)
    uri = f"sip:desk@127.0.0.1:{tb.desk_port}"
    voice = await asyncio.to_thread(agent_voice, 2.0, AGENT_HELLO, 1.0)
    async with baresip_agent(
        tb.desk_port, voice, tmp_path / "agent", timeout_s=60, user="desk"
    ) as agent:
        # Key 5 after the announcement and the greeting. The dialer declines every REFER.
        result = await dial(bot.uri, dtmf=[(7.5, "5")], record_seconds=25)
    assert result.sip_final_status == 200, result.error
    assert [t.strip("<>") for t in result.transfer_requests] == [uri]
    assert agent.answered, (agent.log[-2000:], transfer_lines(bot, first))
    assert result.ended_by_remote  # the agent hung up after its hello
    hello = (await listener.hear(last_utterance(result.received))).lower()
    assert word_error_rate(AGENT_HELLO, hello) <= 0.35, hello
    row, events = await asyncio.to_thread(call_row, bot, first)
    kinds = [(e["kind"], e["detail"]) for e in events]
    assert ("transfer_failed", "603 Decline; bridging") in kinds, kinds
    assert ("bridged", f"bridge {uri}") in kinds, kinds
    assert row["end_reason"] == "transferred"
