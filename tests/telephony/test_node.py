"""SipServer: calls spread over worker processes, driven by real SIP clients over loopback."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from telephony import CallEnded, DtmfIn, server
from telephony.dialer import DialGate, dial
from telephony.floodguard import FrontLimits
from telephony.remote_call import RemoteCall
from tests.support.corpus import rfc4475_dir
from tests.support.sipp_scenarios import CANCEL_AFTER_RINGING
from tests.telephony.nodekit import Calls, alive, all_ready, dial_tone, tone, wait_until

pytestmark = pytest.mark.sip

ROOT = Path(__file__).resolve().parents[2]
RATE = 8000


async def test_five_then_eight_concurrent_calls_echo(make_node: Any, hears_own_tone: Any) -> None:
    calls = Calls()
    calls.echo = True
    peak = 0
    async with make_node(calls, max_calls=8) as node:
        assert node.workers == 3 and len(node.worker_pids) == 3

        async def watch() -> None:
            nonlocal peak
            while True:
                peak = max(peak, node.active_calls)
                await asyncio.sleep(0.02)

        watcher = asyncio.get_running_loop().create_task(watch())
        for n, seconds in ((5, 4.0), (8, 5.0)):
            peak = 0
            freqs = [400.0 + 150 * i for i in range(n)]
            gates = [DialGate() for _ in freqs]  # all dial at once, not as processes come up
            dialing = asyncio.gather(
                *(
                    dial_tone(node.config.port, f, seconds, gate=g)
                    for f, g in zip(freqs, gates, strict=True)
                )
            )
            await all_ready(gates)
            for g in gates:
                g.go.set()
            results = await dialing
            for f, res in zip(freqs, results, strict=True):
                hears_own_tone(res, f)
            await wait_until(lambda: node.active_calls == 0, what="calls ended")
            assert peak == n, f"{n} calls were not all up at once (peak {peak})"
        watcher.cancel()
        stats = node.stats()
    assert len(calls.calls) == 13
    assert len({c.worker_pid for c in calls.calls[5:]}) == 3  # 8 calls need all 3 workers
    for call in calls.calls:
        assert call.codec == "PCMU/8000" and call.sample_rate == 8000
        assert call.ended and call.queued_frames == 0
        assert calls.frames(call.call_id) >= 100
    assert stats["calls_total"] == 13 and stats["calls_active"] == 0
    assert stats["front_rejected_busy"] == 0 and stats["worker_restarts"] == 0
    # The hop is measured (a few hundred microseconds on an idle machine, 1.5 ms beside two
    # busy processes); its speed is the benchmarks' business. A frame's 20 ms is the bound
    # a working path stays far below.
    assert 0 < stats["ipc_up_hop_p50_us"] < 20_000, stats


async def test_fifth_invite_gets_503_from_the_front(
    make_node: Any, sipp: Any, helpers: Any, tmp_path: Path
) -> None:
    calls = Calls()
    h = helpers
    async with make_node(calls, max_calls=4, retry_after_s=17) as node:
        assert node.workers == 2 and node.call_limit == 4
        hold = h.scenario(h.invite(h.sdp()), h.answered(), h.pause(2500), h.bye())
        holding = asyncio.get_running_loop().create_task(
            sipp(hold, node.config.port, calls=4, rate=50)
        )
        await wait_until(lambda: node.active_calls == 4, what="4 calls up")
        busy = """  <recv response="100" optional="true"/>
  <recv response="503"/>
