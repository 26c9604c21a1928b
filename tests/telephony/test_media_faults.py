"""Media faults between a real caller (pjsua) and a node: a UDP relay in the media path.

The caller dials the relay, which passes SIP on to the node with each SDP's audio port
replaced by one of its own, so that both RTP directions cross it. It drops, reorders,
delays and duplicates packets, cuts a burst, changes the caller's SSRC, jumps its sequence
numbers past the 16-bit wrap, and slips in packets of a payload type nobody offered. The
node echoes what it hears; the caller must get its own tone back and the call must end
normally. All on loopback; bounded to a few seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
import socket
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from telephony.dialer import dial
from tests.telephony.nodekit import Calls, tone

pytestmark = pytest.mark.sip

_M_AUDIO = re.compile(rb"^m=audio (\d+)", re.M)
_LENGTH = re.compile(rb"^(Content-Length|l)[ \t]*:[ \t]*\d+", re.M | re.I)


@dataclass
class Faults:
    """What the relay does to RTP, each direction alike unless said."""

    loss: float = 0.0
    reorder: float = 0.0  # chance a packet is held back behind the next one
    duplicate: float = 0.0
    jitter_ms: float = 0.0  # uniform extra delay 0..jitter
    burst: tuple[float, float] | None = None  # (start, end) s after the first packet: all lost
    ssrc_change_at: float | None = None  # caller -> node: a new SSRC from then on
    seq_jump_at: float | None = None  # caller -> node: sequence numbers jump to near 65535
    foreign_pt_every: int = 0  # caller -> node: a packet of PT 99 after every Nth
    rng: random.Random = field(default_factory=lambda: random.Random(3550))


class MediaRelay:
    """SIP in the middle (SDP ports rewritten) and two RTP legs with faults."""

    def __init__(self, node_port: int, faults: Faults) -> None:
        self.node = ("127.0.0.1", node_port)
        self.faults = faults
        self.loop = asyncio.get_running_loop()
        self.sip = self._sock()  # the caller dials this
        self.up = self._sock()  # towards the node's front
        self.rtp_a = self._sock()  # in the caller's SDP as seen by the node
        self.rtp_b = self._sock()  # in the node's SDP as seen by the caller
        self.caller_sip: tuple[str, int] | None = None
        self.caller_rtp: tuple[str, int] | None = None
        self.node_rtp: tuple[str, int] | None = None
        self.started: float | None = None
        self.counts = {"to_node": 0, "to_caller": 0, "lost": 0, "foreign": 0, "duped": 0}
        self._held: dict[str, bytes | None] = {"to_node": None, "to_caller": None}
        self._seq_offset = 0
        self._tasks: set[asyncio.Task[None]] = set()

    @staticmethod
    def _sock() -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        s.setblocking(False)
        return s

    @property
    def sip_port(self) -> int:
        return int(self.sip.getsockname()[1])

    def start(self) -> None:
        for sock, handler in (
            (self.sip, self._from_caller_sip),
            (self.up, self._from_node_sip),
            (self.rtp_a, self._node_rtp_in),
            (self.rtp_b, self._caller_rtp_in),
        ):
            self.loop.add_reader(sock.fileno(), self._drain, sock, handler)

    def close(self) -> None:
        for sock in (self.sip, self.up, self.rtp_a, self.rtp_b):
            self.loop.remove_reader(sock.fileno())
            sock.close()
        for task in self._tasks:
            task.cancel()

    def _drain(self, sock: socket.socket, handler: Any) -> None:
        while True:
            try:
                data, src = sock.recvfrom(65535)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            handler(data, src)

    # SIP -------------------------------------------------------------------------
    @staticmethod
    def _with_port(data: bytes, port: int) -> tuple[bytes, int | None]:
        head, sep, body = data.partition(b"\r\n\r\n")
        m = _M_AUDIO.search(body)
        if not sep or m is None:
            return data, None
        old = int(m.group(1))
        body = body[: m.start(1)] + str(port).encode() + body[m.end(1) :]
        head = _LENGTH.sub(lambda h: h.group(1) + b": " + str(len(body)).encode(), head)
        return head + sep + body, old

    def _from_caller_sip(self, data: bytes, src: tuple[str, int]) -> None:
        self.caller_sip = src
        data, old = self._with_port(data, self.rtp_a.getsockname()[1])
        if old is not None:
            self.caller_rtp = ("127.0.0.1", old)
        self.up.sendto(data, self.node)

    def _from_node_sip(self, data: bytes, _src: tuple[str, int]) -> None:
        data, old = self._with_port(data, self.rtp_b.getsockname()[1])
        if old is not None:
            self.node_rtp = ("127.0.0.1", old)
        if self.caller_sip is not None:
            self.sip.sendto(data, self.caller_sip)

    # RTP -------------------------------------------------------------------------
    def _caller_rtp_in(self, data: bytes, _src: tuple[str, int]) -> None:
        """The caller's RTP (sent to B): on to the node, from A (the address it was offered)."""
        if self.node_rtp is None or len(data) < 12:
            return
        now = self.loop.time()
        self.started = self.started if self.started is not None else now
        t = now - self.started
        f = self.faults
        if f.seq_jump_at is not None and t >= f.seq_jump_at and not self._seq_offset:
            (seq,) = struct.unpack_from("!H", data, 2)
            self._seq_offset = (65530 - seq) & 0xFFFF  # the next packets wrap past 65535
        if self._seq_offset:
            (seq,) = struct.unpack_from("!H", data, 2)
            data = data[:2] + struct.pack("!H", (seq + self._seq_offset) & 0xFFFF) + data[4:]
        if f.ssrc_change_at is not None and t >= f.ssrc_change_at:
            data = data[:8] + struct.pack("!I", 0x5EED5EED) + data[12:]
        self._impair("to_node", data, self.rtp_a, self.node_rtp, t)
        self.counts["to_node"] += 1
        if f.foreign_pt_every and self.counts["to_node"] % f.foreign_pt_every == 0:
            foreign = bytes([data[0], 99]) + data[2:]
            self.rtp_a.sendto(foreign, self.node_rtp)
            self.counts["foreign"] += 1

    def _node_rtp_in(self, data: bytes, _src: tuple[str, int]) -> None:
        """The node's RTP (sent to A): on to the caller, from B."""
        if self.caller_rtp is None:
            return
        t = self.loop.time() - (self.started or self.loop.time())
        self._impair("to_caller", data, self.rtp_b, self.caller_rtp, t)
        self.counts["to_caller"] += 1

    def _impair(
        self, leg: str, data: bytes, via: socket.socket, dest: tuple[str, int], t: float
    ) -> None:
        f, rng = self.faults, self.faults.rng
        if (f.burst is not None and f.burst[0] <= t < f.burst[1]) or rng.random() < f.loss:
            self.counts["lost"] += 1
            return
        held = self._held[leg]
        if held is None and rng.random() < f.reorder:
            self._held[leg] = data  # sent after the next one
            return
        out = [data] if held is None else [data, held]
        self._held[leg] = None
        if rng.random() < f.duplicate:
            out.append(data)
            self.counts["duped"] += 1
        for pkt in out:
            delay = rng.uniform(0, f.jitter_ms) / 1000 if f.jitter_ms else 0.0
            if delay:
                self.loop.call_later(delay, self._send, via, pkt, dest)
            else:
                self._send(via, pkt, dest)

    @staticmethod
    def _send(via: socket.socket, pkt: bytes, dest: tuple[str, int]) -> None:
        with contextlib.suppress(OSError):
            via.sendto(pkt, dest)


