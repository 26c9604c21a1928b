"""Speed under load with the route mix a real line has, measured on the wire.

Starts a bot node (``switchboard run``, the default profile) on a free loopback port,
captures the loopback interface (raw socket: needs root), and for each level of ``--calls``
places that many calls at once with the project's SIP dialer (``telephony.dialer``: pjsua2,
RFC 4733 keys). Each caller asks the mix of ``testkit.load_mix.PLAN``, rotated per caller:
two cached intents, a knowledge entry, a question the bot answers with a question ("Just to
check, ...?"), one nobody covers ("not sure"), small talk, and the main menu's key 3. From
the capture:

- voice-to-voice per step: the caller's last voiced RTP packet (a key: its last RFC 4733
  event packet) to the bot's first voiced packet after it, as they arrived on loopback;
- each step's route is the one the node logged for the turn (its call log, joined by SIP
  Call-ID and time), not the one the plan meant: a misrouted turn is counted under the
  route it took, and listed;
- the end-of-turn decision: the call log's speech end to ``eot_decided`` of each turn, and
  its share of the wire's voice-to-voice;
- CPU and RSS of the node's main process and its SIP workers over each level, per call.

    .venv/bin/python -m bench.load_mix --calls 1,8,16

``--cpu-limit CORES`` runs the node and its callers on that many cores' worth of CPU (a
cgroup quota, ``testkit/cpu_limit.py``): a slower node on any machine.
``--tier ADDRESS`` runs the node's models on a Ray Serve tier at ADDRESS
(``SWITCHBOARD_TIER__BACKEND=ray``, ``SWITCHBOARD_TIER__ADDRESS``; docs/scaling.md): the
same mix against GPU backends. Only loopback SIP and RTP; each level is bounded by its
calls' scripts (about 100 s) and the dialer's own time limit. ``--turns FILE`` keeps the
node's turn records (JSON lines): why each turn ended when it did, what the pause's pass
heard and found. ``--queue N`` runs the node with its call queue at ``N`` conversations (and
room in line for every other caller) and its adaptive limit as configured
(``SWITCHBOARD_QUEUE__ADAPTIVE``, on by default: ``bot.queue.limit``): each level then also
prints how the limit moved and how many callers were answered; a caller kept in line hears
the hold message through its script: its steps said before it got the bot (the call log's
``dequeued`` time) are counted as "in line", apart from the answered routes and the
overall row.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import functools
import itertools
import json
import math
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bot.profile import DEFAULT_PROFILE
from telephony.dialer import DialGate, DialResult, dial
from testkit.botproc import run_bot
from testkit.calllog_reader import LoggedCall, read_call_log
from testkit.cpu_limit import CpuLimitUnavailable, cpu_limit
from testkit.load_mix import (
    IN_LINE,
    CallPlan,
    LevelResult,
    StepResult,
    Usage,
    by_route,
    eot_share,
    join_steps,
    key_times,
    misrouted,
    node_processes,
    plan_call,
    route_label,
    steps_on_wire,
    summarize,
    tree_cpu,
    tree_rss_mb,
)
from testkit.ports import free_udp_port
from testkit.question_script import voiced_bounds
from testkit.rtp_capture import Capture, Packet, PortFilter
from testkit.soak import percentile
from testkit.voices import FLITE_VOICES, speak
from testkit.wire_calls import calls_on_wire

MAX_CALLS = 32
#: Seconds the node's CPU is measured with no call, before the first level.
IDLE_S = 10.0


class CaptureDenied(RuntimeError):
    """The raw socket could not be opened (not root)."""


async def _place(uri: str, plan: CallPlan, sip_port: int, gate: DialGate) -> DialResult | str:
    try:
        return await dial(
            uri,
            script=list(plan.audio),
            dtmf=list(plan.keys),
            record_seconds=plan.seconds,
            local_port=sip_port,
            codecs=("PCMU",),
            gate=gate,
        )
    except RuntimeError as exc:
        return str(exc)[-300:]


async def _sample_rss(pid: int, peak: dict[str, float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        now = tree_rss_mb(node_processes(pid))
        if sum(now.values()) > sum(peak.values()):
            peak.clear()
            peak.update(now)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 1.0)


async def run_level(
    uri: str, pid: int, plans: Sequence[CallPlan], *, stagger_s: float, capture: Capture
) -> tuple[list[tuple[CallPlan, int, DialResult | str]], Usage]:
    """Every plan's call at once (started ``stagger_s`` apart once all dialers are up)."""
    ports = [free_udp_port() for _ in plans]
    for port in ports:
        capture.filter.add(port)
    gates = [DialGate() for _ in plans]
    tasks = [
        asyncio.create_task(_place(uri, plan, port, gate))
        for plan, port, gate in zip(plans, ports, gates, strict=True)
    ]
    await asyncio.wait_for(asyncio.gather(*(g.ready.wait() for g in gates)), 120)
    procs = node_processes(pid)
    idle = tree_rss_mb(procs)
    cpu_before = tree_cpu(procs)
    peak: dict[str, float] = dict(idle)
    stop = asyncio.Event()
    sampler = asyncio.create_task(_sample_rss(pid, peak, stop))
    started = time.monotonic()
    for k, gate in enumerate(gates):
        if k:
            await asyncio.sleep(stagger_s)
        gate.go.set()
    results = await asyncio.gather(*tasks)
    seconds = time.monotonic() - started
    stop.set()
    await sampler
    procs = {**procs, **node_processes(pid)}
    cpu_after = tree_cpu(procs)
    cpu = sum(cpu_after[p] - cpu_before.get(p, 0.0) for p in cpu_after)
    usage = Usage(
        seconds=seconds,
        cpu_s=cpu,
        rss_idle_mb=sum(idle.values()),
        rss_peak_mb=sum(peak.values()),
        by_process=dict(peak),
    )
    return list(zip(plans, ports, results, strict=True)), usage