"""
        res = await sipp(
            h.scenario(h.invite(h.sdp()), busy, h.ack(non2xx=True), name="busy"),
            node.config.port,
            extra=("-trace_msg",),
        )
        assert res.ok, res.stdout + res.errors
        assert node.active_calls == 4
        held = await holding
        assert held.ok, held.stdout + held.errors
        await wait_until(lambda: node.active_calls == 0, what="calls ended")
        stats = node.stats()
    log = _sipp_messages(tmp_path)
    response = log[log.index("SIP/2.0 503") :].split("\n\n")[0]
    for needed in ("Via: SIP/2.0/UDP 127.0.0.1:", "received=127.0.0.1", "Call-ID: 1-"):
        assert needed in response, response
    assert "Retry-After: 17" in response and "Content-Length: 0" in response
    assert "CSeq: 1 INVITE" in response and ";tag=" in response.split("To:")[1].split("\n")[0]
    assert stats["front_rejected_busy"] == 1 and stats["rejected_busy"] >= 1
    assert stats["calls_total"] == 4


def _sipp_messages(tmp_path: Path) -> str:
    (log_path,) = tmp_path.glob("sipp*/*_messages.log")
    return log_path.read_text(errors="replace")


async def test_cancel_bye_and_hangup_through_the_node(
    make_node: Any, sipp: Any, helpers: Any
) -> None:
    calls = Calls()
    h = helpers
    async with make_node(calls, max_calls=3, answer_delay_ms=600) as node:
        # CANCEL before the answer: routed to the worker that has the INVITE.
        res = await sipp(
            h.scenario(h.invite(h.sdp()), CANCEL_AFTER_RINGING, h.ack(non2xx=True)),
            node.config.port,
        )
        assert res.ok, res.stdout + res.errors
        await wait_until(lambda: node.stats()["calls_cancelled"] == 1, what="cancel counted")
        assert calls.calls == [] and node.active_calls == 0

        # BYE from the caller.
        xml = h.scenario(h.invite(h.sdp()), h.answered(), h.pause(800), h.bye())
        res = await sipp(xml, node.config.port)
        assert res.ok, res.stdout + res.errors
        await wait_until(lambda: len(calls.ended()) == 1, what="BYE seen")
        (first,) = calls.ended()
        assert first.by_remote and first.reason.startswith("200")

        # hangup() from our side: the worker sends BYE, sipp answers 200.
        async def hang_up_soon(call: RemoteCall) -> None:
            await asyncio.sleep(0.3)
            await call.hangup()
            await call.hangup()  # idempotent

        calls.action = hang_up_soon
        res = await sipp(
            h.scenario(h.invite(h.sdp()), h.answered(), h.answer_bye()), node.config.port
        )
        assert res.ok, res.stdout + res.errors
        await wait_until(lambda: len(calls.ended()) == 2, what="our BYE")
        stats = node.stats()
    second = calls.ended()[1]
    assert not second.by_remote and calls.calls[1].ended
    assert stats["calls_total"] == 2 and stats["front_relays_open"] >= 1


def _rfc4475_messages() -> dict[str, bytes]:
    """The corpus with its documentation addresses (192.0.2.x) moved to loopback.

    ``192.0.2.`` and ``127.0.0.`` have the same length, so Content-Length stays right; what
    the node sends back (SDP, Via received) then stays on this machine. Several messages
    share the Via branch ``z9hG4bKkdjuw``: pjsip keys a server transaction on the branch and
    method alone (not the sent-by), so a later INVITE with an earlier one's branch would be
    taken for its retransmission. Each such branch gets a unique suffix of the same length.
    """
    corpus_dir = rfc4475_dir()
    out: dict[str, bytes] = {}
    for n, p in enumerate(sorted(corpus_dir.glob("TC_*.dat"))):
        data = p.read_bytes().replace(b"192.0.2.", b"127.0.0.")
        data = re.sub(rb"branch=z9hG4bKkdjuw(?=[\r\n;, ])", b"branch=z9hG4bK%05d" % n, data)
        out[p.stem] = data
    return out


def garbage(rng: random.Random) -> list[bytes]:
    """Random bytes, truncated and mangled requests: the burst a front must survive."""
    invite = (
        b"INVITE sip:bot@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:9;branch=z9hG4bKg\r\n"
        b"From: <sip:x@127.0.0.1>;tag=1\r\nTo: <sip:bot@127.0.0.1>\r\nCall-ID: garbage-1\r\n"
        b"CSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n"
    )
    out = [bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 1400))) for _ in range(150)]
    out += [invite[:n] for n in range(1, len(invite), 7)]
    out += [b"", b"\r\n\r\n", b"\x00" * 64, b"SIP/2.0 200 OK\r\n\r\n", b"INVITE\r\n\r\n"]
    out.append(invite.replace(b"Call-ID: garbage-1\r\n", b""))  # no Call-ID: 400 here
    return out


# What a node answers to each RFC 4475 message (section 3.1.1 valid, 3.1.2 invalid, 3.2-3.4
# semantics), the node taking G722 only so that no torture INVITE sets up a call towards its
# made-up addresses: a valid new INVITE is answered 488 (or 415 for INVUT's unknown body)
# by a worker's pjsip; everything else is answered by the front itself (telephony.sipcheck).
# None: no answer (the corpus's responses, and TEST_I, which has no Via to answer to).
#  - REGISTER gets 405 with Allow: the bot is no registrar (a SIP method it does not take);
#    a method SIP does not define (INTMETH, ESC02's "RE%47IST%45R") gets 501.
#  - WSINV is valid but carries a To tag: a request in a dialog the node does not have, so
#    RFC 3261 12.2.2's 481. The same message without its To tag is a new call (below).
#  - ZEROMF: Max-Forwards 0 stops a proxy; a UAS answers normally.
#  - BADDATE: a Date not in RFC 3261's GMT form gets 400 (RFC 4475 3.1.2.12 allows that or
#    ignoring it; the node never reads Date).
#  - SDP01's Accept names only text/nobodyKnowsThis: its answer cannot carry the SDP, 406.
#  - INV2543 (RFC 2543 syntax, which RFC 4475 3.4.1 asks an element to take) has no Contact,
#    which pjsip requires: the front gives it its source address as Contact, and the worker
#    answers it as any INVITE (488 here, G722 only; test_rfc2543_invite_is_a_call).
RFC4475_ANSWERS: dict[str, int | None] = {
    "TC_BADASPEC_I": 400, "TC_BADBRANCH_V": 200, "TC_BADDATE_V": 400, "TC_BADDN_I": 400,
    "TC_BADINV01_I": 400, "TC_BADVERS_V": 505, "TC_BCAST_V": None, "TC_BEXT01_V": 420,
    "TC_BIGCODE_V": None, "TC_CLERR_I": 400, "TC_CPARAM01_V": 405, "TC_CPARAM02_V": 405,
    "TC_DBLREQ": 405, "TC_ESC01_V": 488, "TC_ESC02_V": 501, "TC_ESCNULL_V": 405,
    "TC_ESCRURI_V": 400, "TC_INSUF_I": 400, "TC_INTMETH": 501, "TC_INV2543_I": 488,
    "TC_INVUT_V": 415, "TC_LONGREQ_V": 488, "TC_LTGTRURI_I": 400, "TC_LWSDISP_V": 200,
    "TC_LWSRURI_I": 400, "TC_LWSSTART_V": 400, "TC_MCL01_I": 400, "TC_MISMATCH01_V": 400,
    "TC_MISMATCH02_V": 400, "TC_MPART01": 405, "TC_MULTI01_I": 400, "TC_NCL_I": 400,
    "TC_NOREASON_V": None, "TC_NOVELSC_V": 416, "TC_QUOTBAL_I": 400, "TC_REGAUT01_V": 405,
    "TC_REGBADCT_I": 400, "TC_REGESCRT_V": 405, "TC_SCALAR02_V": 400, "TC_SCALARLG_V": None,
    "TC_SDP01_V": 406, "TC_SEMIURI_V": 200, "TC_TEST_I": None, "TC_TRANSPORTS_V": 200,
    "TC_TRWS_I": 400, "TC_UNKSCM_V": 416, "TC_UNKSM2_V": 405, "TC_UNREASON_V": None,
    "TC_WSINV": 481, "TC_ZEROMF_V": 200,
    "TC_WSINV without To tag": 488,
}  # fmt: skip


async def _exchange(sock: socket.socket, dest: tuple[str, int], data: bytes) -> None:
    await asyncio.get_running_loop().sock_sendto(sock, data, dest)


async def _collect(sock: socket.socket, seconds: float) -> list[bytes]:
    loop = asyncio.get_running_loop()
    got: list[bytes] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with contextlib.suppress(TimeoutError):
            got.append(await asyncio.wait_for(loop.sock_recv(sock, 65535), 0.1))
    return got


def _udp_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)
    return sock


async def test_garbage_and_rfc4475_then_a_normal_call(make_node: Any, hears_own_tone: Any) -> None:
    calls = Calls()
    calls.echo = True
    messages = _rfc4475_messages()
    wsinv = messages["TC_WSINV"]
    untagged = re.sub(rb";   tag    = 1918181833n", b" " * 24, wsinv)  # same length
    assert len(untagged) == len(wsinv) and untagged != wsinv
    messages["TC_WSINV without To tag"] = untagged.replace(b"wsinv.", b"wsin2.")
    assert set(messages) == set(RFC4475_ANSWERS)
    rng = random.Random(4475)
    # G722 only: every torture INVITE offers PCMU/GSM and gets 488, so no call is set up
    # towards the (made-up) addresses in those messages. The limits are raised: this test
    # sends some 250 datagrams from one address at once (the rate limits have tests of
    # their own).
    limits = FrontLimits(per_source_burst=10_000, node_burst=10_000)
    async with make_node(calls, max_calls=9, codecs=("G722",), limits=limits) as node:
        pids = list(node.worker_pids)
        front = ("127.0.0.1", node.config.port)
        junk = _udp_socket()
        try:
            for n, data in enumerate(garbage(rng)):
                await _exchange(junk, front, data)
                if n % 10 == 9:  # a burst beyond the socket buffer is lost in the kernel
                    await asyncio.sleep(0.002)
            junk_replies = await _collect(junk, 1.2)  # also lets silent INVITEs free slots
        finally:
            junk.close()
        before = node.stats()
        socks = {name: _udp_socket() for name in messages}  # one client per message
        try:
            for name, data in messages.items():
                await _exchange(socks[name], front, data)
                await asyncio.sleep(0.01)
            replies = dict(
                zip(
                    socks,
                    await asyncio.gather(*(_collect(s, 1.0) for s in socks.values())),
                    strict=True,
                )
            )
        finally:
            for s in socks.values():
                s.close()
        stats = node.stats()
        assert node.worker_pids == pids and stats["worker_restarts"] == 0
        assert stats["front_rejected_busy"] == 0
        everything = junk_replies + [d for ds in replies.values() for d in ds]
        pongs = [d for d in everything if d == b"\r\n"]  # RFC 5626 keepalive answer
        assert len(pongs) == 1
        assert all(d.startswith(b"SIP/2.0 ") for d in everything if d not in pongs), everything
        # The request without a Call-ID got the front's own 400.
        assert any(d.startswith(b"SIP/2.0 400 Bad Request (Missing Call-ID)") for d in junk_replies)
        assert stats["front_malformed"] >= 150 and stats["front_dropped_responses"] >= 5

        # Each message's answer: exactly one final status, the expected one (pjsip may
        # retransmit its final response; the same status then comes again).
        wrong = []
        for name, expected in RFC4475_ANSWERS.items():
            finals = {int(d[8:11]) for d in replies[name] if not d.startswith(b"SIP/2.0 1")}
            if finals != ({expected} if expected is not None else set()):
                wrong.append(f"{name}: expected {expected}, got {sorted(finals) or 'nothing'}")
        assert not wrong, "\n".join(wrong)
        (bext,) = {d for d in replies["TC_BEXT01_V"]}
        assert b"\r\nUnsupported: nothingSupportsThis, nothingSupportsThisEither\r\n" in bext
        (sdp01,) = {d for d in replies["TC_SDP01_V"]}
        assert b"\r\nAccept: application/sdp\r\n" in sdp01
        assert any(b"(malformed Date)" in d for d in replies["TC_BADDATE_V"])
        for name in ("TC_CPARAM01_V", "TC_INTMETH"):
            assert b"\r\nAllow: INVITE, ACK, CANCEL, BYE, OPTIONS" in replies[name][0], name
        # Only the five INVITEs the front found valid and new reached a worker (ESC01,
        # INV2543, INVUT, LONGREQ, WSINV without its To tag); none became a call.
        relayed = stats["front_relayed_to_workers"] - before["front_relayed_to_workers"]
        assert relayed == 5, relayed
        assert not calls.calls and stats["calls_total"] == 0

        # The node still answers a normal call, with audio both ways.
        res = await dial_tone(node.config.port, 700.0, 2.5, codecs=("G722",))
        hears_own_tone(res, 700.0)
        assert calls.calls and calls.calls[-1].codec.startswith("G722")


async def test_killed_worker_ends_its_calls_and_is_replaced(
    make_node: Any, hears_own_tone: Any
) -> None:
    calls = Calls()
    calls.echo = True
    async with make_node(calls, max_calls=6) as node:
        port = node.config.port
        loop = asyncio.get_running_loop()
        # Both dialers are up before the first dials: the second follows it by moments,
        # however long a process takes to start on a busy machine.
        first, second = DialGate(), DialGate()
        doomed = loop.create_task(dial_tone(port, 500.0, 5.0, gate=first))
        # The survivor's call outlasts the restart's wait (up to 10 s) on a loaded machine:
        # 8 s were too few once, the call over before the node's count was read.
        lasting = loop.create_task(dial_tone(port, 900.0, 20.0, gate=second))
        try:
            await all_ready([first, second])
            first.go.set()
            await wait_until(lambda: node.active_calls == 1, timeout_s=10, what="call 1 up")
            second.go.set()
            await wait_until(lambda: node.active_calls == 2, timeout_s=10, what="call 2 up")
            victim, survivor = calls.calls
            assert victim.worker_pid != survivor.worker_pid  # least-loaded routing
            assert victim.worker_pid in node.worker_pids
            os.kill(victim.worker_pid, signal.SIGKILL)  # a worker this node started
            await wait_until(lambda: victim.ended, timeout_s=3, what="victim ended")
            # The end is queued behind the audio the worker sent before it died: wait for
            # the handler to read up to it (a loaded machine lags), then it must be the last.
            await wait_until(
                lambda: any(isinstance(e, CallEnded) for e in calls.events[victim.call_id]),
                timeout_s=3,
                what="victim's end read",
            )
            ended = calls.events[victim.call_id][-1]
            assert isinstance(ended, CallEnded) and ended.reason == "worker crashed"
            assert not survivor.ended
            before = calls.frames(survivor.call_id)
            await wait_until(
                lambda: node.stats()["worker_restarts"] == 1, timeout_s=10, what="restart"
            )
            assert calls.frames(survivor.call_id) > before + 10
            assert not alive(victim.worker_pid)
            stats = node.stats()
            assert stats["worker_restarts"] == 1 and stats["calls_active"] == 1
            # A new call lands on the fresh worker and works (the victim's caller is still
            # streaming to the old worker's RTP port meanwhile).
            res = await dial_tone(port, 1300.0, 2.5)
            hears_own_tone(res, 1300.0)
            newest = calls.calls[-1]
            assert newest.worker_pid not in (victim.worker_pid, survivor.worker_pid)
        finally:
            first.go.set()
            second.go.set()
            await doomed  # it hangs up when its recording ends; the BYE goes unanswered
            survived = await lasting
        hears_own_tone(survived, 900.0)


async def test_playout_drain_clear_and_dtmf_through_ipc(make_node: Any) -> None:
    seen: dict[str, float] = {}

    async def speak(call: RemoteCall) -> None:
        t0 = time.monotonic()
        call.send(tone(440.0, 0.4))  # 20 frames
        seen["queued_at_once"] = call.queued_frames
        await call.wait_playout_drained()
        seen["drained_after_s"] = time.monotonic() - t0
        seen["played_at_drain"] = call.frames_played
        call.send(tone(1000.0, 5.0))  # 250 frames
        await asyncio.sleep(0.5)
        seen["cleared"] = call.clear_playout()
        seen["queued_after_clear"] = call.queued_frames
        played = call.frames_played
        await asyncio.sleep(0.5)
        seen["played_after_clear"] = call.frames_played - played

    calls = Calls()
    calls.action = speak
    async with make_node(calls, max_calls=3) as node:
        res = await dial(
            f"sip:bot@127.0.0.1:{node.config.port}", record_seconds=2.5, dtmf=[(0.3, "5")]
        )
        await wait_until(lambda: len(calls.ended()) == 1, what="call ended")
    assert res.sip_final_status == 200, res.error
    assert seen["queued_at_once"] == 20
    assert 0.36 <= seen["drained_after_s"] < 0.7 and seen["played_at_drain"] == 20, seen
    assert 200 <= seen["cleared"] <= 240, seen  # ~25 of 250 frames played in 0.5 s
    assert seen["queued_after_clear"] == 0
    assert seen["played_after_clear"] <= 2, seen  # the worker stopped within a frame or two
    loud = [np.abs(f).max() > 2000 for f in res.received.reshape(-1, 160)]
    assert 35 <= sum(loud) <= 60, sum(loud)  # 20 + ~25 frames heard, not 270
    events = calls.events[calls.calls[0].call_id]
    assert [e.digit for e in events if isinstance(e, DtmfIn)] == ["5"]


async def test_hung_worker_is_replaced_and_the_node_restarts(
    make_node: Any, hears_own_tone: Any
) -> None:
    calls = Calls()
    calls.echo = True
    async with make_node(calls, max_calls=3, heartbeat_timeout_s=3.0) as node:
        (hung,) = node.worker_pids
        os.kill(hung, signal.SIGSTOP)  # a worker this node started: it stops sending stats
        try:
            await wait_until(lambda: not alive(hung), timeout_s=8, what="hung worker killed")
        finally:
            if alive(hung):
                os.kill(hung, signal.SIGKILL)
        await wait_until(lambda: node.stats()["worker_restarts"] == 1, timeout_s=10, what="restart")
        assert node.stats()["workers_up"] == 1 and node.worker_pids != [hung]
        # stop() then start() again, as SipEndpoint allows
        old = node.worker_pids
        await node.stop()
        assert node.stats()["workers_up"] == 0 and not any(alive(p) for p in old)
        await node.start()
        res = await dial_tone(node.config.port, 600.0, 2.0)
        hears_own_tone(res, 600.0)


PARENT = """
import asyncio, sys
from telephony import SipServer, EndpointConfig
async def main():
    node = SipServer(EndpointConfig(port=0, max_calls=6, rtp_port_start=int(sys.argv[1])),
                   lambda call: asyncio.sleep(0))
    await node.start()
    print(*node.worker_pids, flush=True)
    await asyncio.sleep(60)
