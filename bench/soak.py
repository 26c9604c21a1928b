"""Memory of a bot node under calls, kept up for a long time: does it stay flat?

    .venv/bin/python -m bench.soak --calls 8 --minutes 30 [--write docs/benchmarks.md]

Starts a bot node (``switchboard run``, every model loaded) and keeps ``--calls`` baresip
callers on it: each caller asks ``--turns`` questions (intent paraphrases and open
questions, in flite voices, so that ASR, the intent lookup, the LLM and TTS all run), hangs
up when its script ends, and calls again, until ``--minutes`` have passed. Every
``--sample`` seconds it prints the RSS, open file descriptors and threads of the node's
main process and of each child (the SIP workers), and at the end:

- the main process's RSS at the end of the warm-up (``--warmup`` minutes) and at the end,
  and its least-squares slope after the warm-up, in MB per 5 minutes (each child's too);
- P50/P95 of each turn's voice-to-voice time as the node logs it (end of the caller's
  speech to the answer's first audio out), from the node's ``turn`` log lines.

``--trace DIR`` runs the node's main process under ``testkit.memtrace``: a report in DIR
every ``--trace-every`` seconds of the allocation sites and object types that grew since
the first report after the warm-up (tracemalloc slows the node: figures taken with it are
not the node's). ``--env KEY=VALUE`` sets more of the node's environment.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import itertools
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bot.profile import DEFAULT_PROFILE
from testkit.botproc import ROOT, BotProcess, run_bot
from testkit.memtrace import ENV_BASELINE, ENV_DIR, ENV_EVERY, SITE_DIR
from testkit.ports import free_udp_port
from testkit.question_script import Script, build_script, plan_questions
from testkit.soak import (
    CallerStats,
    Sample,
    keep_calling,
    percentile,
    sample_tree,
    slope_per_5min,
)
from testkit.voices import FLITE_VOICES


def build_scripts(count: int, turns: int, lead_s: float, answer_window_s: float) -> list[Script]:
    """``count`` different calls' scripts, questions of both routes, voices in turn."""
    voices = itertools.cycle(FLITE_VOICES)
    return [
        build_script(
            plan_questions("both", turns, i),
            next(voices),
            lead_s=lead_s,
            answer_window_s=answer_window_s,
        )
        for i in range(count)
    ]


def v2v_ms(bot: BotProcess, since: int) -> tuple[list[float], int]:
    """Voice-to-voice of each turn logged from line ``since`` on, and the next line."""
    end = len(bot.lines)
    out = []
    for rec in bot.records("turn", since):
        ms = (rec.get("stages_ms") or {}).get("first_audio_out")
        if ms is not None and not rec.get("barge_in"):
            out.append(float(ms))
    return out, end


def format_sample(s: Sample) -> str:
    kids = " ".join(
        f"{k.name.rsplit('.', 1)[-1]}[{k.pid}] {k.rss_kib / 1024:.0f}MB/{k.fds}fd"
        for k in s.children
    )
    return (
        f"t={s.t_s / 60:5.1f}min main {s.main.rss_kib / 1024:7.1f}MB {s.main.fds}fd "
        f"{s.main.threads}thr | calls {s.calls_done} turns {s.turns} | {kids}"
    )


async def soak(args: argparse.Namespace) -> tuple[list[Sample], list[float], CallerStats]:
    exe = shutil.which("baresip")
    if exe is None:
        raise SystemExit("baresip is not installed (apt-get install baresip-core)")
    scripts = build_scripts(
        max(12, args.calls), args.turns, lead_s=args.lead, answer_window_s=args.answer_window
    )
    salt = os.getpid()
    bot_rtp = 20000 + (salt % 20) * 1000
    caller_rtp = range(10000 + (salt % 10) * 1000, 10000 + (salt % 10) * 1000 + 1000)
    env = {
        "SWITCHBOARD_SIP__MAX_CALLS": str(2 * args.calls),
        "SWITCHBOARD_SIP__RTP_PORT_START": str(bot_rtp),
        "SWITCHBOARD_SIP__RTP_PORT_RANGE": "1000",
        # Intents are matched as configured, but a transfer or a hang-up would end a call
        # before its script: the bot answers and records the action instead.
        "SWITCHBOARD_CALL_ACTIONS": "false",
    }
    if args.trace is not None:
        args.trace.mkdir(parents=True, exist_ok=True)
        (args.trace / "go").unlink(missing_ok=True)
        env[ENV_DIR] = str(args.trace.resolve())
        env[ENV_EVERY] = str(args.trace_every)
        env[ENV_BASELINE] = str(args.warmup * 60)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(SITE_DIR), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
        )
    for item in args.env:
        key, _, value = item.partition("=")
        env[key] = value
    samples: list[Sample] = []
    latencies: list[tuple[float, float]] = []  # (since the calls began, v2v ms)
    stats = CallerStats()
    calls_done = 0

    def ended() -> None:
        nonlocal calls_done
        calls_done += 1

    profile = Path(os.environ.get("SWITCHBOARD_PROFILE") or DEFAULT_PROFILE)
    with (
        tempfile.TemporaryDirectory(prefix="switchboard-soak-") as tmp,
        run_bot(env=env, profile=profile, timeout_s=args.start_timeout) as bot,
    ):
        work = Path(tmp)
        if args.trace is not None:
            (args.trace / "go").touch()
        started = time.monotonic()
        until = started + args.minutes * 60
        print(f"node ready; {args.calls} callers for {args.minutes:g} min", file=sys.stderr)
        callers = [
            asyncio.ensure_future(
                keep_calling(
                    exe,
                    bot.uri,
                    slot=slot,
                    scripts=scripts,
                    sip_port=free_udp_port(),
                    workdir=work,
                    rtp_ports=caller_rtp,
                    until=until,
                    stats=stats,
                    on_call_end=ended,
                )
            )
            for slot in range(args.calls)
        ]
        line = 0
        next_at = started
        while True:
            now = time.monotonic()
            if now >= next_at:
                got, line = v2v_ms(bot, line)
                latencies += [(now - started, ms) for ms in got]
                turns = len(latencies)
                s = sample_tree(bot.proc.pid, now - started, calls_done, turns)
                if s is None:
                    raise SystemExit("the node has exited")
                samples.append(s)
                print(format_sample(s), flush=True)
                next_at += args.sample
            if all(c.done() for c in callers):
                break
            await asyncio.sleep(min(1.0, max(0.0, next_at - time.monotonic())))
        for c in callers:
            c.result()  # a caller's failure is the run's
        got, line = v2v_ms(bot, line)
        now = time.monotonic()
        latencies += [(now - started, ms) for ms in got]
        s = sample_tree(bot.proc.pid, now - started, calls_done, len(latencies))
        if s is not None:
            samples.append(s)
            print(format_sample(s), flush=True)
    warm = args.warmup * 60
    after = [ms for t, ms in latencies if t >= warm]
    return samples, after, stats


