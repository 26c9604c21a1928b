"""Run a benchmark on less CPU than the machine has: a cgroup CPU quota.

A bot node's latency depends on the CPU it gets, and the CPU a shared host gives varies
from hour to hour. ``cpu_limit(1.0)`` moves the calling process into a new cgroup whose
quota is one core's worth of CPU time; everything it starts afterwards (the bot, its SIP
workers, the callers) inherits it. The same run then shows how much headroom a result
has, on any machine, rather than how fast that machine was that day.

A quota is not a slower CPU: a single thread still runs at full speed until the group has
used its share of the period, and then the whole group waits for the next period. The
period is 10 ms (the kernel's default is 100 ms) so that a wait never lasts longer than a
packet or two. Needs root; works on cgroup v2 (``cpu.max``) and on the v1 ``cpu``
controller (``cpu.cfs_quota_us``).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
PERIOD_US = 10_000


class CpuLimitUnavailable(RuntimeError):
    """No writable cgroup CPU controller (not root, or no cpu controller mounted)."""


@dataclass(frozen=True)
class Hierarchy:
    """Where the CPU controller lives, and which cgroup a process is in now."""

    mount: Path
    v2: bool
    current: Path  # the process's own cgroup, as a directory under ``mount``


def find_hierarchy(root: Path = CGROUP_ROOT, proc_cgroup: str | None = None) -> Hierarchy:
    """The cgroup hierarchy that controls CPU time, and this process's place in it."""
    if proc_cgroup is None:
        proc_cgroup = Path("/proc/self/cgroup").read_text()
    paths: dict[str, str] = {}
    for line in proc_cgroup.splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    v1 = root / "cpu"
    if "cpu" in paths and (v1 / "cpu.cfs_quota_us").exists():
        return Hierarchy(v1, False, v1 / paths["cpu"].lstrip("/"))
    if (root / "cgroup.controllers").exists() and "" in paths:
        if "cpu" not in (root / "cgroup.controllers").read_text().split():
            raise CpuLimitUnavailable(f"{root}: the cgroup v2 cpu controller is not enabled")
        return Hierarchy(root, True, root / paths[""].lstrip("/"))
    raise CpuLimitUnavailable(f"no cgroup cpu controller under {root}")


def quota_us(cores: float, period_us: int = PERIOD_US) -> int:
    """CPU time per period for ``cores`` cores' worth (the kernel's floor is 1 ms)."""
    if cores <= 0:
        raise ValueError(f"cores must be positive, got {cores}")
    return max(1000, round(cores * period_us))


@contextlib.contextmanager
def cpu_limit(
    cores: float,
    *,
    root: Path = CGROUP_ROOT,
    proc_cgroup: str | None = None,
    pid: int | None = None,
) -> Iterator[Path]:
    """Run the body (and what it starts) on ``cores`` cores' worth of CPU; yields the cgroup.

    On exit this process goes back to its own cgroup and the new one is removed once the
    processes it still holds (children that are still exiting) have gone.
    """
    quota = quota_us(cores)
    pid = os.getpid() if pid is None else pid
    where = find_hierarchy(root, proc_cgroup)
    group = where.current / f"switchboard-bench-{pid}"
    try:
        group.mkdir(exist_ok=True)
        if where.v2:
            (group / "cpu.max").write_text(f"{quota} {PERIOD_US}\n")
        else:
            (group / "cpu.cfs_period_us").write_text(f"{PERIOD_US}\n")
            (group / "cpu.cfs_quota_us").write_text(f"{quota}\n")
        (group / "cgroup.procs").write_text(f"{pid}\n")
    except OSError as exc:
        with contextlib.suppress(OSError):
            group.rmdir()
        raise CpuLimitUnavailable(f"cannot set a CPU quota in {group}: {exc}") from exc
    try:
        yield group
    finally:
        (where.current / "cgroup.procs").write_text(f"{pid}\n")
        _remove(group)


def _remove(group: Path, wait_s: float = 5.0) -> None:
    """Remove an emptied cgroup, waiting a little for exiting children to leave it."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                return  # still busy: an empty group left behind is harmless
            time.sleep(0.1)