def evaluate(
    level: int,
    *,
    placed: Sequence[tuple[CallPlan, int, DialResult | str]],
    usage: Usage,
    packets: Sequence[Packet],
    bot_port: int,
    log: dict[str, LoggedCall],
    wall_offset: float,
) -> LevelResult:
    result = LevelResult(calls=level, usage=usage)
    wire = calls_on_wire(packets, bot_port)
    by_port = {c.caller_sip[1]: c for c in wire.values()}

    def to_capture(wall: float) -> float:
        return wall - wall_offset

    for plan, port, outcome in placed:
        call = by_port.get(port)
        if isinstance(outcome, str) or outcome.sip_final_status != 200 or call is None:
            why = outcome if isinstance(outcome, str) else outcome.error or "not answered"
            result.failed_calls.append(f"caller {plan.index}: {why}")
            continue
        if call.bye_by_bot:
            result.failed_calls.append(f"caller {plan.index}: the bot hung up")
        keys = key_times(packets, call)
        steps = steps_on_wire(call, plan, keys)
        if plan.keys and not keys:
            print(f"caller {plan.index}: no keypad event on the wire", file=sys.stderr)
        logged = log.get(call.call_id, LoggedCall())
        if logged.queue_wait_s is not None:
            result.queue_waits_s.append(logged.queue_wait_s)
        joined = join_steps(steps, logged.turns, to_capture)
        got_bot = -math.inf if logged.dequeued_at is None else to_capture(logged.dequeued_at)
        for step, on_wire, turn in zip(plan.steps, steps, joined, strict=True):
            in_line = on_wire.start is not None and on_wire.start < got_bot
            stages = turn.stages if turn is not None else {}
            eot = bot = None
            # A key ends its turn as it is pressed: no end-of-turn decision to count.
            if not step.keyed and "speech_end" in stages and "eot_decided" in stages:
                eot = (stages["eot_decided"] - stages["speech_end"]) * 1000.0
            if "speech_end" in stages and "first_audio_out" in stages:
                bot = (stages["first_audio_out"] - stages["speech_end"]) * 1000.0
            result.steps.append(
                StepResult(
                    calls=level,
                    caller=plan.index,
                    planned=step.kind,
                    route=route_label(turn, in_line=in_line),
                    v2v_ms=on_wire.v2v_ms,
                    eot_ms=eot,
                    bot_ms=bot,
                    heard=turn.transcript if turn is not None else None,
                    said=step.text,
                )
            )
    return result


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def report(levels: Sequence[LevelResult], header: str) -> str:
    lines = [header, ""]
    lines.append(
        "| calls | route | n | P50 ms | P95 ms | max ms | no answer | eot P50 / P95 ms "
        "| eot share |"
    )
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for lv in levels:
        # A step said in line is no turn of the bot's: its own row, not in the overall one.
        groups = {
            **by_route(lv.steps),
            "**all**": [s for s in lv.steps if s.route != IN_LINE],
        }
        for route, steps in groups.items():
            v2v = [s.v2v_ms for s in steps if s.v2v_ms is not None]
            n, p50, p95, top = summarize(v2v)
            _, e50, e95, _ = summarize([s.eot_ms for s in steps if s.eot_ms is not None])
            share = eot_share(steps)
            lines.append(
                f"| {lv.calls} | {route} | {n} | {_ms(p50)} | {_ms(p95)} | {_ms(top)} | "
                f"{len(steps) - n} | {_ms(e50)} / {_ms(e95)} | "
                f"{'-' if share is None else f'{share:.0%}'} |"
            )
    lines += [
        "",
        "| calls | s | CPU, % of a core | per call | RSS before -> peak MB | MB per call |",
        "|---|---|---|---|---|---|",
    ]
    for lv in levels:
        u = lv.usage
        cpu = 100.0 * u.cpu_s / u.seconds if u.seconds else 0.0
        per_call_mb = (u.rss_peak_mb - u.rss_idle_mb) / lv.calls
        lines.append(
            f"| {lv.calls} | {u.seconds:.0f} | {cpu:.0f} | {cpu / lv.calls:.1f} | "
            f"{u.rss_idle_mb:.0f} -> {u.rss_peak_mb:.0f} | {per_call_mb:.1f} |"
        )
    for lv in levels:
        peaks = ", ".join(f"{k} {v:.0f}" for k, v in sorted(lv.usage.by_process.items()))
        lines.append(f"\n{lv.calls} calls, peak RSS by process (MB): {peaks}")
    if len(levels) > 1:
        a, b = levels[0], levels[-1]
        slope = (b.usage.rss_peak_mb - a.usage.rss_peak_mb) / (b.calls - a.calls or 1)
        lines.append(f"peak RSS per further call, {a.calls} -> {b.calls} calls: {slope:.1f} MB")
    for lv in levels:
        wrong = misrouted(lv.steps)
        if wrong:
            parts = ", ".join(f"{p} -> {r}: {n}" for (p, r), n in wrong.items())
            lines.append(f"{lv.calls} calls, planned -> logged route where they differ: {parts}")
        if lv.failed_calls:
            lines.append(f"{lv.calls} calls, failed: " + "; ".join(lv.failed_calls))
        else:
            lines.append(f"{lv.calls} calls: no call failed")
    return "\n".join(lines)


