"""The configuration API: versions, validation before writing, roles and the audit trail."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.config.store import seed
from bot.profile import BotProfile
from tests.admin.conftest import add_token, bearer, error_text

PROFILE = BotProfile.model_validate(
    {
        "name": "Test Shop",
        "greeting": "Hello, test shop.",
        "apology": "Sorry, again please?",
        "system_prompt": "You are a test.",
        "fillers": ["One moment."],
        "intents": [
            {
                "name": "opening_hours",
                "examples": ["When are you open?", "What are your hours?"],
                "answer": "We are open nine to five.",
            }
        ],
        "knowledge": [
            {
                "topic": "returns",
                "questions": ["How do I return something?"],
                "answer": "You can return items within 30 days.",
            }
        ],
    }
)


@pytest.fixture
async def editor(admin_engine: AsyncEngine) -> dict[str, str]:
    await seed(admin_engine, PROFILE, "profile:test.toml")
    return bearer(await add_token(admin_engine, "ed", "editor"))


async def test_settings_change_makes_a_new_version_and_an_audit_entry(
    client: httpx.AsyncClient, admin_engine: AsyncEngine, editor: dict[str, str]
) -> None:
    got = (await client.get("/api/v1/config/settings", headers=editor)).json()
    assert (got["config_version"], got["greeting"]) == (1, "Hello, test shop.")
    r = await client.patch(
        "/api/v1/config/settings",
        json={"greeting": "Welcome to the test shop.", "intent_matching": {"threshold": 0.6}},
        headers=editor,
    )
    assert r.status_code == 200, r.text
    new = r.json()
    assert new["config_version"] == 2 and new["greeting"] == "Welcome to the test shop."
    # Only the field given changed inside the section.
    assert new["intent_matching"]["threshold"] == 0.6
    assert new["intent_matching"]["margin"] == PROFILE.intent_matching.margin
    versions = (await client.get("/api/v1/config/versions", headers=editor)).json()
    assert [v["version"] for v in versions["items"]] == [2, 1]
    assert versions["items"][0]["created_by"] == "token:ed-ci (ed)"
    old = (await client.get("/api/v1/config/versions/1", headers=editor)).json()
    assert old["greeting"] == "Hello, test shop."

    admin = bearer(await add_token(admin_engine, "root", "admin"))
    audit = (await client.get("/api/v1/audit", headers=admin)).json()["items"]
    change = next(e for e in audit if e["action"] == "settings.update")
    assert change["before"]["greeting"] == "Hello, test shop."
    assert change["after"]["greeting"] == "Welcome to the test shop."


async def test_bad_changes_are_refused_before_they_are_written(
    client: httpx.AsyncClient, editor: dict[str, str]
) -> None:
    r = await client.patch(
        "/api/v1/config/settings", json={"intent_matching": {"threshold": 1.5}}, headers=editor
    )
    assert r.status_code == 422
    problem = r.json()["detail"][0]
    assert problem["loc"] == ["profile", "intent_matching", "threshold"]
    assert "less than or equal to 1" in problem["msg"]

    clash = {
        "name": "hours_again",
        "examples": ["when are you OPEN"],  # the same words as opening_hours' first example
        "answer": "Nine to five.",
    }
    r = await client.post("/api/v1/config/intents", json=clash, headers=editor)
    assert r.status_code == 422
    assert "belongs to both 'opening_hours' and 'hours_again'" in r.json()["detail"][0]["msg"]

    r = await client.post(
        "/api/v1/config/intents",
        json={"name": "Bad Name", "examples": [], "answer": ""},
        headers=editor,
    )
    assert r.status_code == 422
    fields = {e["loc"][-1] for e in r.json()["detail"]}
    assert {"name", "examples", "answer"} <= fields

    r = await client.patch(
        "/api/v1/config/intents/opening_hours", json={"action": "transfer"}, headers=editor
    )
    assert r.status_code == 422
    assert "needs transfer_to" in r.json()["detail"][0]["msg"]
    # Nothing of it was written.
    versions = (await client.get("/api/v1/config/versions", headers=editor)).json()
    assert versions["total"] == 1


async def test_intents_and_knowledge_crud(
    client: httpx.AsyncClient, admin_engine: AsyncEngine, editor: dict[str, str]
) -> None:
    intent = {
        "name": "speak_to_agent",
        "examples": ["Can I talk to a person?", "Put me through to someone"],
        "negatives": ["I do not want a person"],
        "answer": "Putting you through.",
        "action": "transfer",
        "transfer_to": "sip:agents@pbx.example.com",
    }
    r = await client.post("/api/v1/config/intents", json=intent, headers=editor)
    assert r.status_code == 201, r.text
    assert r.json()["config_version"] == 2
    assert (
        await client.post("/api/v1/config/intents", json=intent, headers=editor)
    ).status_code == 409
    r = await client.patch(
        "/api/v1/config/intents/speak_to_agent", json={"answer": "One moment."}, headers=editor
    )
    assert r.json()["answer"] == "One moment." and r.json()["config_version"] == 3
    names = [
        i["name"]
        for i in (await client.get("/api/v1/config/intents", headers=editor)).json()["items"]
    ]
    assert names == ["opening_hours", "speak_to_agent"]
    assert (
        await client.delete("/api/v1/config/intents/speak_to_agent", headers=editor)
    ).status_code == 204
    assert (
        await client.get("/api/v1/config/intents/speak_to_agent", headers=editor)
    ).status_code == 404

    r = await client.patch(
        "/api/v1/config/knowledge/returns", json={"answer": "Returns: 60 days."}, headers=editor
    )
    assert r.status_code == 200 and r.json()["answer"] == "Returns: 60 days."
    entry = {
        "topic": "shipping",
        "questions": ["Do you ship abroad?"],
        "answer": "We ship to the EU.",
    }
    assert (
        await client.post("/api/v1/config/knowledge", json=entry, headers=editor)
    ).status_code == 201
    r = await client.post(
        "/api/v1/config/knowledge", json={**entry, "topic": "x", "answer": "  "}, headers=editor
    )
    assert r.status_code == 422
    assert (
        await client.delete("/api/v1/config/knowledge/returns", headers=editor)
    ).status_code == 204
    topics = [
        e["topic"]
        for e in (await client.get("/api/v1/config/knowledge", headers=editor)).json()["items"]
    ]
    assert topics == ["shipping"]

    viewer = bearer(await add_token(admin_engine, "vic", "viewer"))
    assert (await client.get("/api/v1/config/intents", headers=viewer)).status_code == 200
    r = await client.delete("/api/v1/config/intents/opening_hours", headers=viewer)
    assert r.status_code == 403
    # Without a node, there is nothing to try words on.
    r = await client.post("/api/v1/config/try", json={"text": "when are you open"}, headers=viewer)
    assert r.status_code == 503
    assert (await client.get("/api/v1/config/matching", headers=viewer)).status_code == 503


async def test_no_configuration_yet_says_how_to_get_one(
    client: httpx.AsyncClient, admin_engine: AsyncEngine
) -> None:
    auth = bearer(await add_token(admin_engine, "vic", "viewer"))
    r = await client.get("/api/v1/config/settings", headers=auth)
    assert r.status_code == 404
    assert "import-profile" in error_text(r)


async def test_a_nul_character_in_the_configuration_is_refused(
    client: httpx.AsyncClient, editor: dict[str, str]
) -> None:
    r = await client.patch(
        "/api/v1/config/settings", json={"greeting": "Hello\x00there"}, headers=editor
    )
    assert r.status_code == 422, r.text
    r = await client.post(
        "/api/v1/config/knowledge",
        json={"topic": "nul", "questions": ["what\x00"], "answer": "None."},
        headers=editor,
    )
    assert r.status_code == 422, r.text


async def test_every_section_an_operator_tunes_is_read_and_changed_through_the_api(
    client: httpx.AsyncClient, admin_engine: AsyncEngine, editor: dict[str, str]
) -> None:
    got = (await client.get("/api/v1/config/settings", headers=editor)).json()
    for key in ("small_talk", "recording", "call_limits", "transfer_hold", "handoff_summary"):
        assert key in got, key
    r = await client.patch(
        "/api/v1/config/settings",
        json={
            "small_talk": {"greeting": "Hi, Test Shop here. What can I do for you?"},
            "recording": {"enabled": True, "announcement": "This call is recorded."},
            "transfer_hold": "Hold on, putting you through.",
        },
        headers=editor,
    )
    assert r.status_code == 200, r.text
    new = r.json()
    assert new["small_talk"]["greeting"] == "Hi, Test Shop here. What can I do for you?"
    assert new["small_talk"]["thanks"] == PROFILE.small_talk.thanks  # the rest kept
    assert new["recording"] == {"enabled": True, "announcement": "This call is recorded."}
    assert new["transfer_hold"] == "Hold on, putting you through."
    r = await client.patch(
        "/api/v1/config/settings", json={"small_talk": {"greeting": 5}}, headers=editor
    )
    assert r.status_code == 422, r.text


async def test_an_intents_and_an_entrys_confirmation_question_can_be_changed(
    client: httpx.AsyncClient, admin_engine: AsyncEngine, editor: dict[str, str]
) -> None:
    question = "Would you like our opening hours?"
    r = await client.patch(
        "/api/v1/config/intents/opening_hours", json={"confirm": question}, headers=editor
    )
    assert r.status_code == 200, r.text
    assert r.json()["confirm"] == question
    got = (await client.get("/api/v1/config/intents/opening_hours", headers=editor)).json()
    assert got["confirm"] == question and got["answer"] == "We are open nine to five."
    r = await client.patch(
        "/api/v1/config/knowledge/returns",
        json={"confirm": "Do you want to know how returns work?"},
        headers=editor,
    )
    assert r.status_code == 200, r.text
    assert r.json()["confirm"] == "Do you want to know how returns work?"


async def test_an_intents_and_an_entrys_topic_can_be_written_and_left_to_be_derived(
    client: httpx.AsyncClient, admin_engine: AsyncEngine, editor: dict[str, str]
) -> None:
    url = "/api/v1/config/intents/opening_hours"
    got = (await client.get(url, headers=editor)).json()
    assert (got["topic"], got["topic_in_use"]) == (None, "our opening hours")  # derived
    r = await client.patch(url, json={"topic": "  when  we are open "}, headers=editor)
    assert r.status_code == 200, r.text
    assert (r.json()["topic"], r.json()["topic_in_use"]) == ("when we are open",) * 2
    got = (await client.get(url, headers=editor)).json()
    assert got["topic"] == "when we are open" and got["answer"] == "We are open nine to five."
    # Too long, or a sentence: refused with the reason, nothing written.
    for topic, reason in [
        ("when you are open on weekdays and at weekends", "at most 6 words"),
        ("are you open?", "not a sentence"),
    ]:
        r = await client.patch(url, json={"topic": topic}, headers=editor)
        assert r.status_code == 422, r.text
        assert reason in error_text(r)
    versions = (await client.get("/api/v1/config/versions", headers=editor)).json()
    assert versions["total"] == 2
    # null: derived again.
    r = await client.patch(url, json={"topic": None}, headers=editor)
    assert r.status_code == 200, r.text
    assert (r.json()["topic"], r.json()["topic_in_use"]) == (None, "our opening hours")
    # A new intent's topic is checked as it is created.
    new = {"name": "refund", "examples": ["Where is my refund?"], "answer": "Five days."}
    r = await client.post(
        "/api/v1/config/intents", json={**new, "topic": "a b c d e f g"}, headers=editor
    )
    assert r.status_code == 422 and "at most 6 words" in error_text(r)
    r = await client.post("/api/v1/config/intents", json=new, headers=editor)
    assert r.status_code == 201 and r.json()["topic_in_use"] == "your refund", r.text
    # A knowledge entry's is its ``about``.
    url = "/api/v1/config/knowledge/returns"
    assert (await client.get(url, headers=editor)).json()["about_in_use"] == "returns"
    r = await client.patch(url, json={"about": "sending something back"}, headers=editor)
    assert r.status_code == 200, r.text
    assert r.json()["about"] == r.json()["about_in_use"] == "sending something back"
    r = await client.patch(url, json={"about": "x" * 81}, headers=editor)
    assert r.status_code == 422, r.text
