"""A node that dies mid-call: the real CallLog and writer, killed by the test with SIGKILL.

``python -m tests.calllog.crash_writer URL SPOOL_DIR NODE TURNS`` answers one call, finishes
TURNS turns and a DTMF event, waits until they are in the database (or, with the database
away, fsync'd to the spool), prints ``READY``, and sleeps until killed.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from tests.calllog.helpers import a_turn, open_log


async def main(url: str, spool: Path, node: str, turns: int) -> None:
    log = await open_log(url, spool, node=node)
    log.call_answered("crash-1", caller="sip:+15550009999@pbx", callee="sip:bot@node")
    for n in range(turns):
        log.turn_finished(a_turn("crash-1", n))
    log.event("crash-1", "dtmf", "5")
    await log.writer.flush()
    assert log.writer.pending == 0
    print("READY spooling" if log.writer.spooling else "READY written", flush=True)
    await asyncio.sleep(3600)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])))
