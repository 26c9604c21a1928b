"""Voice-to-voice latency as a caller hears it, over real SIP calls on loopback.

Starts a bot node (``switchboard run``) on a free port, places calls with the project's
pjsua2 dialer, and measures on the caller's own recording: the greeting delay (answer to
the bot's first voiced audio) and, for each caller turn, the time from the caller's last
voiced frame to the bot's first voiced frame after it. It also joins the bot's own
per-stage timings from its turn log lines.

    .venv/bin/python -m bench.voice_to_voice --calls 20 [--route cache|llm|both] [--write FILE]

``--route cache`` asks held-out paraphrases of the profile's intents (bench/intent_eval), which
the intent cache answers with ready audio; ``--route llm`` asks open questions no intent
covers; ``both`` alternates. Results are reported per route the bot actually took (its turn
log), so a paraphrase the cache refused counts as an LLM turn.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import platform
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

from telephony.dialer import dial
from testkit.botproc import BotProcess, run_bot
from testkit.question_script import CACHE_QUESTIONS, OPEN_QUESTIONS
from testkit.voices import FLITE_VOICES, speak
from testkit.wire import greeting_delay_ms, percentile, turn_latencies

QUESTIONS = (
    "Where is my order?",
    "What are your opening hours?",
    "Can I change my delivery address?",
    "I would like to return a jacket.",
    "Do you ship to Canada?",
    "How much is express delivery?",
    "My parcel arrived damaged.",
    "Can I talk to a person please?",
)


@dataclass
class Results:
    """Everything one benchmark run measured."""

    greeting_ms: list[float] = field(default_factory=list)
    v2v_ms: list[float] = field(default_factory=list)
    unanswered: int = 0
    overlapped: int = 0
    failed_calls: int = 0
    stages: dict[str, list[float]] = field(default_factory=dict)
    #: Voice-to-voice per route the bot took (exact, semantic, llm...).
    by_route: dict[str, list[float]] = field(default_factory=dict)
    #: Calls whose route differed from the one the question was chosen for.
    off_route: int = 0


def question(route: str, n: int) -> tuple[str, str]:
    """The n-th call's question and the route it is meant to take."""
    if route == "both":
        route = "cache" if n % 2 == 0 else "llm"
        n //= 2
    pool = CACHE_QUESTIONS if route == "cache" else OPEN_QUESTIONS
    return pool[n % len(pool)], route


async def one_call(
    bot: BotProcess, n: int, args: argparse.Namespace, res: Results, *, label: bool
) -> None:
    say_at_s, listen_s = args.say_at, args.listen
    if args.route is None:
        text, planned = QUESTIONS[n % len(QUESTIONS)], "any"
    else:
        text, planned = question(args.route, n)
    voice = FLITE_VOICES[n % len(FLITE_VOICES)]
    first_line = len(bot.lines)
    utterance = speak(text, voice=voice)
    seconds = say_at_s + len(utterance) / 16000 + listen_s
    result = await dial(bot.uri, play=utterance, play_at_s=say_at_s, record_seconds=seconds)
    if result.sip_final_status != 200:
        res.failed_calls += 1
        print(f"call {n}: SIP {result.sip_final_status} {result.error}", file=sys.stderr)
        return
    greeting = greeting_delay_ms(result.received)
    if greeting is not None:
        res.greeting_ms.append(greeting)
    for turn in turn_latencies(result.sent, result.received):
        if turn.overlapped:
            res.overlapped += 1
        elif turn.voice_to_voice_ms is None:
            res.unanswered += 1
        else:
            res.v2v_ms.append(turn.voice_to_voice_ms)
            taken = planned
            if label:  # one call at a time: this call's turn lines are the ones after first_line
                routes = [r["route"] for r in bot.records("turn", since=first_line)]
                taken = routes[-1] if routes else "none"
                cache_hit = taken in ("exact", "semantic")
                if planned != "any" and cache_hit != (planned == "cache"):
                    res.off_route += 1
            res.by_route.setdefault(taken, []).append(turn.voice_to_voice_ms)
            print(
                f"call {n:2d} ({voice:5s}) greeting {greeting} ms, "
                f"voice-to-voice {turn.voice_to_voice_ms:.0f} ms, route {taken}: {text!r}",
                file=sys.stderr,
            )


