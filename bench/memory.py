"""Memory of a bot node: idle with every model loaded, and what each concurrent call adds.

    .venv/bin/python -m bench.memory --calls 5 [--write docs/benchmarks.md]

Sums the bot process and its children (SIP worker processes). RSS counts shared library
pages once per process; PSS splits them fairly, so the PSS total is the honest node figure.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import sys
from pathlib import Path

from telephony.dialer import dial
from testkit.botproc import run_bot
from testkit.voices import speak


def tree(pid: int) -> list[int]:
    """``pid`` and all its descendants."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*/children"):
            todo += [int(c) for c in task.read_text().split()]
    return out


def memory_kib(pid: int) -> tuple[int, int]:
    """(RSS, PSS) in KiB summed over the process tree."""
    rss = pss = 0
    for p in tree(pid):
        try:
            text = Path(f"/proc/{p}/smaps_rollup").read_text()
        except OSError:
            continue
        for line in text.splitlines():
            key, _, value = line.partition(":")
            if key == "Rss":
                rss += int(value.split()[0])
            elif key == "Pss":
                pss += int(value.split()[0])
    return rss, pss


async def measure(calls: int, hold_s: float) -> tuple[tuple[int, int], tuple[int, int]]:
    with run_bot() as bot:
        await asyncio.sleep(3)
        idle = memory_kib(bot.proc.pid)
        utterance = speak("Hello, I am just holding the line for a moment.")
        dials = [
            dial(bot.uri, play=utterance, play_at_s=3.0, record_seconds=hold_s)
            for _ in range(calls)
        ]
        task = asyncio.gather(*dials)
        await asyncio.sleep(hold_s * 0.7)
        busy = memory_kib(bot.proc.pid)
        results = await task
        answered = sum(r.sip_final_status == 200 for r in results)
        if answered != calls:
            print(f"only {answered} of {calls} calls were answered", file=sys.stderr)
        return idle, busy


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--hold", type=float, default=14.0, help="seconds each call lasts")
    parser.add_argument("--write", type=Path)
    args = parser.parse_args()
    (idle_rss, idle_pss), (busy_rss, busy_pss) = asyncio.run(measure(args.calls, args.hold))
    per_call_rss = (busy_rss - idle_rss) / args.calls / 1024
    per_call_pss = (busy_pss - idle_pss) / args.calls / 1024
    text = "\n".join(
        [
            f"### Memory of a bot node ({dt.date.today().isoformat()})",
            "",
            f"Command: `python -m bench.memory {' '.join(sys.argv[1:])}`  ",
            "Embedded defaults, every model loaded and warmed; bot process and its children.",
            "",
            "| | RSS MiB | PSS MiB |",
            "|---|---|---|",
            f"| idle | {idle_rss / 1024:.0f} | {idle_pss / 1024:.0f} |",
            f"| {args.calls} calls in progress | {busy_rss / 1024:.0f} | {busy_pss / 1024:.0f} |",
            f"| added per call | {per_call_rss:.1f} | {per_call_pss:.1f} |",
            "",
        ]
    )
    print(text)
    if args.write:
        with args.write.open("a", encoding="utf-8") as out:
            out.write("\n" + text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
