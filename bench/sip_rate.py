"""Session establishment rate and session capacity of a node, with media (RFC 7501/7502 terms).

    .venv/bin/python -m bench.sip_rate                          # steps 1, 2, 4, 6, 8 calls/s
    .venv/bin/python -m bench.sip_rate --rates 2,4,8 --hold-s 6 --max-calls 30
    .venv/bin/python -m bench.sip_rate --flood 2000             # a flood during every step
    .venv/bin/python -m bench.sip_rate --transport tcp          # SIP over one TCP connection

One ``SipServer`` (``--max-calls``, workers as in production) answers every call and echoes
its audio; sipp places calls over loopback at each step's rate for ``--attempts-s``
seconds, each streaming a PCMU tone for ``--hold-s`` seconds before its BYE. A step passes
when every attempted call completed (RFC 7502: no failed session attempt, a 503 from a full
node included). The steps go up until one fails; the report (JSON) has each step's
attempts, successes, failures, the most calls up at once the node saw (sampled every 50 ms)
and the sipp CPU, then:

- ``session_establishment_rate``: the highest step rate with 0 failed calls (RFC 7501
  3.3.1, on a step grid, not bisected);
- ``session_capacity``: the most calls up at once during a passing step (RFC 7501's
  session capacity, measured at those rates and holding times rather than by its own
  long-hold test).

``--flood PPS`` sends OPTIONS, INVITEs and REGISTERs with fresh Call-IDs from 127.0.0.3
(``bench.sip_node.flood``) through every step: the legitimate calls must still all
complete, and the front's drop and ban counters say what became of the flood.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.sip_node import SCENARIO, flood
from telephony import EndpointConfig, SipServer
from telephony.sip_stream import StreamSettings
from testkit.ports import free_udp_port
from testkit.sipp_load import echo, one_address_load, sipp_counts


def prepare(tmp: Path, hold_s: float) -> str:
    """The tone and the scenario in ``tmp``; returns sipp's path."""
    sipp, sox = shutil.which("sipp"), shutil.which("sox")
    if sipp is None or sox is None:
        raise SystemExit("needs sipp (Debian sip-tester) and sox")
    wav = tmp / "tone.wav"
    subprocess.run(
        [sox, "-n", "-r", "8000", "-c", "1", "-e", "mu-law", str(wav), "synth", "5", "sine", "440"],
        check=True,
        timeout=30,
    )
    (tmp / "scenario.xml").write_text(SCENARIO.format(wav=wav, hold_ms=int(hold_s * 1000)))
    return sipp


async def step(
    node: SipServer, sipp: str, tmp: Path, rate: float, args: argparse.Namespace
) -> dict[str, Any]:
    attempts_s, hold_s, flood_pps = args.attempts_s, args.hold_s, args.flood
    calls = max(1, round(rate * attempts_s))
    stat = tmp / f"stat-{rate:g}.csv"
    assert node.config.port
    cmd = [
        sipp, "-sf", "scenario.xml",
        "-m", str(calls), "-r", f"{rate:g}", "-rp", "1000",
        "-i", "127.0.0.1", "-mi", "127.0.0.1", "-p", str(free_udp_port()),
        "-mp", str(random.randrange(20000, 28000, 4)),
        "-timeout", f"{int(attempts_s + hold_s + 30)}s", "-timeout_error",
        "-trace_stat", "-stf", str(stat), "-fd", "1", "-nostdin",
        # TCP: every call on one connection, as a trunk keeps one (sipp's t1)
        "-t", "t1" if args.transport == "tcp" else "u1",
        f"127.0.0.1:{node.config.port}",
    ]  # fmt: skip
    s0 = node.stats()
    proc = await asyncio.create_subprocess_exec(
        *cmd,
        cwd=tmp,
        stdin=subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    flooding = (
        asyncio.create_task(
            asyncio.to_thread(flood, node.config.port, flood_pps, attempts_s + hold_s)
        )
        if flood_pps
        else None
    )
    peak, t0 = 0, time.monotonic()
    while proc.returncode is None:
        peak = max(peak, node.active_calls)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), 0.05)
    wall = time.monotonic() - t0
    flooded = await flooding if flooding is not None else 0
    counts = sipp_counts(stat)
    s1 = node.stats()
    out: dict[str, Any] = {
        "rate_cps": rate,
        "attempted": calls,
        **counts,
        "sipp_rc": proc.returncode,
        "peak_concurrent": peak,
        "wall_s": round(wall, 1),
        "node_rejected_busy": s1["rejected_busy"] - s0["rejected_busy"],
    }
    out["passed"] = counts["failed"] == 0 and counts["successful"] == calls and proc.returncode == 0
    if flood_pps:
        out["flood_sent"] = flooded
        for key in ("front_dropped_rate", "front_dropped_banned", "front_bans"):
            out[key] = s1.get(key, 0) - s0.get(key, 0)
    # Every call of this step gone before the next one starts.
    deadline = time.monotonic() + 30
    while node.active_calls and time.monotonic() < deadline:  # noqa: ASYNC110 - a poll
        await asyncio.sleep(0.1)
    return out


async def search(args: argparse.Namespace, tmp: Path, sipp: str) -> dict[str, Any]:
    cfg = EndpointConfig(
        port=free_udp_port(),
        max_calls=args.max_calls,
        rtp_port_start=random.randrange(30000, 34000, 2),
        rtp_port_range=4000,
        log_level=0,
        stream=StreamSettings(tcp=args.transport == "tcp"),
        limits=one_address_load(),
    )
    node = SipServer(cfg, echo)
    await node.start()
    steps: list[dict[str, Any]] = []
    workers = len(node.worker_pids)
    try:
        for rate in args.rates:
            result = await step(node, sipp, tmp, rate, args)
            steps.append(result)
            print(json.dumps(result), file=sys.stderr, flush=True)
            if not result["passed"]:
                break
    finally:
        await node.stop()
    passed = [s for s in steps if s["passed"]]
    return {
        "max_calls": args.max_calls,
        "workers": workers,
        "hold_s": args.hold_s,
        "attempts_s": args.attempts_s,
        "flood_pps": args.flood,
        "transport": args.transport,
        "media": "PCMU tone from sipp, echoed by the node",
        "steps": steps,
        "session_establishment_rate_cps": max((s["rate_cps"] for s in passed), default=0),
        "session_capacity": max((s["peak_concurrent"] for s in passed), default=0),
        "first_failing_rate_cps": None if len(passed) == len(steps) else steps[-1]["rate_cps"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sip_rate", description=__doc__)
    parser.add_argument(
        "--rates",
        type=lambda s: [float(x) for x in s.split(",")],
        default=[1.0, 2.0, 4.0, 6.0, 8.0],
        help="call rates to step through (calls/s, comma-separated, ascending)",
    )
    parser.add_argument("--attempts-s", type=float, default=8.0, help="seconds of attempts a step")
    parser.add_argument("--hold-s", type=float, default=4.0, help="each call's length")
    parser.add_argument("--max-calls", type=int, default=24)
    parser.add_argument("--flood", type=int, default=0, metavar="PPS")
    parser.add_argument("--transport", choices=("udp", "tcp"), default="udp")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sb-bench-rate-"))
    try:
        sipp = prepare(tmp, args.hold_s)
        result = asyncio.run(search(args, tmp, sipp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(result, indent=2))
    return 0 if result["session_establishment_rate_cps"] > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