async def main_async(args: argparse.Namespace, levels: list[int], command: str) -> int:
    salt = os.getpid()
    bot_rtp = range(20000 + (salt % 20) * 1000, 20000 + (salt % 20) * 1000 + 1000)
    voices = itertools.cycle(FLITE_VOICES)
    say = functools.lru_cache(maxsize=None)(speak)
    with tempfile.TemporaryDirectory(prefix="switchboard-load-mix-") as tmp:
        work = Path(tmp)
        env = {
            "SWITCHBOARD_DATA_DIR": str(work / "bot"),
            "SWITCHBOARD_SIP__MAX_CALLS": str(max(*levels, 4)),
            "SWITCHBOARD_SIP__RTP_PORT_START": str(bot_rtp.start),
            "SWITCHBOARD_SIP__RTP_PORT_RANGE": str(len(bot_rtp)),
            # Intents are matched as configured, but a transfer or hang-up would end a call
            # before its script: the bot answers and records the action instead.
            "SWITCHBOARD_CALL_ACTIONS": "false",
        }
        if args.queue is not None:
            env["SWITCHBOARD_QUEUE__MAX_ACTIVE"] = str(args.queue)
            env["SWITCHBOARD_QUEUE__MAX_WAITING"] = str(max(levels))
            env["SWITCHBOARD_QUEUE__MAX_WAIT_S"] = "3600"
            env["SWITCHBOARD_SIP__MAX_CALLS"] = str(args.queue + max(levels))
        if args.tier:
            env["SWITCHBOARD_TIER__BACKEND"] = "ray"
            env["SWITCHBOARD_TIER__ADDRESS"] = args.tier
        capture = Capture(PortFilter([bot_rtp]))
        try:
            capture.start()
        except PermissionError as exc:
            raise CaptureDenied(str(exc)) from exc
        placed: list[tuple[int, list[tuple[CallPlan, int, DialResult | str]], Usage]] = []
        limits: list[tuple[int, list[str]]] = []
        loads: list[tuple[int, tuple[float, float, float]]] = []
        try:
            with run_bot(env=env, profile=args.profile or DEFAULT_PROFILE) as bot:
                capture.filter.add(bot.port)
                # The node with no call: what a call's share of the CPU is measured over.
                procs = node_processes(bot.proc.pid)
                before = tree_cpu(procs)
                await asyncio.sleep(IDLE_S)
                after = tree_cpu(procs)
                idle_cpu = sum(after[p] - before.get(p, 0.0) for p in after) / IDLE_S
                index = itertools.count()
                for level in levels:
                    plans = [
                        await asyncio.to_thread(
                            plan_call,
                            next(index),
                            next(voices),
                            say,
                            voiced_bounds,
                            lead_s=args.lead,
                            answer_window_s=args.answer_window,
                            jitter_s=args.jitter,
                        )
                        for _ in range(level)
                    ]
                    loads.append((level, os.getloadavg()))
                    print(
                        f"{level} calls (load average {os.getloadavg()[0]:.2f})...",
                        file=sys.stderr,
                    )
                    seen = len(bot.lines)
                    calls, usage = await run_level(
                        bot.uri, bot.proc.pid, plans, stagger_s=args.stagger, capture=capture
                    )
                    limits.append((level, _limit_changes(bot.lines[seen:])))
                    placed.append((level, calls, usage))
                    print(f"  done in {usage.seconds:.0f} s", file=sys.stderr)
                    await asyncio.sleep(3.0)  # the last BYEs, the call log's writes
                if args.turns is not None:
                    _keep_turns(bot.lines, args.turns)
        finally:
            capture.stop()
        log = read_call_log(work / "bot" / "switchboard.db")
        packets = capture.packets()
    results = [
        evaluate(
            level,
            placed=calls,
            usage=usage,
            packets=packets,
            bot_port=bot.port,
            log=log,
            wall_offset=capture.wall_offset,
        )
        for level, calls, usage in placed
    ]
    load_text = "; ".join(f"{lv} calls {a:.2f} {b:.2f} {c:.2f}" for lv, (a, b, c) in loads)
    header = (
        f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, `{command}`"
        + (f", tier {args.tier}" if args.tier else ", models in the node")
        + f"\nload average (1, 5, 15 min) as each level started: {load_text}"
        + f"\nthe node with no call: {100.0 * idle_cpu:.1f}% of a core"
    )
    print(report(results, header))
    if args.queue is not None:
        for (level, changes), lv in zip(limits, results, strict=True):
            # A caller in line hears the hold message, which is voiced: only a step the
            # node logged as a turn is the bot's answer.
            answered = len(
                {
                    s.caller
                    for s in lv.steps
                    if s.v2v_ms is not None and s.route not in ("unjoined", IN_LINE)
                }
            )
            moved = "; ".join(changes) if changes else "never moved"
            waits = sorted(lv.queue_waits_s)
            waited = (
                f"{len(waits)} waited in line (P50 {percentile(waits, 50):.1f} s, "
                f"max {waits[-1]:.1f} s)"
                if waits
                else "none waited in line"
            )
            print(
                f"{level} calls, queue of {args.queue}: {answered} callers answered, "
                f"{waited}; conversations at once: {moved}"
            )
    if args.verbose:
        for lv in results:
            for s in lv.steps:
                print(
                    f"c={s.calls} caller {s.caller} {s.planned:10s} -> {s.route:10s} "
                    f"v2v {_ms(s.v2v_ms)} eot {_ms(s.eot_ms)} said {s.said!r} heard {s.heard!r}",
                    file=sys.stderr,
                )
    return 0 if any(s.v2v_ms is not None for lv in results for s in lv.steps) else 1


