"""A node that dies mid-call: the real CallLog and writer, killed by the test with SIGKILL.

``python -m tests.calllog.crash_writer URL SPOOL_DIR NODE TURNS`` answers two calls: one
that finishes TURNS turns and a DTMF event, and one whose caller says nothing (nothing but
its answer and the heartbeats is ever written for it). It waits until those records are in
the database (or, with the database away, fsync'd to the spool), keeps both calls up for
``LIVE_S`` more seconds with a heartbeat every ``HEARTBEAT_S``, writes what it has, prints
``READY <written|spooling> <wall-clock time, ISO>`` and sleeps until killed.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime
from pathlib import Path

from tests.calllog.helpers import FAST, a_turn, open_log

#: The calls' heartbeat in this node.
HEARTBEAT_S = 0.5
#: How long both calls stay up after their last turn and event, before READY.
LIVE_S = 4.0


async def main(url: str, spool: Path, node: str, turns: int) -> None:
    options = FAST.model_copy(update={"heartbeat_s": HEARTBEAT_S})
    log = await open_log(url, spool, node=node, options=options)
    log.call_answered("crash-1", caller="sip:+15550009999@pbx", callee="sip:bot@node")
    log.call_answered("crash-silent", caller="sip:+15550008888@pbx", callee="sip:bot@node")
    for n in range(turns):
        log.turn_finished(a_turn("crash-1", n))
    log.event("crash-1", "dtmf", "5")
    await log.writer.flush()
    await asyncio.sleep(LIVE_S)
    await log.writer.flush()  # a heartbeat may come during it: only those before count
    mode = "spooling" if log.writer.spooling else "written"
    print(f"READY {mode} {datetime.now(UTC).isoformat()}", flush=True)
    await asyncio.sleep(3600)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])))
