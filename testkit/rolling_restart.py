"""A rolling restart of two nodes under calls: does any call fail? (``bench.rolling_restart``
runs it as a benchmark, ``tests/telephony/test_rolling_restart.py`` as a test.)

Two nodes (``SipServer`` processes on their own ports, workers as in production, echoing
each call's audio) take calls from sipp over loopback. sipp plays a trunk with two
destinations: each call's INVITE goes to node A, and on a 503 (or no final answer in 2 s)
to node B. While calls are up on both, A gets SIGTERM: it drains (new INVITEs: 503 +
Retry-After; its live calls go on to their BYE) and exits once its last call has ended; it
is started again on the same port; then B gets the same. A node process here
(``python -m testkit.rolling_restart PORT MAX_CALLS DRAIN_S``) does on SIGTERM what
``switchboard run`` does: ``SipServer.drain`` then ``stop``.

Reported (JSON): calls attempted, successful and failed (sipp's statistics), each node
process's calls answered, 503s sent while draining and exit status, and the time each
drain took. The run passes when no call failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from telephony import EndpointConfig, SipServer
from testkit.ports import free_udp_block, free_udp_port
from testkit.sipp_load import echo, one_address_load, sipp_counts

FAILOVER = """<?xml version="1.0" encoding="ISO-8859-1" ?>
<scenario name="trunk with two nodes">
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

{sdp}
]]></send>
  <recv response="100" optional="true"/>
  <recv response="180" optional="true"/>
  <recv response="503" optional="true" next="failover"/>
  <recv response="200" timeout="2000" ontimeout="failover" next="answered">
    <action><ereg regexp="([0-9]+)" search_in="hdr" header="CSeq:" assign_to="cs,cseq"/></action>
  </recv>
  <label id="failover"/>
  <nop><action><setdest host="127.0.0.1" port="{port_b}" protocol="udp"/></action></nop>
  <send retrans="500"><![CDATA[
INVITE sip:bot@127.0.0.1:{port_b} SIP/2.0
Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
From: sipp <sip:sipp@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
To: <sip:bot@127.0.0.1:{port_b}>
Call-ID: [call_id]
CSeq: 2 INVITE
Contact: sip:sipp@[local_ip]:[local_port]
Max-Forwards: 70
Content-Type: application/sdp
Content-Length: [len]

{sdp}
]]></send>
  <recv response="100" optional="true"/>
  <recv response="180" optional="true"/>
  <recv response="200">
    <action><ereg regexp="([0-9]+)" search_in="hdr" header="CSeq:" assign_to="cs,cseq"/></action>
  </recv>
  <label id="answered"/>
  <Reference variables="cs"/>
  <send><![CDATA[
ACK sip:bot@[remote_ip]:[remote_port] SIP/2.0
Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
From: sipp <sip:sipp@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
To: <sip:bot@[remote_ip]:[remote_port]>[peer_tag_param]
Call-ID: [call_id]
CSeq: [$cseq] ACK
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
CSeq: 3 BYE
Max-Forwards: 70
Content-Length: 0

]]></send>
  <recv response="200"/>
