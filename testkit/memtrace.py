"""Where a process's memory goes over time: tracemalloc snapshots diffed against a first one,
Python objects counted by type, and glibc's heap, written as text reports to a folder.

A benchmark turns it on in a node it starts (``testkit.soak``): the environment variable
``MEMTRACE_DIR`` names the folder, and ``testkit/memtrace_site`` on ``PYTHONPATH``
holds a ``sitecustomize`` that calls ``start_from_env`` as the interpreter starts. The
variable is taken out of the environment at once, so the node's worker processes do not
trace themselves. Nothing in the product imports this.

Tracing starts when a file named ``go`` appears in the folder (the benchmark writes it once
the node is ready: the models' loading is not traced, and not slowed). Then every
``MEMTRACE_EVERY_S`` seconds (default 60) the tracer writes
``report-NNN.txt``: RSS, what tracemalloc traces, glibc's heap (``mallinfo2``), the
allocation sites that grew most since the baseline (the first report after
``MEMTRACE_BASELINE_S`` after ``go``, default 120 s), by line and by traceback, and the
object types whose count grew most.
"""

from __future__ import annotations

import collections
import ctypes
import ctypes.util
import gc
import os
import threading
import time
import tracemalloc
from pathlib import Path

ENV_DIR = "MEMTRACE_DIR"
ENV_EVERY = "MEMTRACE_EVERY_S"
ENV_BASELINE = "MEMTRACE_BASELINE_S"
ENV_FRAMES = "MEMTRACE_FRAMES"
#: This folder, for ``PYTHONPATH``: its ``sitecustomize`` starts the tracer.
SITE_DIR = Path(__file__).resolve().parent / "memtrace_site"


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def mallinfo() -> dict[str, int]:
    """glibc's heap: ``arena`` (bytes from sbrk and arenas), ``hblkhd`` (mmapped blocks),
    ``uordblks`` (in use), ``fordblks`` (free but kept); empty where not glibc."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        fn = libc.mallinfo2
    except (OSError, AttributeError, TypeError):
        return {}
    fn.restype = _MallInfo2
    info = fn()
    return {f[0]: int(getattr(info, f[0])) for f in _MallInfo2._fields_}


def rss_kib(pid: int | str = "self") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def type_counts() -> collections.Counter[str]:
    """Live objects the collector tracks, by type name."""
    return collections.Counter(type(o).__qualname__ for o in gc.get_objects())


class Tracer:
    """Writes a report every ``every_s`` seconds to ``folder`` from a daemon thread."""

    def __init__(self, folder: Path, *, every_s: float, baseline_s: float, frames: int) -> None:
        self.folder = folder
        self.frames = frames
        self.every_s = every_s
        self.baseline_s = baseline_s
        self.started = time.monotonic()
        self.baseline: tracemalloc.Snapshot | None = None
        self.baseline_types: collections.Counter[str] = collections.Counter()
        self.baseline_rss = 0
        self.count = 0

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        threading.Thread(target=self._run, name="memtrace", daemon=True).start()

    def _run(self) -> None:
        while not (self.folder / "go").exists():
            time.sleep(0.5)
        tracemalloc.start(self.frames)
        self.started = time.monotonic()
        while True:
            time.sleep(self.every_s)
            try:
                self.report()
            except Exception as exc:  # a report that fails must not end the process
                (self.folder / "error.txt").write_text(repr(exc))

    def _filtered(self) -> tracemalloc.Snapshot:
        return tracemalloc.take_snapshot().filter_traces(
            (
                tracemalloc.Filter(False, tracemalloc.__file__),
                tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
                tracemalloc.Filter(False, __file__),
            )
        )

    def report(self) -> None:
        gc.collect()
        snap = self._filtered()
        types = type_counts()
        rss = rss_kib()
        elapsed = time.monotonic() - self.started
        traced, peak = tracemalloc.get_traced_memory()
        lines = [
            f"t={elapsed:.0f}s rss={rss / 1024:.1f}MiB traced={traced / 2**20:.1f}MiB "
            f"peak={peak / 2**20:.1f}MiB",
            "mallinfo2 " + " ".join(f"{k}={v / 2**20:.1f}MiB" for k, v in mallinfo().items()),
            f"objects={sum(types.values())} frozen={gc.get_freeze_count()} "
            f"gc_counts={gc.get_count()} collections="
            + "/".join(str(g["collections"]) for g in gc.get_stats()),
        ]
        if self.baseline is None and elapsed >= self.baseline_s:
            self.baseline, self.baseline_types, self.baseline_rss = snap, types, rss
            lines.append("baseline taken")
        elif self.baseline is not None:
            lines.append(f"since baseline: rss {(rss - self.baseline_rss) / 1024:+.1f} MiB")
            lines.append("")
            lines.append("-- top growth by line")
            for stat in snap.compare_to(self.baseline, "lineno")[:40]:
                lines.append(str(stat))
            lines.append("")
            lines.append("-- top growth by traceback")
            for stat in snap.compare_to(self.baseline, "traceback")[:12]:
                lines.append(f"{stat.size_diff / 1024:+.1f} KiB, {stat.count_diff:+d} blocks")
                lines.extend("    " + row for row in stat.traceback.format(limit=12))
            lines.append("")
            lines.append("-- object types whose count grew")
            grown = {k: types[k] - self.baseline_types.get(k, 0) for k in types}
            for name, diff in sorted(grown.items(), key=lambda kv: -kv[1])[:40]:
                if diff > 0:
                    lines.append(f"{diff:+8d} {name} (now {types[name]})")
        self.count += 1
        (self.folder / f"report-{self.count:03d}.txt").write_text("\n".join(lines) + "\n")


def start_from_env() -> Tracer | None:
    """Start tracing if ``MEMTRACE_DIR`` names a folder (and take it out of the
    environment, so that child processes do not trace)."""
    folder = os.environ.pop(ENV_DIR, None)
    if not folder:
        return None
    tracer = Tracer(
        Path(folder),
        every_s=float(os.environ.get(ENV_EVERY, "60")),
        baseline_s=float(os.environ.get(ENV_BASELINE, "120")),
        frames=int(os.environ.get(ENV_FRAMES, "12")),
    )
    tracer.start()
    return tracer
