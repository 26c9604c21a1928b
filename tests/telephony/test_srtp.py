"""SRTP (SDES keys) on a node's calls: the project's dialer offers RTP/SAVP with a=crypto (or
plain RTP), a real node (front + worker processes) answers per ``SWITCHBOARD_SIP__SRTP``, all
over loopback. The bot echoes what it hears, so a caller that gets its own tone back proves
both directions were encrypted and decrypted with the keys the SDP exchanged."""

from __future__ import annotations

import asyncio
import re
import socket
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from telephony.dialer import DialResult
from telephony.events import TransferResult
from telephony.remote_call import RemoteCall
from tests.telephony.nodekit import Calls, dial_tone, wait_until

pytestmark = pytest.mark.sip

ROOT = Path(__file__).resolve().parents[2]
RATE = 8000
#: The answer's audio line, e.g. ``m=audio 31230 RTP/SAVP 0 120``.
AUDIO_LINE = re.compile(r"^m=audio (\d+) (\S+) ", re.MULTILINE)
CRYPTO = re.compile(r"^a=crypto:\d+ (AES_\w+) inline:\S+", re.MULTILINE)


def audio_profile(sdp: str) -> str:
    """Transport profile of the first audio line (``RTP/AVP``, ``RTP/SAVP``...)."""
    match = AUDIO_LINE.search(sdp)
    assert match is not None, f"no audio line in {sdp!r}"
    assert match.group(1) != "0", f"audio refused in the answer: {sdp!r}"
    return match.group(2)


def voiced_s(samples: np.ndarray) -> float:
    """Seconds of 20 ms frames louder than -40 dBFS."""
    n = len(samples) // 160
    frames = samples[: n * 160].reshape(n, 160).astype(np.float64)
    return float((np.sqrt((frames**2).mean(axis=1)) > 330).sum()) * 0.02


def assert_heard_itself(result: DialResult, freq: float, helpers: Any) -> None:
    assert result.sip_final_status == 200, result.error
    ratio = helpers.tone_ratio(result.received, freq)
    voiced = voiced_s(result.received)
    # The tone plays for 2 s; the echo comes back a little later.
    assert ratio > 0.8 and voiced > 1.5, f"heard {ratio:.2f} of its tone, {voiced:.2f} s voiced"


def echoing() -> Calls:
    calls = Calls()
    calls.echo = True
    return calls


async def test_optional_answers_srtp_with_srtp_and_plain_with_plain(
    make_node: Any, helpers: Any
) -> None:
    async with make_node(echoing(), srtp="optional") as node:
        secure = await dial_tone(node.config.port, 700.0, seconds=3.0, srtp=True)
        plain = await dial_tone(node.config.port, 900.0, seconds=3.0)
        await wait_until(lambda: node.active_calls == 0, what="calls ended")
        stats = node.stats()
    assert_heard_itself(secure, 700.0, helpers)
    assert audio_profile(secure.answer_sdp) == "RTP/SAVP"
    suites = CRYPTO.findall(secure.answer_sdp)
    assert len(suites) == 1, secure.answer_sdp  # the answer picks one of the offered suites
    assert_heard_itself(plain, 900.0, helpers)
    assert audio_profile(plain.answer_sdp) == "RTP/AVP"
    assert not CRYPTO.search(plain.answer_sdp), plain.answer_sdp
    assert stats["calls_total"] == 2 and stats["rtp_discarded"] == 0, stats


