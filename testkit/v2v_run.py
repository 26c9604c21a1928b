"""One run of the wire benchmark: a bot node, concurrency levels of baresip callers, and a
packet capture of it all on loopback; what it gathered (``Collected``), before evaluation.

The capture needs root (a raw packet socket): without it ``collect`` raises
``CaptureDenied`` before a bot is started.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import itertools
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bot.profile import DEFAULT_PROFILE
from testkit.baresip import Caller, run_level
from testkit.botproc import run_bot
from testkit.calllog_reader import LoggedCall, read_call_log
from testkit.ports import free_udp_port
from testkit.question_script import build_script, plan_questions
from testkit.rtp_capture import Capture, Packet, PortFilter
from testkit.voices import FLITE_VOICES


@dataclass
class Collected:
    """Everything a run gathered, before evaluation."""

    levels: list[int]
    callers: list[Caller]
    bot_sip_port: int
    packets: list[Packet]
    log: dict[str, LoggedCall]
    #: ``time.time() - capture time``: puts call-log times on the capture's clock.
    wall_offset: float
    #: The command line that ran the calls (without --save/--analyze and their files).
    command: str = ""
    date: str = field(default_factory=lambda: dt.date.today().isoformat())

    def to_capture(self, wall: float) -> float:
        return wall - self.wall_offset


class CaptureDenied(RuntimeError):
    """The raw socket could not be opened (not root)."""


async def collect(
    levels: Sequence[int],
    turns_per_call: int,
    route: str,
    *,
    lead_s: float = 5.0,
    answer_window_s: float = 12.0,
    stagger_s: float = 0.25,
    think_jitter_s: float = 0.0,
    codec: str = "PCMU",
    questions: Callable[[int], list[tuple[str, str]]] | None = None,
    profile: Path | None = None,
    queue: tuple[int, int] | None = None,
    queue_lead_s: float = 0.0,
) -> Collected:
    """Start a bot, run every level's callers under a capture; the packets and call log.

    With ``think_jitter_s`` each silence after a question lasts up to that much longer
    (uniform, the same for every run: seeded by the caller's number), so that the calls
    drift apart as independent callers do; without it every call keeps the same rhythm and
    the questions of a level end within ``level * stagger_s`` of each other, every time.

    ``queue`` (conversations, places in line) turns the node's call queue on; the callers
    of a level beyond its conversations are put in line, in waves of that many (caller j
    of a level gets a slot as caller j - conversations hangs up), and the script of a
    caller of wave w starts ``w * queue_lead_s`` later: a caller in line says nothing until
    the bot greets them. Questions asked while still in line are not the bot's to answer:
    ``evaluate`` sets them apart.
    """
    exe = shutil.which("baresip")
    if exe is None:
        raise RuntimeError("baresip is not installed (apt-get install baresip-core)")
    salt = os.getpid()
    bot_rtp = range(20000 + (salt % 20) * 1000, 20000 + (salt % 20) * 1000 + 1000)
    caller_rtp = range(10000 + (salt % 10) * 1000, 10000 + (salt % 10) * 1000 + 1000)
    voices = itertools.cycle(FLITE_VOICES)
    plan = questions or (lambda i: plan_questions(route, turns_per_call, i))
    with tempfile.TemporaryDirectory(prefix="switchboard-v2v-") as tmp:
        work = Path(tmp)
        env = {
            "SWITCHBOARD_DATA_DIR": str(work / "bot"),
            "SWITCHBOARD_SIP__MAX_CALLS": str(max(*levels, 4, sum(queue or (0, 0)))),
            "SWITCHBOARD_SIP__RTP_PORT_START": str(bot_rtp.start),
            "SWITCHBOARD_SIP__RTP_PORT_RANGE": str(len(bot_rtp)),
            # Intents are matched as configured, but a transfer or hang-up would end a call
            # before its script: the bot answers and records the action instead.
            "SWITCHBOARD_CALL_ACTIONS": "false",
        }
        if queue is not None:
            env["SWITCHBOARD_QUEUE__MAX_ACTIVE"] = str(queue[0])
            env["SWITCHBOARD_QUEUE__MAX_WAITING"] = str(queue[1])
        bot_profile = profile or Path(os.environ.get("SWITCHBOARD_PROFILE") or DEFAULT_PROFILE)
        callers: list[Caller] = []
        # Capture first: without root this fails before a bot is started for nothing.
        capture = Capture(PortFilter([bot_rtp, caller_rtp]))
        try:
            capture.start()
        except PermissionError as exc:
            raise CaptureDenied(str(exc)) from exc
        try:
            with run_bot(env=env, profile=bot_profile) as bot:
                capture.filter.add(bot.port)
                for level in levels:
                    batch = []
                    for j in range(level):
                        i = len(callers)
                        think = random.Random(i)
                        wave = 0 if queue is None else j // queue[0]
                        script = build_script(
                            plan(i),
                            next(voices),
                            lead_s=lead_s + wave * queue_lead_s,
                            answer_window_s=answer_window_s,
                            think_s=functools.partial(think.uniform, 0.0, think_jitter_s),
                        )
                        caller = Caller(level, i, free_udp_port(), script)
                        capture.filter.add(caller.sip_port)
                        batch.append(caller)
                        callers.append(caller)
                    print(f"concurrency {level}: {level} calls...", file=sys.stderr)
                    started = time.monotonic()
                    await run_level(
                        exe, bot.uri, batch, work, caller_rtp, codec=codec, stagger_s=stagger_s
                    )
                    print(f"  done in {time.monotonic() - started:.0f} s", file=sys.stderr)
                await asyncio.sleep(1.0)  # the last BYEs and their answers
        finally:
            capture.stop()
        # the bot has stopped: its call log is written
        log = read_call_log(work / "bot" / "switchboard.db")
    return Collected(
        levels=list(levels),
        callers=callers,
        bot_sip_port=bot.port,
        packets=capture.packets(),
        log=log,
        wall_offset=capture.wall_offset,
    )
