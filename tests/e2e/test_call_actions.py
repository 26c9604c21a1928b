"""Intent actions over real SIP: the bot hangs up after "goodbye", and transfers by REFER
(accepted by sipp playing the caller's phone; declined by our dialer).

Both calls go to the package's bot node (the default profile) through its SIP front; the
bot's call log (its SQLite file) is read back for the call's end reason and events.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from bot.profile import DEFAULT_PROFILE, load_profile
from telephony.dialer import dial
from testkit.botproc import BotProcess
from testkit.voices import speak, write_wav
from testkit.wire import FRAME_MS, segments, voiced_frames
from tests.e2e.conftest import Listener
from tests.support.sipp import run_sipp
from tests.support.sipp_scenarios import (
    ANSWER_BYE,
    ANSWERED_ALONG_ROUTE,
    INVITE_STREAMING,
    logged_refer_to,
    refer_notify,
    refer_received,
    refer_response,
    scenario,
    stream,
)
from tests.support.text import word_error_rate

pytestmark = [pytest.mark.sip, pytest.mark.models]

RATE = 8000
GOODBYE = "That's all, thank you. Goodbye."  # an example of the goodbye intent
PERSON = "I want to talk to a person."  # an example of the talk_to_person intent
LEAD_S = 4.5  # the greeting plays first
CONFIRM_S = 9  # room for the bot's "did you mean...?" before the caller's yes


def call_log(bot: BotProcess, sip_call_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The call's row and events in the bot's call log, once its row is closed."""
    db = bot.data_dir / "switchboard.db"
    deadline = time.monotonic() + 20
    while True:
        with (
            contextlib.suppress(sqlite3.OperationalError),  # the bot is writing
            contextlib.closing(sqlite3.connect(db, timeout=5)) as conn,
        ):
            conn.row_factory = sqlite3.Row
            row = conn.execute(
                "SELECT * FROM calls WHERE sip_call_id = ?", (sip_call_id,)
            ).fetchone()
            if row is not None and row["end_reason"] is not None:
                events = conn.execute(
                    "SELECT kind, detail FROM call_events WHERE call_id = ? ORDER BY at",
                    (row["id"],),
                ).fetchall()
                return dict(row), [dict(e) for e in events]
        assert time.monotonic() < deadline, f"call {sip_call_id} not closed in the call log"
        time.sleep(0.2)


def only_call_id(bot: BotProcess, since: int) -> str:
    ids = {r["call_id"] for r in bot.records("turn", since=since)}
    assert len(ids) == 1, ids
    return ids.pop()


async def test_goodbye_is_answered_then_the_bot_hangs_up(
    bot: BotProcess, listener: Listener
) -> None:
    profile = load_profile(DEFAULT_PROFILE)
    answer = next(i.answer for i in profile.intents if i.name == "goodbye")
    first_line = len(bot.lines)
    result = await dial(
        bot.uri, play=speak(GOODBYE, voice="slt"), play_at_s=LEAD_S, record_seconds=40
    )
    assert result.sip_final_status == 200, result.error
    assert result.ended_by_remote, "the bot did not end the call"
    assert len(result.received) < 40 * RATE  # ...well before the dialer would have

    # The caller heard the whole answer before the BYE.
    spoke = segments(voiced_frames(result.sent), max_gap_ms=600)
    assert len(spoke) == 1, spoke
    end = (spoke[0][1] + 1) * FRAME_MS * RATE // 1000
    heard = await listener.hear(result.received[end:])
    assert word_error_rate(answer, heard) <= 0.35, heard

    turns = bot.records("turn", since=first_line)
    assert [t["intent"] for t in turns] == ["goodbye"], turns
    row, events = await asyncio.to_thread(call_log, bot, only_call_id(bot, first_line))
    assert row["end_reason"] == "bot_hangup"
    assert [e["kind"] for e in events if e["kind"] != "barge_in"] == []


def ulaw_wav(pcm: bytes, path: Path) -> Path:
    """Write 8 kHz PCM as a mu-law WAV, the format sipp streams."""
    sox = shutil.which("sox")
    assert sox is not None, "sox is needed to make the caller's audio"
    pcm_wav = path.with_suffix(".pcm.wav")
    write_wav(pcm_wav, pcm)
    subprocess.run([sox, str(pcm_wav), "-e", "mu-law", str(path)], check=True, timeout=30)
    return path


