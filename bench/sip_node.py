"""Load a ``SipServer`` (or one in-process ``SipEndpoint``) with concurrent echoing calls.

    .venv/bin/python -m bench.sip_node --calls 10 --seconds 15
    .venv/bin/python -m bench.sip_node --calls 3 --endpoint   # the single-process baseline
    .venv/bin/python -m bench.sip_node --front                # the front's routing alone
    .venv/bin/python -m bench.sip_node --calls 6 --flood 2000 # a flood during the calls

sipp places the calls over loopback, each streaming a tone as PCMU RTP; ``on_call`` echoes
every received frame back with ``send``. Over a steady window with all calls up it reports,
as JSON: CPU of the node process, of the workers and of sipp (percent of one core, and per
call), worker RSS, the IPC hop times the node measures (``stats()``), and the front's
routing cost per datagram. ``--front`` instead times the front's routing alone, with
plain UDP sockets standing in for the workers. ``--flood PPS`` floods the front from
another address (127.0.0.3: OPTIONS, INVITEs and REGISTERs with fresh Call-IDs, PPS a
second) through the measured window: sipp's calls must all complete (``sipp_rc`` 0), and
the front's drop and ban counters say what became of the flood.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from telephony import EndpointConfig, SipEndpoint, SipServer
from telephony.floodguard import FrontLimits
from telephony.sip_dispatch import SipFront, WorkerSlot
from testkit.ports import free_udp_port
from testkit.sipp_load import echo, one_address_load

SCENARIO = """<?xml version="1.0" encoding="ISO-8859-1" ?>
<scenario name="bench">
  <send retrans="500"><![CDATA[
INVITE sip:bot@[remote_ip]:[remote_port] SIP/2.0
Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
From: sipp <sip:sipp@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
To: <sip:bot@[remote_ip]:[remote_port]>
Call-ID: [call_id]
CSeq: 1 INVITE
Contact: sip:sipp@[local_ip]:[local_port]
Max-Forwards: 70
Content-Type: application/sdp
Content-Length: [len]

v=0
o=user1 53655765 2353687637 IN IP[local_ip_type] [local_ip]
s=-
c=IN IP[media_ip_type] [media_ip]
t=0 0
m=audio [rtpstream_audio_port] RTP/AVP 0
a=rtpmap:0 PCMU/8000
a=ptime:20
a=sendrecv
]]></send>
  <recv response="100" optional="true"/>
  <recv response="180" optional="true"/>
  <recv response="200"/>
  <send><![CDATA[
ACK sip:bot@[remote_ip]:[remote_port] SIP/2.0
Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
From: sipp <sip:sipp@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
To: <sip:bot@[remote_ip]:[remote_port]>[peer_tag_param]
Call-ID: [call_id]
CSeq: 1 ACK
Contact: sip:sipp@[local_ip]:[local_port]
Max-Forwards: 70
Content-Length: 0

]]></send>
  <nop><action><exec rtp_stream="{wav},-1,0"/></action></nop>
  <pause milliseconds="{hold_ms}"/>
  <send retrans="500"><![CDATA[
BYE sip:bot@[remote_ip]:[remote_port] SIP/2.0
Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
From: sipp <sip:sipp@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
To: <sip:bot@[remote_ip]:[remote_port]>[peer_tag_param]
Call-ID: [call_id]
CSeq: 2 BYE
Max-Forwards: 70
Content-Length: 0

]]></send>
  <recv response="200"/>