</scenario>
"""

SDP = """v=0
o=user1 53655765 2353687637 IN IP[local_ip_type] [local_ip]
s=-
c=IN IP[media_ip_type] [media_ip]
t=0 0
m=audio [rtpstream_audio_port] RTP/AVP 0
a=rtpmap:0 PCMU/8000
a=ptime:20
a=sendrecv"""


# -- one node process ---------------------------------------------------------------


async def serve(port: int, max_calls: int, drain_s: float) -> None:
    """A node: answers and echoes calls; on SIGTERM drains, then stops (as the node does)."""
    cfg = EndpointConfig(
        port=port,
        max_calls=max_calls,
        rtp_port_start=random.randrange(30000, 38000, 2),
        rtp_port_range=600,
        retry_after_s=5,
        log_level=0,
        limits=one_address_load(),
    )
    node = SipServer(cfg, echo)
    await node.start()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print("ready", flush=True)
    await stop.wait()
    t0 = time.monotonic()
    drained = await node.drain(drain_s)
    drain_s_taken = time.monotonic() - t0
    await node.stop()
    stats = node.stats()
    report = {
        "drained": drained,
        "drain_s": round(drain_s_taken, 1),
        "calls_total": stats["calls_total"],
        "rejected_draining": stats.get("front_rejected_draining", 0),
    }
    print("stopped " + json.dumps(report), flush=True)


# -- the driver ---------------------------------------------------------------------


class NodeProc:
    """One node process (``serve``), started, rolled (SIGTERM, exit, start) and stopped."""

    def __init__(self, name: str, port: int, max_calls: int, drain_s: float) -> None:
        self.name, self.port = name, port
        self.max_calls, self.drain_s = max_calls, drain_s
        self.proc: asyncio.subprocess.Process | None = None
        self.runs: list[dict[str, Any]] = []

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "testkit.rolling_restart", str(self.port),
            str(self.max_calls), str(self.drain_s),
            stdin=subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), 60)
        if line.strip() != b"ready":
            raise SystemExit(f"node {self.name} did not start: {line!r}")

    async def roll(self) -> float:
        """SIGTERM, wait for the exit, start again; returns seconds from signal to exit."""
        assert self.proc is not None and self.proc.stdout is not None
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        out, _ = await asyncio.wait_for(self.proc.communicate(), self.drain_s + 30)
        took = time.monotonic() - t0
        run = {"rc": self.proc.returncode, "signal_to_exit_s": round(took, 1)}
        for line in out.decode().splitlines():
            if line.startswith("stopped "):
                run.update(json.loads(line.removeprefix("stopped ")))
        self.runs.append(run)
        await self.start()
        return took

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                out, _ = await asyncio.wait_for(self.proc.communicate(), self.drain_s + 30)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
                return
            run: dict[str, Any] = {"rc": self.proc.returncode, "final": True}
            for line in out.decode().splitlines():
                if line.startswith("stopped "):
                    run.update(json.loads(line.removeprefix("stopped ")))
            self.runs.append(run)


def read_errors(tmp: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in tmp.glob("*_errors.log"))


async def drive(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """The run (``args``: ``rate`` calls/s for ``attempts_s``, each held ``hold_s``, with
    ``max_calls`` per node) in the folder ``tmp``; the report, ``passed`` when no call
    failed."""
    sipp, sox = shutil.which("sipp"), shutil.which("sox")
    if sipp is None or sox is None:
        raise SystemExit("needs sipp (Debian sip-tester) and sox")
    wav = tmp / "tone.wav"
    tone = [
        sox,
        "-n",
        "-r",
        "8000",
        "-c",
        "1",
        "-e",
        "mu-law",
        str(wav),
        "synth",
        "5",
        "sine",
        "440",
    ]
    await asyncio.to_thread(subprocess.run, tone, check=True, timeout=30)
    a = NodeProc("A", free_udp_port(), args.max_calls, args.hold_s + 20)
    b = NodeProc("B", free_udp_port(), args.max_calls, args.hold_s + 20)
    xml = FAILOVER.format(sdp=SDP, port_b=b.port, wav=wav, hold_ms=int(args.hold_s * 1000))
    (tmp / "scenario.xml").write_text(xml)
    calls = round(args.rate * args.attempts_s)
    stat = tmp / "stat.csv"
    await asyncio.gather(a.start(), b.start())
    proc: asyncio.subprocess.Process | None = None
    try:
        proc = await asyncio.create_subprocess_exec(
            sipp, "-sf", "scenario.xml", "-m", str(calls), "-r", f"{args.rate:g}",
            "-i", "127.0.0.1", "-mi", "127.0.0.1", "-p", str(free_udp_port()),
            "-mp", str(free_udp_block()),
            "-timeout", f"{int(args.attempts_s + args.hold_s * 4 + 90)}s", "-timeout_error",
            "-trace_stat", "-stf", str(stat), "-fd", "1", "-trace_err", "-nostdin",
            f"127.0.0.1:{a.port}",
            cwd=tmp, stdin=subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        # Calls up on A and B, then roll A, then B.
        await asyncio.sleep(args.hold_s + 1)
        took_a = await a.roll()
        took_b = await b.roll()
        rc = await asyncio.wait_for(proc.wait(), args.attempts_s + args.hold_s * 4 + 120)
    finally:
        if proc is not None and proc.returncode is None:
            proc.kill()
            await proc.wait()
        await asyncio.gather(a.stop(), b.stop())
    counts = sipp_counts(stat)
    errors = await asyncio.to_thread(read_errors, tmp)
    return {
        "rate_cps": args.rate,
        "hold_s": args.hold_s,
        "attempted": calls,
        **counts,
        "sipp_rc": rc,
        "node_a": a.runs,
        "node_b": b.runs,
        "a_signal_to_exit_s": round(took_a, 1),
        "b_signal_to_exit_s": round(took_b, 1),
        "passed": rc == 0 and counts["failed"] == 0 and counts["successful"] == calls,
        "sipp_errors_tail": errors[-800:],
    }


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])))
