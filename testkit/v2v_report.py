"""The wire benchmark's results as its report: Markdown tables (``docs/latency.md``), a plot
of voice-to-voice per route against concurrency (``docs/latency.png``), and the command
line the report names. It lives here rather than beside the command (``bench/v2v_wire.py``)
because the tests check its tables.
"""

from __future__ import annotations

import os
import platform
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from testkit.v2v_results import Results
from testkit.voices import FLITE_VOICES
from testkit.wire import percentile

#: How a wait in the call queue ends without the bot.
QUEUE_FAILS = ("queue_timeout", "queue_abandoned", "queue_full")
#: Bot stage durations, in the order they happen (ms).
STAGES = ("eot_wait", "asr", "lookup", "first_token", "first_audio")
STAGE_TITLES = {
    "eot_wait": "eot wait",
    "asr": "ASR",
    "lookup": "lookup",
    "first_token": "first token",
    "first_audio": "first audio",
}


def machine_note() -> str:
    """The kind of machine, as the report states it ("2-core CPU, no GPU")."""
    gpu = "no GPU" if shutil.which("nvidia-smi") is None else "a GPU the CPU defaults leave idle"
    return f"{os.cpu_count()}-core CPU, {gpu}"


def _pct(values: Sequence[float], q: float) -> str:
    return f"{percentile(list(values), q):.0f}" if values else "-"


def route_order(routes: Iterable[str]) -> list[str]:
    seen = set(routes)
    first = ["cache", "llm"]
    return [r for r in first if r in seen] + sorted(seen - set(first))


