"""Voice-to-voice latency on the wire: real SIP clients, measured from the packets.

Starts a bot node (``switchboard run``) on a free loopback port and captures the loopback
interface (raw socket: needs root). For each concurrency level it runs that many baresip
callers at once; each plays a script: silence while the greeting plays, then questions, each
followed by silence long enough for the answer. From the captured SIP and RTP:

- greeting delay: the 200 OK to the INVITE, to the bot's first voiced RTP packet;
- voice-to-voice per turn: the caller's last voiced RTP packet of a scripted question, to the
  bot's first voiced RTP packet after it (the arrival time of each packet on the loopback);
- late packets: the bot's RTP packets that arrived more than 40 ms after the one before on
  the 20 ms stream (consecutive sequence numbers and timestamps);
- dropped calls: not answered, a question left unanswered, or hung up before the script ended.

Each turn's route (intent cache or LLM) and the bot's own stage times come from the bot's
call log (SQLite in its data folder), joined to the wire by SIP Call-ID and turn order.

    .venv/bin/python -m bench.v2v_wire --concurrency 1,5,10,20 --turns-per-call 3 \\
        --route both [--write]

``--write`` writes ``docs/latency.md`` and ``docs/latency.png`` (needs matplotlib).
``--cpu-limit 1`` runs it all on one core's worth of CPU (``testkit/cpu_limit.py``).

This module is the command; the run, its evaluation and its report are testkit's
(``testkit/v2v_run.py``, ``v2v_results.py`` and ``v2v_report.py``), where the tests check them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import pickle
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from testkit.baresip import Caller
from testkit.botproc import ROOT
from testkit.calllog_reader import LoggedCall, LogTurn
from testkit.cpu_limit import CpuLimitUnavailable, cpu_limit
from testkit.question_script import Script, ScriptTurn
from testkit.rtp_capture import Packet
from testkit.v2v_report import bench_command, report, write_docs
from testkit.v2v_results import Results, evaluate
from testkit.v2v_run import CaptureDenied, Collected, collect

#: Where the classes of a file saved by --save live now: files saved before they moved to
#: testkit name this command's module (and bench.rtp_capture) instead.
_MOVED: dict[tuple[str, str], type] = {
    ("bench.rtp_capture", "Packet"): Packet,
    **{
        ("bench.v2v_wire", cls.__name__): cls
        for cls in (Collected, Caller, Script, ScriptTurn, LoggedCall, LogTurn)
    },
}


class _SavedRun(pickle.Unpickler):
    """Reads a file written by --save, whichever version of the benchmark wrote it."""

    def find_class(self, module: str, name: str, /) -> Any:
        return _MOVED.get((module, name)) or super().find_class(module, name)


def print_calls(res: Results) -> None:
    for c in res.calls:
        turns = [t for t in res.turns if t.call == c.call]
        parts = [
            f"{t.route}:{t.v2v_ms:.0f}" if t.v2v_ms is not None else f"{t.route}:-" for t in turns
        ]
        greeting = f"{c.greeting_ms:.0f}" if c.greeting_ms is not None else "-"
        print(
            f"c={c.concurrency:2d} call {c.call:3d} ({c.voice:5s}) greeting {greeting} ms, "
            f"v2v {' '.join(parts)}, late {c.late_packets}"
            + (f", DROPPED: {c.why}" if c.dropped else ""),
            file=sys.stderr,
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--concurrency", default="1,5,10,20", help="levels, comma separated")
    parser.add_argument("--turns-per-call", type=int, default=3)
    parser.add_argument("--route", choices=("cache", "llm", "both"), default="both")
    parser.add_argument("--lead", type=float, default=5.0, help="s of silence for the greeting")
    parser.add_argument(
        "--answer-window", type=float, default=12.0, help="s of silence after each question"
    )
    parser.add_argument(
        "--stagger", type=float, default=0.25, help="s between call starts in a level"
    )
    parser.add_argument(
        "--think-jitter",
        type=float,
        default=0.0,
        help="up to this many s more silence after each question (random, seeded per caller):"
        " calls drift apart instead of every caller finishing a question at the same moment",
    )
    parser.add_argument(
        "--queue",
        metavar="ACTIVE,WAITING",
        help="turn the node's call queue on: conversations at once, places in line",
    )
    parser.add_argument(
        "--queue-lead",
        type=float,
        default=0.0,
        help="s more silence before the questions of each wave of callers a level puts in"
        " line (about one call's length: the wave before hangs up by then)",
    )
    parser.add_argument("--codec", choices=("PCMU", "PCMA"), default="PCMU")
    parser.add_argument(
        "--cpu-limit",
        type=float,
        metavar="CORES",
        help="run the bot and its callers on this many cores' worth of CPU (a cgroup quota,"
        " needs root): how much headroom a result has, whatever the machine's speed that day",
    )
    parser.add_argument(
        "--profile", type=Path, help="bot profile (default: $SWITCHBOARD_PROFILE or the default)"
    )
    parser.add_argument(
        "--write", action="store_true", help="write docs/latency.md and docs/latency.png"
    )
    parser.add_argument("--save", type=Path, help="keep the packets and call log in this file")
    parser.add_argument(
        "--analyze", type=Path, help="evaluate a file written by --save instead of running"
    )
    args = parser.parse_args(argv)
    levels = [int(x) for x in args.concurrency.split(",") if x.strip()]
    queue = None
    if args.queue:
        try:
            active, waiting = (int(x) for x in args.queue.split(","))
        except ValueError:
            parser.error("--queue takes ACTIVE,WAITING, e.g. --queue 4,16")
        queue = (active, waiting)
    try:
        if args.analyze is not None:
            with args.analyze.open("rb") as saved:
                run = _SavedRun(saved).load()  # a file this command wrote
            if not isinstance(run, Collected):
                raise SystemExit(f"{args.analyze}: not a file written by --save")
        else:
            limited = args.cpu_limit is not None
            with cpu_limit(args.cpu_limit) if limited else contextlib.nullcontext():
                run = asyncio.run(
                    collect(
                        levels,
                        args.turns_per_call,
                        args.route,
                        lead_s=args.lead,
                        answer_window_s=args.answer_window,
                        stagger_s=args.stagger,
                        think_jitter_s=args.think_jitter,
                        codec=args.codec,
                        profile=args.profile,
                        queue=queue,
                        queue_lead_s=args.queue_lead,
                    )
                )
    except CpuLimitUnavailable as exc:
        print(f"cannot limit the benchmark's CPU: {exc}", file=sys.stderr)
        return 2
    except CaptureDenied as exc:
        print(
            f"cannot capture packets on the loopback interface: {exc}\n"
            "a raw AF_PACKET socket needs root (or CAP_NET_RAW): run the benchmark as root",
            file=sys.stderr,
        )
        return 2
    if not run.command:
        run.command = bench_command(sys.argv[1:] if argv is None else argv)
    if args.save is not None:
        with args.save.open("wb") as out:
            pickle.dump(run, out)
    res = evaluate(run)
    command = run.command
    print_calls(res)
    print(report(res, command))
    if args.write:
        write_docs(res, command, ROOT / "docs" / "latency.md", ROOT / "docs" / "latency.png")
        print("wrote docs/latency.md and docs/latency.png", file=sys.stderr)
    measured = any(t.v2v_ms is not None for t in res.turns)
    return 0 if measured else 1


if __name__ == "__main__":
    raise SystemExit(main())