def summary(
    args: argparse.Namespace, samples: Sequence[Sample], v2v: Sequence[float], stats: CallerStats
) -> str:
    warm = args.warmup * 60
    steady = [s for s in samples if s.t_s >= warm] or list(samples[-2:])
    first, last = steady[0], steady[-1]
    slope = slope_per_5min([(s.t_s, s.main.rss_kib / 1024) for s in steady])
    fresh = samples[0].main.rss_kib / 1024
    rows = [
        f"### Memory under calls: a soak ({dt.date.today().isoformat()})",
        "",
        f"Command: `python -m bench.soak {' '.join(sys.argv[1:])}`  ",
        f"{args.calls} concurrent calls for {args.minutes:g} min, {args.turns} questions a call "
        f"(both routes), a new call as each ends: {stats.placed} calls placed "
        f"({stats.not_ended} did not end cleanly), {len(v2v)} answered turns after the "
        f"{args.warmup:g}-minute warm-up. RSS sampled every {args.sample:g} s.",
        "",
        "| process | RSS at first call, MB | after warm-up | at end | slope after warm-up, "
        "MB / 5 min | fds after warm-up -> end |",
        "|---|---|---|---|---|---|",
        f"| main | {fresh:.0f} | {first.main.rss_kib / 1024:.0f} | "
        f"{last.main.rss_kib / 1024:.0f} | {_fmt(slope)} | {first.main.fds} -> "
        f"{last.main.fds} |",
    ]
    for kid in last.children:
        series = [(s.t_s, c.rss_kib / 1024) for s in steady for c in s.children if c.pid == kid.pid]
        at_start = next((c for c in first.children if c.pid == kid.pid), None)
        start_fds = at_start.fds if at_start is not None else "-"
        start_rss = f"{at_start.rss_kib / 1024:.0f}" if at_start is not None else "-"
        born = next((c for c in samples[0].children if c.pid == kid.pid), None)
        born_rss = f"{born.rss_kib / 1024:.0f}" if born is not None else "-"
        rows.append(
            f"| {kid.name} {kid.pid} | {born_rss} | {start_rss} | {kid.rss_kib / 1024:.0f} | "
            f"{_fmt(slope_per_5min(series))} | {start_fds} -> {kid.fds} |"
        )
    p50, p95 = percentile(v2v, 50), percentile(v2v, 95)
    rows += [
        "",
        f"Voice-to-voice after the warm-up (the node's own measure, end of speech to first "
        f"audio out): P50 {_fmt(p50, 0)} ms, P95 {_fmt(p95, 0)} ms.",
        "",
    ]
    return "\n".join(rows)


def _fmt(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:+.{digits}f}" if digits else f"{x:.0f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=4, help="concurrent calls")
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--warmup", type=float, default=5.0, help="minutes left out")
    parser.add_argument("--sample", type=float, default=30.0, help="seconds between samples")
    parser.add_argument("--turns", type=int, default=3, help="questions a call")
    parser.add_argument("--lead", type=float, default=5.0, help="seconds before the first")
    parser.add_argument("--answer-window", type=float, default=10.0)
    parser.add_argument("--trace", type=Path, help="memtrace reports of the main process")
    parser.add_argument("--trace-every", type=float, default=60.0)
    parser.add_argument(
        "--start-timeout", type=float, default=600.0, help="seconds the node may take to start"
    )
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--write", type=Path, help="append the summary to this file")
    args = parser.parse_args()
    samples, v2v, stats = asyncio.run(soak(args))
    text = summary(args, samples, v2v, stats)
    print(text)
    if args.write:
        with args.write.open("a", encoding="utf-8") as out:
            out.write("\n" + text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
