"""The benchmark's CPU quota: where it finds the controller, and that the kernel applies it."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testkit.cpu_limit import (
    CGROUP_ROOT,
    CpuLimitUnavailable,
    cpu_limit,
    find_hierarchy,
    quota_us,
)

V1_PROC = "4:memory:/x\n2:cpuacct:/\n1:cpu:/jobs/a\n0::/\n"
V2_PROC = "0::/user.slice/app\n"


def test_quota_is_cores_times_the_period_with_the_kernels_floor() -> None:
    assert quota_us(1.0) == 10_000
    assert quota_us(1.5) == 15_000
    assert quota_us(0.01) == 1000
    with pytest.raises(ValueError, match="positive"):
        quota_us(0)


def test_finds_the_v1_cpu_controller_and_the_process_group(tmp_path: Path) -> None:
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    where = find_hierarchy(tmp_path, V1_PROC)
    assert not where.v2
    assert where.mount == tmp_path / "cpu"
    assert where.current == tmp_path / "cpu" / "jobs" / "a"


def test_finds_cgroup_v2_only_with_its_cpu_controller(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("cpuset io memory pids\n")
    with pytest.raises(CpuLimitUnavailable, match="cpu controller is not enabled"):
        find_hierarchy(tmp_path, V2_PROC)
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    where = find_hierarchy(tmp_path, V2_PROC)
    assert where.v2
    assert where.current == tmp_path / "user.slice" / "app"


def test_no_controller_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CpuLimitUnavailable, match="no cgroup cpu controller"):
        find_hierarchy(tmp_path, V2_PROC)


def _usable() -> bool:
    try:
        with cpu_limit(2.0):
            return True
    except CpuLimitUnavailable:
        return False


BURN = "import time\nend = time.monotonic() + 1.0\nwhile time.monotonic() < end: pass\n"


@pytest.mark.skipif(os.geteuid() != 0 or not CGROUP_ROOT.exists(), reason="needs root")
def test_a_child_started_under_the_limit_gets_only_its_share() -> None:
    if not _usable():
        pytest.skip("no writable cgroup cpu controller here")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    with cpu_limit(0.25) as group:
        assert group.exists()
        subprocess.run([sys.executable, "-c", BURN], check=True)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    # Unlimited, a second of spinning costs a second of CPU; a quarter core allows ~0.25 s.
    assert cpu < 0.6 * wall, (cpu, wall)
    assert not group.exists()
    own = Path("/proc/self/cgroup").read_text()
    assert "switchboard-bench" not in own