def tone_share(samples: np.ndarray, freq: float, helpers: Any) -> float:
    return float(helpers.tone_ratio(samples, freq))


@pytest.mark.parametrize(
    "faults",
    [
        Faults(loss=0.05, reorder=0.03, duplicate=0.02, jitter_ms=30),
        Faults(burst=(1.5, 2.5), ssrc_change_at=3.0, seq_jump_at=3.5, foreign_pt_every=10),
    ],
    ids=["5pct-loss-reorder-dup-jitter", "burst-ssrc-seqwrap-foreign-pt"],
)
async def test_calls_survive_media_faults(make_node: Any, helpers: Any, faults: Faults) -> None:
    calls = Calls()
    calls.echo = True
    async with make_node(calls, max_calls=3, codecs=("PCMU",)) as node:
        relay = MediaRelay(node.config.port, faults)
        relay.start()
        try:
            res = await dial(
                f"sip:bot@127.0.0.1:{relay.sip_port}",
                play=tone(700.0, 5.0),
                play_at_s=0.2,
                record_seconds=6.0,
                codecs=("PCMU",),
            )
        finally:
            relay.close()
        await asyncio.sleep(0.3)
        stats = node.stats()
    assert res.sip_final_status == 200 and not res.ended_by_remote, res.error
    assert relay.counts["to_node"] > 200 and relay.counts["to_caller"] > 200, relay.counts
    assert relay.counts["lost"] > 0
    (call,) = calls.calls
    assert [type(e).__name__ for e in calls.events[call.call_id]][-1] == "CallEnded"
    # The echo came back: most of what the caller heard, past the first second, is its tone.
    heard = res.received[8000:]
    share = tone_share(heard, 700.0, helpers)
    print(f"tone share {share:.3f}, relay {relay.counts}")
    assert share > 0.7, f"the caller heard {share:.2f} of its tone back ({relay.counts})"
    if faults.burst is not None:
        # After the burst and the SSRC and sequence changes, the tone still comes back.
        late = res.received[int(4.2 * 8000) : int(5.2 * 8000)]
        assert helpers.frame_rms(late.astype("<i2").tobytes()) > 1000
        assert tone_share(late, 700.0, helpers) > 0.7
        assert relay.counts["foreign"] > 10
    assert stats["calls_total"] == 1
