"""Outcomes over real SIP: six calls with known endings on one node, checked in the call log
and in the outcomes API.

A real ``switchboard run`` (the default profile, its cached answers' threshold out of reach
so that an order question is asked about, two menu keys added, its transfers bridged to
baresip agents this module starts, short silence limits; five conversations at a time and
one place in line; the post-call question on) is called by the project's dialer, one call
after another placed in a known order (so that the call log's order of answer says which
call is which), all of them up at once:

- A: key 3 (delivery times: an answer), key 9 (goodbye), then key 1 to "Did we answer your
  question?": resolved / goodbye, the post-call answer yes;
- B: key 0 (talk to a person): put through to the agent: transferred / asked;
- C: an order question the bot asks about, key 2 ("no"), then key 8 (a person): transferred /
  declined;
- D: a question the bot is not sure about, then the caller hangs up: abandoned / not_sure;
- F: silence until the silence limit ends the call: abandoned / silence;
- E: placed while the five are up, in line, hangs up there: abandoned / queue.

Each call's stored outcome, reason and post-call answer, and every figure of
``GET /outcomes/summary`` over them, are checked against these endings. About a minute
after the model load.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from bot.calllog.store import make_engine
from bot.intents.match import normalize
from bot.profile import DEFAULT_PROFILE, load_profile
from telephony.dialer import DialGate, DialResult, dial
from testkit.botproc import BotProcess, run_bot
from testkit.ports import free_udp_port
from testkit.voices import speak
from tests.admin.conftest import add_token, bearer
from tests.support.agents import baresip_agent

pytestmark = [pytest.mark.sip, pytest.mark.models]

RATE = 8000
#: Near the order_status intent, below the raised threshold: the bot asks about it.
ASKED_ABOUT = "Has my package left yet?"
#: Nothing in the profile is about it: the honest "not sure".
NOT_SURE = "What is the weather like in Paris tomorrow?"
AGENT_HELLO = "Hello, you are through to Sam in customer service."
POST_CALL_WAIT_S = 4.0


@dataclass
class Scenario:
    name: str
    dial: dict[str, Any]
    outcome: tuple[str, str]
    post_call: str | None = None
    #: The node logs this once the call is answered (into the conversation, or the line).
    answered_line: str = "greeting queued"
    gate: DialGate = field(default_factory=DialGate)


def outcomes_profile(path: Path, person_port: int, desk_port: int) -> Path:
    """The default profile with every cached answer asked about first, key 9 for goodbye
    and key 8 for the desk, both people reached by a bridge, and short silence limits."""
    text = DEFAULT_PROFILE.read_text(encoding="utf-8")
    text = text.replace("\nthreshold = 0.45\n", "\nthreshold = 0.95\n")
    person = f"sip:agents@127.0.0.1:{person_port}"
    desk = f"sip:desk@127.0.0.1:{desk_port}"
    text = text.replace('transfer_to = "sip:agents@127.0.0.1:5070"', f'transfer_to = "{person}"')
    text = text.replace(
        '    { key = "0", intent = "talk_to_person" },\n',
        '    { key = "0", intent = "talk_to_person" },\n'
        '    { key = "9", intent = "goodbye" },\n'
        f'    {{ key = "8", transfer_to = "{desk}" }},\n',
    )
    text = text.replace("silence_reprompt_s = 25.0", "silence_reprompt_s = 8.0")
    text = text.replace("silence_hangup_s = 10.0", "silence_hangup_s = 4.0")
    text += f"""
[[transfer_targets]]
uri = "{person}"
mode = "bridge"

