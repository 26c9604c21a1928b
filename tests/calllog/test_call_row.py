"""A full SIP call against a real ``switchboard run`` leaves one call row with its turns."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from bot.calllog.models import Call, TurnRow
from bot.calllog.store import make_engine
from bot.profile import DEFAULT_PROFILE
from telephony.dialer import dial
from testkit.botproc import run_bot
from testkit.voices import speak
from tests.calllog.conftest import counts

pytestmark = [pytest.mark.sip, pytest.mark.models]

#: Small talk: what still reaches the LLM (questions the profile covers are answered from
#: its knowledge base, the others with an honest "not sure") when the profile gives it no
#: fixed reply (this test's profile leaves "are you there" to the model).
OPEN_QUESTION = "Hello, is anyone there?"
QUESTION = "Where is my order?"  # an example of the default profile's order_status intent
STAGE_COLUMNS = (
    "speech_end_at",
    "eot_decided_at",
    "transcript_ready_at",
    "route_decided_at",
    "first_token_at",
    "first_audio_out_at",
)


async def test_a_sip_call_leaves_one_call_row_with_turns_and_timings(
    pg_url: str, tmp_path: Path
) -> None:
    env = {"SWITCHBOARD_DATABASE_URL": pg_url, "SWITCHBOARD_DATA_DIR": str(tmp_path)}
    profile = tmp_path / "model_small_talk.toml"
    profile.write_text(DEFAULT_PROFILE.read_text() + '\n[small_talk]\npresence = ""\n')
    with run_bot(env=env, profile=profile) as bot:
        # A frequent intent (answered from the cache), then small talk (the LLM).
        script = [(4.5, speak(QUESTION)), (13.0, speak(OPEN_QUESTION, voice="rms"))]
        result = await dial(bot.uri, script=script, record_seconds=24)
        assert result.sip_final_status == 200
    # The bot has stopped (SIGTERM): whatever it held is committed.

    engine = make_engine(pg_url)
    try:
        got = await counts(engine)
        async with engine.connect() as conn:
            call = (await conn.execute(select(Call.__table__))).mappings().one()
            turns = (
                (await conn.execute(select(TurnRow.__table__).order_by(TurnRow.seq)))
                .mappings()
                .all()
            )
    finally:
        await engine.dispose()
    assert (got.calls, got.open_calls) == (1, 0)
    assert "sip:dialer@" in call["caller"] and "bot@127.0.0.1" in call["callee"]
    # The profile file seeded the empty database's configuration: version 1.
    assert call["config_version"] == "1"
    assert call["answered_at"] <= call["ended_at"]
    assert call["end_reason"]
    assert turns, "no turn rows"
    heard = " ".join(t["transcript"] for t in turns).lower()
    assert "order" in heard, heard
    answered = [t for t in turns if t["answer"]]
    assert answered, turns
    by_route = {t["route"]: t for t in answered}
    assert "llm" in by_route and {"exact", "semantic"} & set(by_route), list(by_route)
    for route, turn in by_route.items():
        times = [turn[c] for c in STAGE_COLUMNS]
        if route == "llm":
            assert all(t is not None for t in times), dict(turn)
        else:  # answered from the cache: no LLM token, but the intent and its score
            assert turn["intent"] and turn["intent_score"] is not None, dict(turn)
            assert turn["first_token_at"] is None
            times = [t for c, t in zip(STAGE_COLUMNS, times, strict=True) if c != "first_token_at"]
            assert all(t is not None for t in times), dict(turn)
        # speech end -> end of turn -> transcript -> ... -> first audio, in order
        assert times == sorted(times), dict(turn)
        assert call["answered_at"] <= times[0] <= call["ended_at"]
