"""Two nodes restarted one after the other under calls: no call fails (the run of
``testkit.rolling_restart``, which ``bench.rolling_restart`` also runs)."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest

from testkit.rolling_restart import drive

pytestmark = pytest.mark.sip


@pytest.mark.skipif(shutil.which("sipp") is None or shutil.which("sox") is None, reason="sipp, sox")
async def test_a_rolling_restart_of_two_nodes_drops_no_call(tmp_path: Path) -> None:
    # sipp sends each call to A, to B on a 503 or no answer; A then B get SIGTERM, drain
    # (503 to new calls, live calls go on to their BYE), exit and start again.
    args = argparse.Namespace(rate=1.0, hold_s=3.0, attempts_s=10.0, max_calls=6)
    result = await drive(args, tmp_path)
    assert result["passed"], result
    assert (result["successful"], result["failed"]) == (10, 0)
    first_a, first_b = result["node_a"][0], result["node_b"][0]
    # Each rolled node drained (its calls ended by their BYE, not cut) and exited cleanly...
    assert first_a["rc"] == 0 and first_a["drained"] and first_a["calls_total"] >= 1
    assert first_b["rc"] == 0 and first_b["drained"]
    # ...and the calls that came while A drained went to B: the failover was exercised.
    assert first_a["rejected_draining"] >= 1
    answered = sum(run["calls_total"] for run in (*result["node_a"], *result["node_b"]))
    assert answered == 10