async def _cli_dial(port: int, *flags: str) -> tuple[int, str]:
    """``switchboard dial`` (no --say: it only listens); its exit status and stderr."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "node.cli", "dial", f"sip:bot@127.0.0.1:{port}",
        "--duration", "2", *flags,
        cwd=ROOT, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode is not None
    return proc.returncode, err.decode(errors="replace")


async def test_mandatory_refuses_a_plain_offer_with_488(make_node: Any, helpers: Any) -> None:
    async with make_node(echoing(), srtp="mandatory") as node:
        plain = await dial_tone(node.config.port, 900.0, seconds=3.0)
        secure = await dial_tone(node.config.port, 700.0, seconds=3.0, srtp=True)
        # The command-line dialer: refused without --srtp, answered with it.
        cli_plain = await _cli_dial(node.config.port)
        cli_srtp = await _cli_dial(node.config.port, "--srtp")
        await wait_until(lambda: node.active_calls == 0, what="calls ended")
        stats = node.stats()
    assert cli_plain[0] == 1 and "not answered: SIP 488" in cli_plain[1], cli_plain
    assert cli_srtp[0] == 0 and ", SRTP); " in cli_srtp[1], cli_srtp
    assert plain.sip_final_status == 488, (plain.sip_final_status, plain.error)
    assert plain.answer_sdp == "" and len(plain.received) == 0
    assert_heard_itself(secure, 700.0, helpers)
    assert audio_profile(secure.answer_sdp) == "RTP/SAVP"
    assert CRYPTO.search(secure.answer_sdp), secure.answer_sdp
    # pjsua refuses it itself (no call reaches the bot); counted with the codec refusals.
    assert stats["rejected_codec"] == 2 and stats["calls_total"] == 2, stats


async def test_off_refuses_an_srtp_offer_with_488(make_node: Any, helpers: Any) -> None:
    """pjsua, with SRTP disabled, does not answer RTP/SAVP with a plain RTP/AVP line (nor
    with the stream refused on port 0 in a 200): it answers the INVITE with 488."""
    async with make_node(echoing(), srtp="off") as node:
        secure = await dial_tone(node.config.port, 700.0, seconds=3.0, srtp=True)
        plain = await dial_tone(node.config.port, 900.0, seconds=3.0)
        await wait_until(lambda: node.active_calls == 0, what="calls ended")
        stats = node.stats()
    assert secure.sip_final_status == 488, (secure.sip_final_status, secure.error)
    assert secure.answer_sdp == ""
    assert_heard_itself(plain, 900.0, helpers)
    assert audio_profile(plain.answer_sdp) == "RTP/AVP"
    assert stats["rejected_codec"] == 1 and stats["calls_total"] == 1, stats


async def _agent_invite(sock: socket.socket, timeout_s: float) -> str:
    """The first INVITE that reaches the (silent) agent socket."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while loop.time() < deadline:
        try:
            data = sock.recv(65535)
        except BlockingIOError:
            await asyncio.sleep(0.02)
            continue
        text = data.decode(errors="replace")
        if text.startswith("INVITE "):
            return text
    raise AssertionError("no INVITE reached the agent")


@pytest.mark.parametrize(("agent_srtp", "profile"), [("off", "RTP/AVP"), ("mandatory", "RTP/SAVP")])
async def test_the_agent_leg_of_a_bridge_offers_srtp_only_when_set(
    make_node: Any, agent_srtp: str, profile: str
) -> None:
    """An SRTP caller on a node that takes SRTP (``optional``) bridged to an agent: the
    agent's INVITE is plain RTP unless ``agent_srtp`` says otherwise."""
    agent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    agent.bind(("127.0.0.1", 0))
    port = agent.getsockname()[1]
    agent.setblocking(False)
    results: list[TransferResult] = []

    async def bridge(call: RemoteCall) -> None:
        await asyncio.sleep(0.3)
        results.append(await call.bridge(f"sip:agent@127.0.0.1:{port}", timeout_s=2.0))

    calls = Calls()
    calls.action = bridge
    try:
        async with make_node(calls, srtp="optional", agent_srtp=agent_srtp) as node:
            caller = asyncio.ensure_future(
                dial_tone(node.config.port, 700.0, seconds=4.0, srtp=True)
            )
            invite = await _agent_invite(agent, timeout_s=10.0)
            result = await caller
            await wait_until(lambda: node.active_calls == 0, what="calls ended")
    finally:
        agent.close()
    assert result.sip_final_status == 200 and audio_profile(result.answer_sdp) == "RTP/SAVP"
    offer = invite.replace("\r\n", "\n").partition("\n\n")[2]
    assert audio_profile(offer) == profile, offer
    assert bool(CRYPTO.search(offer)) == (agent_srtp != "off"), offer
    # The agent never answered: the bridge gave up and the caller stayed with the bot.
    assert len(results) == 1 and not results[0].ok, results