def row(name: str, values: list[float]) -> str:
    if not values:
        return f"| {name} | 0 | - | - | - |"
    return (
        f"| {name} | {len(values)} | {percentile(values, 50):.0f} | "
        f"{percentile(values, 95):.0f} | {max(values):.0f} |"
    )


def report(res: Results, command: str, concurrency: int) -> str:
    today = dt.date.today().isoformat()
    lines = [
        f"### Voice-to-voice on the embedded defaults ({today})",
        "",
        f"Command: `{command}`  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}; "
        f"{concurrency} call(s) at a time; PCMU over loopback; caller voices: flite "
        f"({', '.join(FLITE_VOICES)}).",
        "",
        "Measured on the caller's recording (pjsua2 dialer, both directions on one clock).",
        "",
        "| measure | n | P50 ms | P95 ms | max ms |",
        "|---|---|---|---|---|",
        row("greeting: answer to first voiced audio", res.greeting_ms),
        row("voice-to-voice: caller's last voiced frame to bot's first", res.v2v_ms),
        *(row(f"voice-to-voice, route {name}", v) for name, v in sorted(res.by_route.items())),
        "",
        f"Calls that took another route than their question was chosen for: {res.off_route}.",
        "",
        f"Calls failed: {res.failed_calls}; turns unanswered within the window: "
        f"{res.unanswered}; turns where the bot was still talking: {res.overlapped}.",
        "",
        "The bot's own clock for the same turns (ms after the caller's speech ended, from "
        "its turn log; ASR/LLM/TTS model time in the last rows):",
        "",
        "| stage | n | P50 ms | P95 ms | max ms |",
        "|---|---|---|---|---|",
    ]
    lines += [row(name, values) for name, values in res.stages.items()]
    return "\n".join(lines) + "\n"


def collect_stages(bot: BotProcess, res: Results) -> None:
    for record in bot.records("turn"):
        for name, ms in record["stages_ms"].items():
            if name != "speech_end":
                res.stages.setdefault(name, []).append(float(ms))
    for record in bot.records("turn"):
        for name, ms in record["model_ms"].items():
            res.stages.setdefault(f"model: {name}", []).append(float(ms))


async def run(args: argparse.Namespace) -> Results:
    res = Results()
    # Intents are matched as configured; a transfer would take the call from the dialer.
    with run_bot(env={"SWITCHBOARD_CALL_ACTIONS": "false"}) as bot:
        for start in range(0, args.calls, args.concurrency):
            batch = range(start, min(start + args.concurrency, args.calls))
            label = args.concurrency == 1
            await asyncio.gather(*(one_call(bot, n, args, res, label=label) for n in batch))
        collect_stages(bot, res)
    return res


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20, help="calls (one turn each)")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--say-at", type=float, default=4.0, help="s after answer to speak")
    parser.add_argument("--listen", type=float, default=8.0, help="s to listen after speaking")
    parser.add_argument("--write", type=Path, help="append the result table to this file")
    parser.add_argument(
        "--route",
        choices=("cache", "llm", "both"),
        help="ask intent paraphrases (cache), open questions (llm) or alternate (both)",
    )
    args = parser.parse_args()
    res = asyncio.run(run(args))
    command = "python -m bench.voice_to_voice " + " ".join(sys.argv[1:])
    text = report(res, command, args.concurrency)
    print(text)
    if args.write:
        with args.write.open("a", encoding="utf-8") as out:
            out.write("\n" + text)
    print(
        f"greeting P50 {statistics.median(res.greeting_ms or [0]):.0f} ms, "
        f"voice-to-voice P50 {statistics.median(res.v2v_ms or [0]):.0f} ms",
        file=sys.stderr,
    )
    return 0 if res.v2v_ms and not res.failed_calls else 1


if __name__ == "__main__":
    raise SystemExit(main())