def report(res: Results, command: str) -> str:
    """The results as Markdown tables."""
    lines = [
        "| concurrency | route | turns | P50 ms | P95 ms | P99 ms | max ms | after a filler | "
        "longest silence P95 / max ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for level in res.levels:
        turns = [t for t in res.turns if t.concurrency == level]
        for route in route_order(t.route for t in turns):
            mine = [t for t in turns if t.route == route and t.v2v_ms is not None]
            v = [t.v2v_ms for t in mine if t.v2v_ms is not None]
            top = f"{max(v):.0f}" if v else "-"
            quiet = [t.silence_ms for t in mine if t.silence_ms is not None]
            longest = f"{_pct(quiet, 95)} / {max(quiet):.0f}" if quiet else "-"
            lines.append(
                f"| {level} | {route} | {len(v)} | {_pct(v, 50)} | {_pct(v, 95)} | "
                f"{_pct(v, 99)} | {top} | {sum(t.filler for t in mine)} | {longest} |"
            )
    calls_table = [
        "| concurrency | calls | dropped | greeting P50 ms | P95 ms | P99 ms | "
        "late bot packets (calls with any) | lost bot packets | turns overlapped | "
        "off-route turns |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    dropped_lines = []
    for level in res.levels:
        calls = [c for c in res.calls if c.concurrency == level]
        turns = [t for t in res.turns if t.concurrency == level]
        g = [c.greeting_ms for c in calls if c.greeting_ms is not None]
        late = sum(c.late_packets for c in calls)
        late_calls = sum(c.late_packets > 0 for c in calls)
        off = sum(t.route in ("cache", "llm") and t.route != t.planned for t in turns)
        calls_table.append(
            f"| {level} | {len(calls)} | {sum(c.dropped for c in calls)} | {_pct(g, 50)} | "
            f"{_pct(g, 95)} | {_pct(g, 99)} | {late} ({late_calls}) | "
            f"{sum(c.lost_packets for c in calls)} | {sum(t.overlapped for t in turns)} | {off} |"
        )
        dropped_lines += [
            f"- concurrency {level}, call {c.call} ({c.voice}): {c.why}" for c in calls if c.dropped
        ]
    wer_table = [
        "| concurrency | route | questions | words said | word errors | WER | "
        "questions heard exactly |",
        "|---|---|---|---|---|---|---|",
    ]
    for level in res.levels:
        turns = [t for t in res.turns if t.concurrency == level and t.word_errors is not None]
        for route in [*route_order(t.route for t in turns), "all"]:
            mine = [t for t in turns if route in ("all", t.route)]
            counted = [e for e in (t.word_errors for t in mine) if e is not None]
            errors, said = sum(e for e, _ in counted), sum(n for _, n in counted)
            rate = f"{errors / said:.1%}" if said else "-"
            wer_table.append(
                f"| {level} | {route} | {len(mine)} | {said} | {errors} | {rate} | "
                f"{sum(e == 0 for e, _ in counted)} |"
            )
    stage_head = " | ".join(f"{STAGE_TITLES[s]} P50 / P95" for s in STAGES)
    stages_table = [
        f"| concurrency | route | turns | {stage_head} | wire v2v P50 / P95 | "
        "wire overhead P50 / P95 | of it inbound / outbound P50 |",
        "|---|---|---|" + "---|" * len(STAGES) + "---|---|---|",
    ]
    for level in res.levels:
        turns = [t for t in res.turns if t.concurrency == level and t.bot_ms]
        for route in route_order(t.route for t in turns):
            mine = [t for t in turns if t.route == route]
            cells = []
            for stage in STAGES:
                v = [t.bot_ms[stage] for t in mine if stage in t.bot_ms]
                cells.append(f"{_pct(v, 50)} / {_pct(v, 95)}" if v else "-")
            wire = [t.v2v_ms for t in mine if t.v2v_ms is not None]
            over = [t.overhead_ms for t in mine if t.overhead_ms is not None]
            inb = [t.inbound_ms for t in mine if t.inbound_ms is not None]
            outb = [t.outbound_ms for t in mine if t.outbound_ms is not None]
            stages_table.append(
                f"| {level} | {route} | {len(mine)} | {' | '.join(cells)} | "
                f"{_pct(wire, 50)} / {_pct(wire, 95)} | {_pct(over, 50)} / {_pct(over, 95)} | "
                f"{_pct(inb, 50)} / {_pct(outb, 50)} |"
            )
    queue_table = [
        "| concurrency | calls | queued | got the bot | timed out / abandoned / full | "
        "wait P50 / P95 / max s | questions asked in line | apologies |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for level in res.levels:
        calls = [c for c in res.calls if c.concurrency == level]
        turns = [t for t in res.turns if t.concurrency == level]
        queued = [c for c in calls if c.queue_outcome is not None]
        waits = [c.queue_wait_s for c in queued if c.queue_wait_s is not None]
        ends = [sum(c.queue_outcome == k for c in queued) for k in QUEUE_FAILS]
        wait = (
            f"{percentile(waits, 50):.1f} / {percentile(waits, 95):.1f} / {max(waits):.1f}"
            if waits
            else "-"
        )
        queue_table.append(
            f"| {level} | {len(calls)} | {len(queued)} | "
            f"{sum(c.queue_outcome == 'dequeued' for c in queued)} | "
            f"{' / '.join(map(str, ends))} | {wait} | {sum(t.in_line for t in turns)} | "
            f"{sum(t.apology for t in turns)} |"
        )
    out = [
        f"# Voice-to-voice latency on the wire ({res.date})",
        "",
        f"Command: `{command}`  ",
        f"Machine: {machine_note()} ({platform.machine()}, Python "
        f"{platform.python_version()}); bot on its embedded defaults; callers are baresip "
        f"over loopback, caller voices: flite ({', '.join(FLITE_VOICES)}).",
        "",
        "Measured on the loopback interface (raw packet capture, kernel timestamps): "
        "voice-to-voice is the arrival of the caller's last voiced RTP packet of a question to "
        "the bot's first voiced RTP packet after it; the greeting delay runs from the 200 OK "
        "to the INVITE on the wire. Routes come from the bot's call log: cache is an intent "
        "match (ready audio), llm the language model; unjoined: no call-log turn found. "
        'When the answer is slow the bot plays a filler ("one moment please") first: '
        "voice-to-voice then measures the filler, the first thing the caller hears. Longest "
        "silence: per turn, the longest stretch without a voiced bot packet from the question's "
        "end to the answer's end (a dead line while the caller waits). The bot "
        "matches intents as configured but runs with their actions off "
        "(`SWITCHBOARD_CALL_ACTIONS=false`: a transfer or hang-up is recorded, not done), so "
        "that every call plays its whole script. The capture needs root (a raw packet "
        "socket).",
        "",
        "## Voice-to-voice per route",
        "",
        *lines,
        "",
        "## Calls",
        "",
        "Dropped: not answered, a question left unanswered, or the call ended before its "
        "script. Late: a bot RTP packet more than 40 ms after the previous one of its 20 ms "
        "stream. Overlapped: the bot was talking when the question ended (not measured). "
        "Off-route: the question was chosen for one route and the bot took the other.",
        "",
        *calls_table,
        "",
        *(dropped_lines or ["No dropped calls."]),
        "",
        "## Call queue and apologies",
        "",
        "With the node's call queue on (`--queue`), the callers of a level beyond its "
        "conversations wait in line: their waits come from the call log, and the questions "
        "they asked while still in line (hold audio, not answers) are left out of every "
        "figure above. Apologies: turns that failed and played the profile's apology.",
        "",
        *queue_table,
        "",
        "## What the bot heard",
        "",
        "Word error rate of the bot's own speech recognition on the callers' questions: "
        "each question's script against the transcripts of the call-log turns that ended "
        "inside it (a question split at a pause is two turns), case and punctuation "
        "ignored. Route: the route of the turn that answered the question.",
        "",
        *wer_table,
        "",
        "## The bot's own clock",
        "",
        "Stage durations from the call log, ms: eot wait (caller's speech end to end of turn "
        "decided), ASR, lookup (intent cache), first token (route decided to the LLM's first "
        "token), first audio (speech end to the first answer audio out). Wire overhead: "
        "wire voice-to-voice minus the bot's first audio (jitter buffers, packetization, "
        "leading silence of the answer, the VAD's view of the speech end), over turns "
        "without a filler.",
        "",
        *stages_table,
        "",
    ]
    return "\n".join(out)


def write_docs(res: Results, command: str, md: Path, png: Path) -> None:
    """``md``: the report; ``png``: P50/P95/P99 per route against concurrency."""
    import matplotlib  # noqa: PLC0415 - only --write needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    md.write_text(report(res, command) + f"\n![voice-to-voice per route]({png.name})\n")
    routes = [r for r in route_order(t.route for t in res.turns) if r in ("cache", "llm")]
    fig, axes = plt.subplots(1, max(len(routes), 1), figsize=(5 * max(len(routes), 1), 4))
    axes_list = list(np.atleast_1d(axes))
    for ax, route in zip(axes_list, routes, strict=False):
        for q, style in ((50, "o-"), (95, "s--"), (99, "^:")):
            xs, ys = [], []
            for level in res.levels:
                v = [
                    t.v2v_ms
                    for t in res.turns
                    if t.concurrency == level and t.route == route and t.v2v_ms is not None
                ]
                if v:
                    xs.append(level)
                    ys.append(percentile(v, q))
            ax.plot(xs, ys, style, label=f"P{q}")
        ax.set_title(f"route: {route}")
        ax.set_xlabel("concurrent calls")
        ax.set_ylabel("voice-to-voice on the wire, ms")
        ax.set_xticks(res.levels)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.suptitle(f"Switchboard voice-to-voice on the wire ({machine_note()})")
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)


def bench_command(argv: Sequence[str]) -> str:
    """The command line as the report shows it: without --save/--analyze (local files)."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in ("--save", "--analyze"):
            skip = True
        elif not arg.startswith(("--save=", "--analyze=")):
            kept.append(arg)
    return " ".join(["python -m bench.v2v_wire", *kept])
