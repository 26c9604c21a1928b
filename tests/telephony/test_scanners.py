"""A SIPVicious scan of a node on loopback: nothing enumerated, the scanner banned, and a
trunk's call during the scan answered and talked to."""

from __future__ import annotations

import asyncio
import ipaddress
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from telephony.floodguard import FrontLimits
from telephony.peers import Peer
from tests.telephony.nodekit import Calls, dial_tone

pytestmark = pytest.mark.sip

SVWAR = shutil.which("sipvicious_svwar") or str(Path(sys.executable).parent / "sipvicious_svwar")
SCANNER = "127.0.0.1"  # svwar sends from the default address whatever its --bindingip
TRUNK = "127.0.0.2"


async def svwar(port: int, method: str) -> str:
    """One bounded svwar run (extensions 100-600) against the node; its output."""
    proc = await asyncio.create_subprocess_exec(
        SVWAR, "-m", method, "-e", "100-600", "-p", str(port), "--force",
        "--maximumtime", "3", SCANNER,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), 90)
    except TimeoutError:
        proc.kill()  # our own child, by PID
        await proc.wait()
        raise AssertionError(f"svwar -m {method} did not finish in 90 s") from None
    return out.decode(errors="replace")


@pytest.mark.skipif(not Path(SVWAR).exists(), reason="sipvicious is not installed")
async def test_svwar_finds_no_extension_is_banned_and_a_trunk_call_goes_on(
    make_node: Any, hears_own_tone: Any
) -> None:
    calls = Calls()
    calls.echo = True
    peers = (Peer(name="trunk", networks=(ipaddress.ip_network(f"{TRUNK}/32"),)),)
    limits = FrontLimits(per_source_rate=20, per_source_burst=40, ban_after_drops=50, ban_s=60)
    async with make_node(calls, max_calls=3, peers=peers, limits=limits) as node:
        port = node.config.port
        outputs = {method: await svwar(port, method) for method in ("INVITE", "REGISTER")}
        # The OPTIONS sweep runs while the trunk's call is up.
        sweep = asyncio.ensure_future(svwar(port, "OPTIONS"))
        res = await dial_tone(port, 650.0, 3.0, bind_host=TRUNK)
        outputs["OPTIONS"] = await sweep
        stats = node.stats()
        front = node._front
        assert front is not None
        banned = front.guard.banned(SCANNER, time.monotonic())
    for method, out in outputs.items():
        assert "found nothing" in out and "| Extension" not in out, (method, out[-2000:])
    hears_own_tone(res, 650.0)
    assert len(calls.calls) == 1 and TRUNK in calls.calls[0].remote_uri
    assert banned and stats["front_bans"] == 1 and stats["front_dropped_banned"] > 0
    assert stats["front_rejected_forbidden"] >= 1  # its INVITEs: 403, whatever the number
    assert stats["calls_total"] == 1
