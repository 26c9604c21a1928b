"""A lookup turn's first audible word (its preamble) against the intent cache's answer, at
one call, heard by a real SIP caller.

Starts ``switchboard run`` (the default profile, its order lookup pointed at the demo
order service on a free port) and places ``--calls`` calls one after the other with the
project's dialer. Each call keys 1 (the order-number collector), keys an order number
digit by digit, asks a question the intent cache answers, then does both once more:

- lookup: from the end of the last key (its start plus the 160 ms of its RFC 4733
  event) to the bot's first voiced frame after it (the preamble, said while the service is
  asked);
- cache: from the caller's last voiced frame of the question to the bot's first voiced
  frame after it (the endpointer's wait included).

Both are read at the caller's media port (the dialer's, after its jitter buffer: ticks of
one 20 ms clock for what it sent and heard). Each turn's route is checked in the bot's
turn log (``lookup``; ``exact`` or ``semantic``); a turn on another route is not counted.

    .venv/bin/python -m bench.lookup_wire --calls 8
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import numpy.typing as npt

from bot.profile import DEFAULT_PROFILE, load_profile
from node.demo_backend import serve
from telephony.dialer import DialResult, dial
from testkit.botproc import run_bot
from testkit.voices import speak
from testkit.wire import percentile, voiced_frames

TICK_S = 0.02
DTMF_S = 0.16  # pjsua's RFC 4733 event length for a dialled digit
KEY_GAP_S = 0.3
QUESTIONS = ("What are your opening hours?", "Do you ship to Canada?")
NUMBERS = ("12345", "24680")
#: One call's script: (order menu key at, first digit at, question at), twice.
PLAN = ((1.0, 7.0, 16.0), (24.0, 30.0, 39.0))
RECORD_S = 48.0


def first_voiced_after(received: npt.NDArray[np.int16], at_s: float) -> float | None:
    """Seconds from ``at_s`` to the first voiced 20 ms frame heard at or after it."""
    voiced = voiced_frames(received)
    start = round(at_s / TICK_S)
    hits = np.flatnonzero(voiced[start:])
    return None if not hits.size else float(hits[0]) * TICK_S


def last_voiced_before(sent: npt.NDArray[np.int16], until_s: float) -> float:
    """Seconds at the end of the last voiced frame sent before ``until_s``."""
    voiced = voiced_frames(sent)[: int(until_s / TICK_S)]
    hits = np.flatnonzero(voiced)
    return (float(hits[-1]) + 1) * TICK_S


def measure(result: DialResult, question_ends: list[float]) -> tuple[list[float], list[float]]:
    """(lookup ms, cache ms) of one call, in plan order (NaN where nothing was heard)."""
    lookup, cache = [], []
    for (_, digits_at, question_at), number, q_end in zip(
        PLAN, NUMBERS, question_ends, strict=True
    ):
        key_end = digits_at + (len(number) - 1) * KEY_GAP_S + DTMF_S
        gap = first_voiced_after(result.received, key_end)
        lookup.append(np.nan if gap is None else gap * 1000)
        spoken_end = last_voiced_before(result.sent, q_end + 0.5)
        gap = first_voiced_after(result.received, spoken_end)
        cache.append(np.nan if gap is None else gap * 1000)
        assert spoken_end > question_at
    return lookup, cache


async def one_call(uri: str, questions: list[bytes]) -> tuple[DialResult, list[float]]:
    dtmf: list[tuple[float, str]] = []
    script: list[tuple[float, bytes]] = []
    ends = []
    for (menu_at, digits_at, question_at), number, pcm in zip(
        PLAN, NUMBERS, questions, strict=True
    ):
        dtmf.append((menu_at, "1"))
        dtmf += [(digits_at + i * KEY_GAP_S, d) for i, d in enumerate(number)]
        script.append((question_at, pcm))
        ends.append(question_at + len(pcm) / 2 / 8000)
    result = await dial(uri, dtmf=dtmf, script=script, record_seconds=RECORD_S)
    return result, ends


def routes_ok(turns: list[dict[str, object]]) -> tuple[list[bool], list[bool]]:
    """Per plan step: was the lookup turn a lookup, the question's turn a cache hit?"""
    lookups = [t for t in turns if t["route"] == "lookup"]
    spoken = [t for t in turns if t["route"] not in ("keypad", "lookup")]
    look_ok = [i < len(lookups) for i in range(len(PLAN))]
    cache_ok = [i < len(spoken) and spoken[i]["route"] in ("exact", "semantic") for i in range(2)]
    return look_ok, cache_ok


async def run(calls: int) -> int:
    service = serve("127.0.0.1", 0)
    thread = threading.Thread(target=service.serve_forever, daemon=True)
    thread.start()
    lookup_ms: list[float] = []
    cache_ms: list[float] = []
    skipped = 0
    try:
        with tempfile.TemporaryDirectory(prefix="sb-lookup-bench-") as tmp:
            text = DEFAULT_PROFILE.read_text(encoding="utf-8").replace(
                "http://127.0.0.1:8077", f"http://127.0.0.1:{service.server_port}"
            )
            profile = Path(tmp) / "profile.toml"
            profile.write_text(text, encoding="utf-8")
            load_profile(profile)
            questions = [await asyncio.to_thread(speak, q, "slt") for q in QUESTIONS]
            with run_bot(profile=profile) as bot:
                for n in range(calls):
                    first = len(bot.lines)
                    result, ends = await one_call(bot.uri, questions)
                    if result.sip_final_status != 200:
                        print(f"call {n}: not answered ({result.error})", file=sys.stderr)
                        skipped += 4
                        continue
                    await asyncio.sleep(0.5)  # the last turn's log line
                    look, cache = measure(result, ends)
                    look_ok, cache_ok = routes_ok(bot.records("turn", since=first))
                    for values, oks, out in (
                        (look, look_ok, lookup_ms),
                        (cache, cache_ok, cache_ms),
                    ):
                        for value, ok in zip(values, oks, strict=True):
                            if ok and not np.isnan(value):
                                out.append(value)
                            else:
                                skipped += 1
                    print(f"call {n}: lookup {look} ms, cache {cache} ms", file=sys.stderr)
    finally:
        service.shutdown()
        service.server_close()
    print(f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {calls} calls one at a time")
    for name, values in (("lookup preamble", lookup_ms), ("cache answer", cache_ms)):
        if values:
            print(
                f"{name:16s} n={len(values):3d}  P50 {percentile(values, 50):5.0f} ms  "
                f"P95 {percentile(values, 95):5.0f} ms  max {max(values):5.0f} ms"
            )
    print(f"turns not counted (other route or nothing heard): {skipped}")
    return 0 if lookup_ms and cache_ms else 1


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.lookup_wire")
    parser.add_argument("--calls", type=int, default=8)
    args = parser.parse_args()
    started = time.monotonic()
    rc = asyncio.run(run(args.calls))
    print(f"took {time.monotonic() - started:.0f} s", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