async def test_talk_to_a_person_is_transferred_by_refer(bot: BotProcess, tmp_path: Path) -> None:
    profile = load_profile(DEFAULT_PROFILE)
    person = next(i for i in profile.intents if i.name == "talk_to_person")
    assert person.action == "transfer" and person.transfer_to is not None
    silence = bytes(int(LEAD_S * RATE) * 2)
    utterance = await asyncio.to_thread(speak, PERSON, "slt")
    yes = await asyncio.to_thread(speak, "Yes, please.", "slt")
    # Where the bot was unsure of what it heard (a loaded machine's recognizer can lose a
    # word), it asks before it transfers: the caller says yes once the question is over.
    # Transferred at once, the REFER comes while the rest of the audio plays.
    pcm = silence + utterance + bytes(CONFIRM_S * RATE * 2) + yes + bytes(3 * RATE * 2)
    audio = await asyncio.to_thread(ulaw_wav, pcm, tmp_path / "caller.wav")
    # The caller's phone: places the call, says it wants a person, accepts the REFER
    # (202), reports the target's answer (NOTIFY, "SIP/2.0 200 OK"), and expects the BYE.
    xml = scenario(
        INVITE_STREAMING,
        ANSWERED_ALONG_ROUTE,
        stream(audio),
        refer_received(60_000),
        refer_response(202, "Accepted"),
        refer_notify("SIP/2.0 200 OK"),
        ANSWER_BYE,
    )
    first_line = len(bot.lines)
    run = await run_sipp(xml, bot.port, tmp_path / "sipp", timeout_s=90)
    assert run.ok, f"{run.stdout}{run.errors}\nturns: {bot.heard_turns(first_line)}"
    assert logged_refer_to(run.workdir) == [person.transfer_to]

    turns = bot.records("turn", since=first_line)
    # The request's turn: transferred at once, or asked about (a yes then transfers).
    assert turns and turns[0]["intent"] == "talk_to_person", bot.heard_turns(first_line)
    assert len(turns) == (2 if turns[0]["route"] == "confirm" else 1), bot.heard_turns(first_line)
    row, events = await asyncio.to_thread(call_log, bot, only_call_id(bot, first_line))
    assert row["end_reason"] == "transferred"
    said = [(e["kind"], e["detail"]) for e in events if e["kind"] not in ("barge_in", "filler")]
    assert said == [("transfer", person.transfer_to)]


async def test_a_declined_transfer_is_apologised_for_and_the_call_goes_on(
    bot: BotProcess, listener: Listener
) -> None:
    profile = load_profile(DEFAULT_PROFILE)
    person = next(i for i in profile.intents if i.name == "talk_to_person")
    assert profile.transfer_failed is not None
    first_line = len(bot.lines)
    # Our dialer declines every REFER (603): the bot must say so and stay on the call.
    result = await dial(
        bot.uri, play=speak(PERSON, voice="slt"), play_at_s=LEAD_S, record_seconds=32
    )
    assert result.sip_final_status == 200, result.error
    assert [t.strip("<>") for t in result.transfer_requests] == [person.transfer_to], (
        bot.heard_turns(first_line)
    )
    assert not result.ended_by_remote, "the bot left the call after a declined transfer"

    spoke = segments(voiced_frames(result.sent), max_gap_ms=600)
    assert len(spoke) == 1, spoke
    end = (spoke[0][1] + 1) * FRAME_MS * RATE // 1000
    heard = await listener.hear(result.received[end:])
    expected = f"{person.answer} {profile.transfer_failed}"
    assert word_error_rate(expected, heard) <= 0.35, heard

    row, events = await asyncio.to_thread(call_log, bot, only_call_id(bot, first_line))
    assert row["end_reason"] not in ("transferred", "bot_hangup"), row
    assert [(e["kind"], e["detail"]) for e in events if e["kind"] != "barge_in"] == [
        ("transfer", person.transfer_to),
        ("transfer_failed", "603 Decline"),
    ]