def _limit_changes(lines: Sequence[str]) -> list[str]:
    """The adaptive limit's moves the node logged (``bot.queue.limit``), as "16 -> 12 (busy:
    ...)"."""
    mark = "conversations at once "
    moves = []
    for line in lines:
        if mark not in line:
            continue
        text = line
        if line.startswith("{"):  # the node's JSON log lines
            with contextlib.suppress(ValueError):
                text = str(json.loads(line).get("msg", line))
        moves.append(text[text.index(mark) + len(mark) :].strip())
    return moves


def _keep_turns(lines: Sequence[str], path: Path) -> None:
    """The node's turn records (``turn`` and ``turn_text``: why each turn ended when it did,
    what each recognizer heard in the pause) as JSON lines in ``path``."""
    kept = [
        line
        for line in lines
        if line.startswith("{") and ('"event": "turn"' in line or '"event": "turn_text"' in line)
    ]
    path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
    print(f"  {len(kept)} turn records in {path}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", default="1,8,16", help="levels, comma separated")
    parser.add_argument("--lead", type=float, default=6.0, help="s of silence for the greeting")
    parser.add_argument(
        "--answer-window", type=float, default=10.0, help="s of silence after each step"
    )
    parser.add_argument(
        "--jitter", type=float, default=2.0, help="up to this many s more after each step"
    )
    parser.add_argument("--stagger", type=float, default=0.3, help="s between call starts")
    parser.add_argument("--profile", type=Path, help="bot profile (default: the default)")
    parser.add_argument(
        "--tier",
        metavar="ADDRESS",
        help="run the node's models on the Ray Serve tier at ADDRESS (the GPU column)",
    )
    parser.add_argument(
        "--queue",
        type=int,
        metavar="N",
        help="run the node with a call queue of N conversations (its adaptive limit on)",
    )
    parser.add_argument(
        "--cpu-limit",
        type=float,
        metavar="CORES",
        help="run the node and its callers on this many cores' worth of CPU (a cgroup quota,"
        " needs root): a slower node on any machine",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="every step on stderr")
    parser.add_argument(
        "--turns",
        type=Path,
        metavar="FILE",
        help="keep the node's turn records (JSON lines: why each turn ended when it did) in FILE",
    )
    args = parser.parse_args(argv)
    levels = [int(x) for x in args.calls.split(",") if x.strip()]
    if not levels or min(levels) < 1 or max(levels) > MAX_CALLS:
        parser.error(f"--calls takes levels from 1 to {MAX_CALLS}")
    command = "python -m bench.load_mix " + shlex.join(list(sys.argv[1:] if argv is None else argv))
    try:
        limited = args.cpu_limit is not None
        with cpu_limit(args.cpu_limit) if limited else contextlib.nullcontext():
            return asyncio.run(main_async(args, levels, command.strip()))
    except CpuLimitUnavailable as exc:
        print(f"--cpu-limit: {exc}", file=sys.stderr)
        return 2
    except CaptureDenied as exc:
        print(
            f"cannot capture packets on the loopback interface: {exc}\n"
            "a raw AF_PACKET socket needs root (or CAP_NET_RAW): run the benchmark as root",
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