[[transfer_targets]]
uri = "{desk}"
mode = "bridge"
"""
    path.write_text(text, encoding="utf-8")
    profile = load_profile(path)
    assert profile.intent_matching.threshold == 0.95
    assert profile.call_limits.silence_reprompt_s == 8.0
    assert profile.call_limits.silence_hangup_s == 4.0
    assert f'key = "8", transfer_to = "{desk}"' in text
    return path


def agent_voice(words: str) -> bytes:
    """A second of quiet, ``words``, a second of quiet; then the agent hangs up."""
    return bytes(RATE * 2) + speak(words, "rms") + bytes(RATE * 2)


def count(bot: BotProcess, text: str) -> int:
    return sum(text in line for line in list(bot.lines))


async def wait_for(cond: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        await asyncio.sleep(0.05)


def stored_calls(db: Path) -> list[dict[str, Any]]:
    """Every call in the call log in the order answered, with its turns and events, once
    all are closed with an outcome."""
    with contextlib.closing(sqlite3.connect(db, timeout=10)) as conn:
        conn.row_factory = sqlite3.Row
        calls = [dict(r) for r in conn.execute("SELECT * FROM calls ORDER BY answered_at")]
        for call in calls:
            call["turns"] = [
                dict(t)
                for t in conn.execute(
                    "SELECT * FROM turns WHERE call_id = ? ORDER BY seq", (call["id"],)
                )
            ]
            call["events"] = [
                (e["kind"], e["detail"])
                for e in conn.execute(
                    "SELECT kind, detail FROM call_events WHERE call_id = ? ORDER BY at",
                    (call["id"],),
                )
            ]
    return calls


async def closed_calls(db: Path, n: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 30
    while True:
        with contextlib.suppress(sqlite3.OperationalError):  # the node is writing
            calls = await asyncio.to_thread(stored_calls, db)
            if len(calls) == n and all(c["outcome"] for c in calls):
                return calls
        assert time.monotonic() < deadline, "the calls were not all closed with an outcome"
        await asyncio.sleep(0.2)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def first_answer_ms(call: dict[str, Any]) -> float | None:
    """The first answered turn's end of speech (or key) to first audio, from the stored
    times (a turn with no audio of its own passed over)."""
    for turn in call["turns"]:
        spoke, heard = turn["speech_end_at"], turn["first_audio_out_at"]
        if turn["outcome"] == "answered" and spoke is not None and heard is not None:
            return round((at(heard) - at(spoke)).total_seconds() * 1000.0, 1)
    return None


def rates(calls: int, **outcomes: int) -> dict[str, Any]:
    figures: dict[str, Any] = {"calls": calls}
    for o in ("resolved", "transferred", "abandoned", "refused", "failed"):
        figures[o] = outcomes.get(o, 0)
    for name, key in (
        ("containment_rate", "resolved"),
        ("transfer_rate", "transferred"),
        ("abandonment_rate", "abandoned"),
    ):
        figures[name] = round(outcomes.get(key, 0) / calls, 4)
    return figures


@pytest.fixture(scope="module")
def agent_ports() -> tuple[int, int]:
    return free_udp_port(), free_udp_port()


@pytest.fixture(scope="module")
def outcomes_bot(
    tmp_path_factory: pytest.TempPathFactory, agent_ports: tuple[int, int]
) -> Iterator[BotProcess]:
    path = outcomes_profile(tmp_path_factory.mktemp("profile") / "outcomes.toml", *agent_ports)
    env = {
        "SWITCHBOARD_SIP__MAX_CALLS": "6",
        "SWITCHBOARD_QUEUE__MAX_ACTIVE": "5",
        # Which scenario waits in line is the test's: five conversations however slow
        # the machine's models are (the adaptive limit has its own tests).
        "SWITCHBOARD_QUEUE__ADAPTIVE": "false",
        "SWITCHBOARD_QUEUE__MAX_WAITING": "1",
        "SWITCHBOARD_QUEUE__UPDATE_EVERY_S": "60",
        "SWITCHBOARD_CALLLOG__POST_CALL_QUESTION": "true",
        "SWITCHBOARD_CALLLOG__POST_CALL_WAIT_S": str(POST_CALL_WAIT_S),
    }
    # A first node in the process synthesizes every fixed phrase (minutes on a loaded machine).
    with run_bot(profile=path, env=env, timeout_s=420) as bot:
        yield bot


async def test_six_known_endings_stored_and_figured(
    outcomes_bot: BotProcess, agent_ports: tuple[int, int], tmp_path: Path
) -> None:
    bot = outcomes_bot
    asked_about = await asyncio.to_thread(speak, ASKED_ABOUT, "slt")
    not_sure = await asyncio.to_thread(speak, NOT_SURE, "slt")
    voice = await asyncio.to_thread(agent_voice, AGENT_HELLO)
    scenarios = [
        Scenario(
            "A: answered, then goodbye",
            # Key 1 while the post-call question is asked (after the goodbye's answer).
            {"dtmf": [(1.0, "3"), (7.0, "9"), (12.5, "1")], "record_seconds": 30},
            ("resolved", "goodbye"),
            post_call="yes",
        ),
        Scenario(
            "B: a transfer request",
            {"dtmf": [(1.0, "0")], "record_seconds": 35},
            ("transferred", "asked"),
        ),
        Scenario(
            "C: no to the bot's question, then put through",
            {
                "play": asked_about,
                "play_at_s": 4.5,
                "dtmf": [(12.0, "2"), (21.0, "8")],
                "record_seconds": 45,
            },
            ("transferred", "declined"),
        ),
        Scenario(
            "D: a hang-up after not sure",
            {"play": not_sure, "play_at_s": 4.5, "record_seconds": 20},
            ("abandoned", "not_sure"),
        ),
        Scenario("F: silence until the limit", {"record_seconds": 30}, ("abandoned", "silence")),
        Scenario(
            "E: a hang-up in the queue",
            {"record_seconds": 4},
            ("abandoned", "queue"),
            answered_line="queued at position 1",
        ),
    ]
    started = datetime.now(UTC)
    person_port, desk_port = agent_ports
    async with (
        baresip_agent(person_port, voice, tmp_path / "person", timeout_s=90, user="agents") as a1,
        baresip_agent(desk_port, voice, tmp_path / "desk", timeout_s=90, user="desk") as a2,
    ):
        calls = [asyncio.ensure_future(dial(bot.uri, gate=s.gate, **s.dial)) for s in scenarios]
        await asyncio.gather(*(s.gate.ready.wait() for s in scenarios))
        # One after another, each once the one before is answered: the call log's order.
        for s in scenarios:
            before = count(bot, s.answered_line)
            s.gate.go.set()
            await wait_for(lambda s=s, n=before: count(bot, s.answered_line) > n, 30, s.name)
        results: list[DialResult] = await asyncio.gather(*calls)
    assert a1.answered and a2.answered, "an agent was not called"
    for s, r in zip(scenarios, results, strict=True):
        assert r.sip_final_status == 200, (s.name, r.error)
    stored = await closed_calls(bot.data_dir / "switchboard.db", len(scenarios))
    until = datetime.now(UTC)

    # Each call: its outcome and reason, and the post-call answer where it was asked.
    got = [(c["outcome"], c["outcome_reason"], c["post_call_answer"]) for c in stored]
    expected = [(*s.outcome, s.post_call) for s in scenarios]
    assert got == expected, [
        (s.name, c["end_reason"], [(t["route"], t["intent"], t["outcome"]) for t in c["turns"]],
         c["events"]) for s, c in zip(scenarios, stored, strict=True)
    ]  # fmt: skip
    a, b, c, d, f, e = stored
    assert a["end_reason"] == "bot_hangup" and results[0].ended_by_remote
    assert ("post_call_answer", "yes") in a["events"]
    assert [(t["intent"], t["outcome"]) for t in a["turns"]] == [
        ("delivery_time", "answered"),
        ("goodbye", "answered"),
    ]
    assert b["end_reason"] == "transferred"
    assert [(t["intent"], t["outcome"]) for t in b["turns"]] == [("talk_to_person", "answered")]
    assert c["end_reason"] == "transferred"
    assert ("confirm_key", "2") in c["events"], c["events"]
    assert (c["turns"][0]["route"], c["turns"][0]["outcome"]) == ("confirm", "confirmed_no")
    assert [t["outcome"] for t in d["turns"]] == ["declined"]
    assert f["end_reason"] == "silence" and ("silence_prompt", "8 s quiet") in f["events"]
    assert [k for k, _ in e["events"]] == ["queued", "queue_abandoned"] and e["turns"] == []
    # No one else was asked the post-call question.
    assert [x["post_call_answer"] for x in stored] == ["yes", None, None, None, None, None]

    # The stored length of each call is the length the caller saw (within 1.5 s).
    lengths = [(at(x["ended_at"]) - at(x["answered_at"])).total_seconds() for x in stored]
    for s, r, length in zip(scenarios, results, lengths, strict=True):
        assert abs(length - len(r.received) / RATE) < 1.5, (s.name, length, len(r.received))

    # The outcomes API over the same calls: every figure.
    engine = make_engine(f"sqlite+aiosqlite:///{bot.data_dir / 'switchboard.db'}")
    try:
        token = await add_token(engine, "vic", "viewer")
    finally:
        await engine.dispose()
    since = (started - timedelta(minutes=1)).isoformat()
    params = {"since": since, "until": (until + timedelta(minutes=1)).isoformat()}
    async with httpx.AsyncClient(
        base_url=bot.admin_url + "/api/v1", headers=bearer(token), timeout=30
    ) as api:
        r = await api.get("/outcomes/summary", params=params)
        assert r.status_code == 200, r.text
        summary = r.json()
        calls_csv = (await api.get("/outcomes/calls.csv", params=params)).text
    totals = rates(6, resolved=1, transferred=2, abandoned=3)
    assert summary["totals"] == totals
    days = sorted({at(x["answered_at"]).date().isoformat() for x in stored})
    if len(days) == 1:  # (a run across midnight UTC has two days)
        assert summary["by_day"] == [{"day": days[0], **totals}]
    assert sum(day["calls"] for day in summary["by_day"]) == 6
    assert summary["transfers_by_reason"] == {"asked": 1, "declined": 1}
    assert summary["abandoned_by_place"] == {"not_sure": 1, "queue": 1, "silence": 1}
    assert summary["refused_by_reason"] == {} and summary["failed_by_reason"] == {}
    assert summary["average_call_s"] == pytest.approx(sum(lengths) / 6, abs=0.002)
    # The first answer: A's key 3 and B's key 0 played an answer (from the key to its first
    # audio); C's key 8 put the caller through with no answer of its own.
    firsts = [first_answer_ms(x) for x in stored]
    assert [v is not None for v in firsts] == [True, True, False, False, False, False], firsts
    known = [v for v in firsts if v is not None]
    assert all(0 < v < 5000 for v in known), known
    assert summary["first_answer_calls"] == 2
    assert summary["first_answer_p50_ms"] == round(float(np.percentile(known, 50)), 1)
    assert summary["first_answer_p95_ms"] == round(float(np.percentile(known, 95)), 1)
    # "Not sure": D's question, as the bot heard it.
    heard = d["turns"][0]["transcript"]
    assert "weather" in heard.lower(), heard
    topics = [(t["normalized"], t["count"]) for t in summary["not_sure_topics"]]
    assert (normalize(heard), 1) in topics, topics
    assert summary["post_call"] == {"asked": 1, "yes": 1, "no": 0, "none": 0, "yes_rate": 1.0}
    entries = {x["name"]: x for x in summary["entries"]}
    once = {"asked": 1, "answered": 1, "confirmed_no": 0}
    for name in ("delivery_time", "goodbye"):  # the bot's own hang-up: no one hung up on it
        assert entries[name] == {
            "name": name,
            **once,
            "followed_by_transfer": 0,
            "followed_by_hangup": 0,
        }
    assert entries["talk_to_person"] == {
        "name": "talk_to_person",
        "asked": 1,
        "answered": 1,
        "confirmed_no": 0,
        "followed_by_transfer": 1,
        "followed_by_hangup": 0,
    }
    assert entries["order_status"]["confirmed_no"] == 1
    # The CSV export: the same outcomes and the post-call answer per call.
    by_id = {row["id"]: row for row in csv.DictReader(io.StringIO(calls_csv))}
    assert len(by_id) == 6
    exported = [by_id[str(uuid.UUID(x["id"]))] for x in stored]
    assert [(row["outcome"], row["outcome_reason"]) for row in exported] == [
        s.outcome for s in scenarios
    ]
    assert [row["post_call_answer"] for row in exported] == ["yes", "", "", "", "", ""]
