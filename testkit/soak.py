"""A node under calls for a long time: callers that call again as each call ends, and what
the node's processes hold (RSS, open file descriptors) sampled as they go.

``bench.soak`` is the command; the pieces here are what it is made of, and what the tests
check: sampling a process tree, the growth's slope, percentiles, the callers' loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from testkit.baresip import Caller, prepare_caller, run_caller
from testkit.question_script import Script


def children(pid: int) -> list[int]:
    """``pid``'s child processes."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            out += [int(c) for c in task.read_text().split()]
    return sorted(set(out))


def rss_kib(pid: int) -> int | None:
    """Resident set size (KiB); None: the process is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return None


def open_fds(pid: int) -> int | None:
    """Open file descriptors; None: the process is gone."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def threads(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return None


def command_name(pid: int) -> str:
    """The module a Python child runs (``telephony.worker``), else its program's name."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    words = [a.decode(errors="replace") for a in argv if a]
    if "-m" in words[:-1]:
        return words[words.index("-m") + 1]
    if "-c" in words:
        return "python -c"
    return Path(words[0]).name if words else "?"


@dataclass(frozen=True)
class ProcSample:
    pid: int
    name: str
    rss_kib: int
    fds: int
    threads: int


@dataclass(frozen=True)
class Sample:
    """One look at the node: its main process, and each child process."""

    t_s: float  # since the calls began
    main: ProcSample
    children: tuple[ProcSample, ...]
    calls_done: int
    turns: int


def sample_process(pid: int, name: str) -> ProcSample | None:
    rss, fds, n = rss_kib(pid), open_fds(pid), threads(pid)
    if rss is None or fds is None or n is None:
        return None
    return ProcSample(pid, name, rss, fds, n)


def sample_tree(pid: int, t_s: float, calls_done: int, turns: int) -> Sample | None:
    main = sample_process(pid, "main")
    if main is None:
        return None
    kids = [sample_process(c, command_name(c)) for c in children(pid)]
    return Sample(t_s, main, tuple(k for k in kids if k is not None), calls_done, turns)


def slope_per_5min(points: Sequence[tuple[float, float]]) -> float | None:
    """Least-squares slope of (seconds, value) points, per 5 minutes; None: fewer than 2
    points or all at one time."""
    if len(points) < 2:
        return None
    n = len(points)
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    den = sum((t - mt) ** 2 for t, _ in points)
    if den == 0:
        return None
    return sum((t - mt) * (v - mv) for t, v in points) / den * 300.0


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q`` (0-100) percentile, linear between the nearest ranks; None: no values."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass
class CallerStats:
    placed: int = 0
    not_ended: int = 0
    problems: list[str] = field(default_factory=list)


async def keep_calling(
    exe: str,
    uri: str,
    *,
    slot: int,
    scripts: Sequence[Script],
    sip_port: int,
    workdir: Path,
    rtp_ports: range,
    until: float,
    stats: CallerStats,
    on_call_end: Callable[[], None] = lambda: None,
    codec: str = "PCMU",
) -> None:
    """One caller slot: a call with the next of ``scripts``, and another as soon as it
    ends, until ``time.monotonic()`` passes ``until`` (a call under way is let finish).

    Each call is a baresip process of its own, on the slot's SIP port."""
    rng = random.Random(slot)
    for n in itertools.count():
        if time.monotonic() >= until:
            return
        script = scripts[(slot + n) % len(scripts)]
        caller = Caller(concurrency=0, index=slot, sip_port=sip_port, script=script)
        folder = workdir / f"slot{slot}"
        prepare_caller(caller, folder, rtp_ports, codec)
        stats.placed += 1
        problem = await run_caller(exe, uri, caller, folder)
        on_call_end()
        if problem is not None:
            stats.not_ended += 1
            stats.problems.append(problem[-400:])
            print(f"slot {slot}: a call did not end:\n{problem[-400:]}", file=sys.stderr)
        await asyncio.sleep(rng.uniform(0.2, 1.5))  # callers do not all redial at once