asyncio.run(main())
"""


async def test_workers_die_with_their_parent(tmp_path: Path) -> None:
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        str(random.randrange(30000, 38000, 2)),
        stdout=asyncio.subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), timeout=20)
        pids = [int(p) for p in line.split()]
        assert len(pids) == 2 and all(alive(p) for p in pids)
    finally:
        proc.kill()  # our own child, by PID: its workers must follow
        await proc.wait()
    await wait_until(lambda: not any(alive(p) for p in pids), timeout_s=10, what="workers gone")


async def test_a_worker_whose_port_was_taken_before_it_bound_is_started_again(
    make_node: Any, hears_own_tone: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The port a worker is given is free when the node picks it; another process can bind
    it before the worker does. That worker exits at once: the node starts it again on a new
    port instead of failing to start."""
    taken = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    taken.bind(("127.0.0.1", 0))
    given: list[int] = []
    pick = server.free_port_outside

    def first_taken(host: str, avoid: range, tries: int = 64) -> int:
        given.append(taken.getsockname()[1] if not given else pick(host, avoid, tries))
        return given[-1]

    monkeypatch.setattr(server, "free_port_outside", first_taken)
    calls = Calls()
    calls.echo = True
    try:
        async with make_node(calls, max_calls=2) as node:
            assert len(given) == node.workers + 1, given  # one try more, for the first
            assert len(node.worker_pids) == node.workers
            hears_own_tone(await dial_tone(node.config.port, 600.0), 600.0)
    finally:
        taken.close()