</scenario>
"""

TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except FileNotFoundError:
        pass
    return 0


def prepare(tmp: Path, seconds: float) -> str:
    """Write the tone and the sipp scenario into ``tmp``; return the sipp command."""
    sipp, sox = shutil.which("sipp"), shutil.which("sox")
    if sipp is None or sox is None:
        raise SystemExit("needs sipp (Debian sip-tester) and sox")
    wav = tmp / "tone.wav"
    subprocess.run(
        [sox, "-n", "-r", "8000", "-c", "1", "-e", "mu-law", str(wav), "synth", "5", "sine", "440"],
        check=True,
        timeout=30,
    )
    hold_ms = int((seconds + 4) * 1000)
    (tmp / "scenario.xml").write_text(SCENARIO.format(wav=wav, hold_ms=hold_ms))
    return sipp


FLOOD_SOURCE = "127.0.0.3"


def flood(port: int, pps: int, seconds: float) -> int:
    """Send ``pps`` requests a second (fresh Call-IDs) from FLOOD_SOURCE; returns how many."""
    methods = ("OPTIONS", "INVITE", "REGISTER")
    sent = 0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((FLOOD_SOURCE, 0))
        me = s.getsockname()[1]
        start = time.monotonic()
        while (now := time.monotonic()) - start < seconds:
            due = int((now - start) * pps)
            while sent < due:
                method = methods[sent % 3]
                s.sendto(
                    (
                        f"{method} sip:{sent}@127.0.0.1 SIP/2.0\r\n"
                        f"Via: SIP/2.0/UDP {FLOOD_SOURCE}:{me};branch=z9hG4bK-f{sent}\r\n"
                        f"From: <sip:x@{FLOOD_SOURCE}>;tag=f{sent}\r\n"
                        f"To: <sip:{sent}@127.0.0.1>\r\n"
                        f"Call-ID: flood-{sent}\r\nCSeq: 1 {method}\r\nContent-Length: 0\r\n\r\n"
                    ).encode(),
                    ("127.0.0.1", port),
                )
                sent += 1
            time.sleep(0.002)
    return sent


async def run(
    calls: int, seconds: float, endpoint: bool, tmp: Path, sipp: str, *, flood_pps: int = 0
) -> dict[str, Any]:
    cfg = EndpointConfig(
        port=free_udp_port(),
        max_calls=calls,
        rtp_port_start=random.randrange(30000, 36000, 2),
        limits=one_address_load(),
    )
    node: SipServer | SipEndpoint = SipEndpoint(cfg, echo) if endpoint else SipServer(cfg, echo)
    await node.start()
    try:
        proc = await asyncio.create_subprocess_exec(
            sipp,
            "-sf", "scenario.xml",
            "-m", str(calls), "-l", str(calls), "-r", "20",
            "-i", "127.0.0.1", "-mi", "127.0.0.1", "-p", str(free_udp_port()),
            "-mp", str(random.randrange(20000, 29000, 4)),
            "-timeout", f"{int(seconds + 30)}s", "-timeout_error", "-nostdin",
            f"127.0.0.1:{cfg.port}",
            cwd=tmp,
            stdin=subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 20
        while node.active_calls < calls:
            if time.monotonic() > deadline:
                raise SystemExit(f"only {node.active_calls} of {calls} calls came up")
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.5)  # settle
        workers = [] if isinstance(node, SipEndpoint) else node.worker_pids
        me = os.getpid()
        t0 = time.monotonic()
        c0 = {pid: cpu_s(pid) for pid in (me, proc.pid, *workers)}
        s0 = node.stats()
        if flood_pps:
            flooded = await asyncio.to_thread(flood, cfg.port, flood_pps, seconds)
        else:
            await asyncio.sleep(seconds)
        wall = time.monotonic() - t0
        c1 = {pid: cpu_s(pid) for pid in (me, proc.pid, *workers)}
        s1 = node.stats()
        up = node.active_calls
        rc = await asyncio.wait_for(proc.wait(), timeout=60)
    finally:
        await node.stop()

    def pct(pid: int) -> float:
        return round(100 * (c1[pid] - c0[pid]) / wall, 1)

    worker_pct = sum(pct(p) for p in workers)
    frames = s1["rtp_frames_in"] - s0["rtp_frames_in"]
    out: dict[str, Any] = {
        "mode": "endpoint" if endpoint else "node",
        "calls": calls,
        "calls_up_during_window": up,
        "window_s": round(wall, 1),
        "sipp_rc": rc,
        "workers": len(workers),
        "node_process_cpu_pct": pct(me),
        "workers_cpu_pct": round(worker_pct, 1),
        "sipp_cpu_pct": pct(proc.pid),
        "cpu_pct_per_call": round((pct(me) + worker_pct) / calls, 2),
        "node_process_cpu_pct_per_call": round(pct(me) / calls, 2),
        "frames_in_per_s": round(frames / wall),
        "node_rss_kb": rss_kb(me),
        "worker_rss_kb": s1.get("workers_rss_kb", 0) // max(1, len(workers)),
    }
    for key in sorted(s1):
        if key.startswith(("ipc_", "bridge_to_node", "front_route_ns")):
            out[key] = s1[key]
    if flood_pps:
        out["flood_sent"] = flooded
        for key in (
            "front_dropped_rate",
            "front_dropped_banned",
            "front_bans",
            "front_answered_options",
            "front_rejected_request",
            "rejected_codec",
        ):
            out[key] = s1.get(key, 0) - s0.get(key, 0)
    return out


FRONT_INVITE = (
    b"INVITE sip:bot@127.0.0.1:5060 SIP/2.0\r\n"
    b"Via: SIP/2.0/UDP 127.0.0.1:5070;branch=z9hG4bK-CID\r\n"
    b"From: sipp <sip:sipp@127.0.0.1:5070>;tag=1234SIPpTag001\r\n"
    b"To: <sip:bot@127.0.0.1:5060>\r\nCall-ID: CID\r\nCSeq: 1 INVITE\r\n"
    b"Contact: sip:sipp@127.0.0.1:5070\r\nMax-Forwards: 70\r\n"
    b"Content-Type: application/sdp\r\nContent-Length: 129\r\n\r\n"
    b"v=0\r\no=user1 53655765 2353687637 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\n"
    b"t=0 0\r\nm=audio 6000 RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n"
)


async def front_cost(n: int = 800) -> dict[str, Any]:
    """CPU per datagram of ``SipFront`` routing: new Call-ID, known Call-ID, and 503."""
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("127.0.0.1", 0))
    slot = WorkerSlot(0, n)
    slot.addr = sink.getsockname()
    # Limits out of the way: this times the routing and the request checks.
    limits = FrontLimits(per_source_burst=10 * n, node_burst=10 * n)
    front = SipFront("127.0.0.1", 0, [slot], retry_after_s=30, limits=limits)
    await front.start()
    client = ("127.0.0.1", 5070)
    out: dict[str, Any] = {"datagrams_per_case": n}
    try:
        for case, prefix in (("new_call_id", b"a"), ("known_call_id", b"a"), ("busy_503", b"b")):
            if case == "busy_503":
                slot.capacity = 0
            datagrams = [FRONT_INVITE.replace(b"CID", prefix + b"%d" % i) for i in range(n)]
            before = front.route_cost_s
            for data in datagrams:
                front.datagram_received(data, client)
            out[f"{case}_us"] = round((front.route_cost_s - before) / n * 1e6, 1)
    finally:
        front.close()
        front.close_relays()
        sink.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sip_node", description=__doc__)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=15.0, help="measured window")
    parser.add_argument("--endpoint", action="store_true", help="one SipEndpoint in-process")
    parser.add_argument("--front", action="store_true", help="time the SIP front alone")
    parser.add_argument("--flood", type=int, default=0, metavar="PPS", help="flood the front")
    args = parser.parse_args()
    if args.front:
        print(json.dumps(asyncio.run(front_cost()), indent=2))
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="sb-bench-node-"))
    stdout = os.dup(1)
    os.dup2(2, 1)  # pjlib writes to stdout in --endpoint mode; keep stdout for the JSON
    try:
        sipp = prepare(tmp, args.seconds)
        result = asyncio.run(
            run(args.calls, args.seconds, args.endpoint, tmp, sipp, flood_pps=args.flood)
        )
    finally:
        sys.stdout.flush()
        os.dup2(stdout, 1)
        os.close(stdout)
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(result, indent=2))
    return 0 if result["calls_up_during_window"] == args.calls and result["sipp_rc"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
