"""The soak benchmark's arithmetic and its look at a process tree."""

import os
import subprocess
import sys

import pytest

from testkit.soak import percentile, sample_tree, slope_per_5min


def test_slope_is_per_five_minutes_and_flat_is_zero() -> None:
    assert slope_per_5min([(0, 100.0), (300, 110.0), (600, 120.0)]) == pytest.approx(10.0)
    assert slope_per_5min([(0, 5.0), (30, 5.0), (60, 5.0)]) == pytest.approx(0.0)
    assert slope_per_5min([(0, 1.0)]) is None
    assert slope_per_5min([(10, 1.0), (10, 2.0)]) is None


def test_percentiles_between_ranks() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == pytest.approx(50.5)
    assert percentile(values, 95) == pytest.approx(95.05)
    assert percentile([], 50) is None


def test_a_sample_sees_the_process_and_its_children() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        s = sample_tree(os.getpid(), 1.0, calls_done=2, turns=3)
        assert s is not None
        assert s.main.rss_kib > 0 and s.main.fds > 0 and s.main.threads >= 1
        assert child.pid in {c.pid for c in s.children}
    finally:
        child.kill()
        child.wait()
    assert sample_tree(2**22 + 12345, 0.0, 0, 0) is None
