"""sipp's calls against a node that echoes: the node's call handler, and sipp's counts read
back from its statistics file (the SIP benchmarks and the rolling-restart test)."""

from __future__ import annotations

import csv
from pathlib import Path

from telephony.call import CallHandle
from telephony.events import AudioIn
from telephony.floodguard import FrontLimits
from telephony.remote_call import RemoteCall


async def echo(call: RemoteCall | CallHandle) -> None:
    """Send every frame the caller sends straight back, until the call ends."""
    async for event in call.receive():
        if isinstance(event, AudioIn):
            call.send(event.pcm)


def sipp_counts(stat_file: Path) -> dict[str, int]:
    """Cumulative successful and failed calls from sipp's last statistics row."""
    with stat_file.open(newline="") as f:
        rows = list(csv.reader(f, delimiter=";"))
    if len(rows) < 2:
        return {"successful": 0, "failed": 0, "created": 0}
    head, last = rows[0], rows[-1]
    value = dict(zip(head, last, strict=False))
    return {
        "created": int(value.get("OutgoingCall(C)", 0) or 0),
        "successful": int(value.get("SuccessfulCall(C)", 0) or 0),
        "failed": int(value.get("FailedCall(C)", 0) or 0),
    }


def one_address_load() -> FrontLimits:
    """Front limits for load from one address (every test caller dials from 127.0.0.1):
    as many unconfirmed calls from it as a trunk's burst brings (a trunk is listed among
    the peers or upstreams in production)."""
    return FrontLimits(max_unconfirmed_per_source=64)
