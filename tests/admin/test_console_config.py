"""The console's Settings page against the API's own schema, the intent editor opening in
place (with the confirmation question and Cancel), and the Calls and Audit pages keeping
every column on a phone; in a real headless Chromium at a laptop and a phone width, each
step checked against what the API then holds. Screenshots: test-artifacts/console/."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, Page, expect
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.admin import test_console
from tests.admin.conftest import add_call, add_token, bearer
from tests.admin.test_console import CHROMIUM, VIEWPORTS, _log_in, _shot

# The console's server and browser, as test_console.py makes them.
admin_db_url = test_console.admin_db_url
recordings = test_console.recordings
console = test_console.console
browser = test_console.browser

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")


@pytest.fixture
async def api(console: str, admin_engine: AsyncEngine) -> AsyncIterator[httpx.AsyncClient]:
    """The same server's API with an admin's token: what the clicks left behind."""
    token = await add_token(admin_engine, "checker", "admin")
    async with httpx.AsyncClient(
        base_url=console + "/api/v1", headers=bearer(token), timeout=10
    ) as client:
        yield client


@pytest.fixture
async def page(
    browser: Browser, console: str, request: pytest.FixtureRequest
) -> AsyncIterator[Page]:
    """A logged-in admin's page at the test's viewport; fails the test on any page error."""
    viewport = request.node.callspec.params.get("viewport", "laptop")
    context = await browser.new_context(viewport=VIEWPORTS[viewport])  # type: ignore[arg-type]
    page = await context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("dialog", lambda d: d.accept())
    try:
        await _log_in(page, console)
        problems.clear()  # the browser reports the first /auth/me's 401 itself
        page.problems = problems  # type: ignore[attr-defined]
        yield page
    finally:
        await context.close()


def _problems(page: Page) -> list[str]:
    return page.problems  # type: ignore[attr-defined,no-any-return]


def schema_paths(doc: dict[str, Any], model: str) -> set[str]:
    """The settings in ``model`` (SettingsUpdate: what PATCH /config/settings accepts;
    SettingsRead: what GET shows) as the page names them: a field, or a section's field
    (``llm.temperature``), a section's fields from SettingsRead."""
    schemas = doc["components"]["schemas"]

    def resolved(s: dict[str, Any]) -> dict[str, Any]:
        for alt in s.get("anyOf", [s]):
            if "$ref" in alt:
                return dict(schemas[alt["$ref"].split("/")[-1]])
            if alt.get("type") != "null":
                return dict(alt)
        return {}

    read = schemas["SettingsRead"]["properties"]
    paths: set[str] = set()
    for key in schemas[model]["properties"]:
        section = resolved(read.get(key, {}))
        if section.get("type") == "object" and "properties" in section:
            paths |= {f"{key}.{sub}" for sub in section["properties"]}
        elif key != "config_version":
            paths.add(key)
    return paths


async def _columns_reachable(page: Page, holder: str, width: int) -> None:
    """Each column of the table's first row is shown, inside the page's width."""
    titles = [t for t in await page.locator(f"{holder} th").all_inner_texts() if t.strip()]
    assert titles, holder
    row = page.locator(f"{holder} tbody tr").first
    for title in titles:
        cell = row.locator(f"td[data-label='{title}']")
        await expect(cell).to_be_visible()
        box = await cell.bounding_box()
        assert box is not None and box["width"] > 0, title
        assert box["x"] >= 0 and box["x"] + box["width"] <= width + 0.5, (title, box)


@pytest.mark.parametrize("viewport", ["laptop", "phone"])
async def test_settings_page_covers_every_setting_the_api_accepts(
    page: Page, console: str, api: httpx.AsyncClient, viewport: str
) -> None:
    await page.goto(console + "/console/#/settings")
    await expect(page.locator("#settings-form")).to_contain_text("Configuration version 1")
    doc = (await api.get("/openapi.json")).json()
    names = "els => els.map(e => e.name)"
    # Every setting the API accepts has an input; one it shows but does not accept, a
    # read-only one.
    writable = schema_paths(doc, "SettingsUpdate")
    shown = set(await page.locator("[data-setting]:enabled").evaluate_all(names))
    assert shown == writable, (writable - shown, shown - writable)
    read_only = schema_paths(doc, "SettingsRead") - writable
    assert set(await page.locator("[data-setting]:disabled").evaluate_all(names)) == read_only
    for path in ("name", "transfer_failed", "llm.temperature", "filler_every_ms"):
        assert path in shown  # the ones the issue found missing
    before = (await api.get("/config/settings")).json()

    await page.fill("[data-setting='name']", "Console Shop")
    await page.fill("[data-setting='transfer_failed']", "Sorry, nobody is free right now.")
    await page.fill("[data-setting='transfer_timeout_s']", "12.5")
    await page.fill("[data-setting='fillers']", "One moment.\nLet me check.")
    await page.fill("[data-setting='filler_every_ms']", "1500")
    await page.fill("[data-setting='llm.temperature']", "0.7")
    await page.fill("[data-setting='llm.max_tokens']", "80")
    await page.uncheck("[data-setting='endpointing.early_end']")
    await page.fill("[data-setting='endpointing.hold_reply']", "")
    await page.fill("[data-setting='intent_matching.confirm_threshold']", "0.4")
    await page.click("#settings-save")
    await expect(page.locator("#settings-form")).to_contain_text("Configuration version 2")
    held = (await api.get("/config/settings")).json()
    assert held["name"] == "Console Shop"
    assert held["transfer_failed"] == "Sorry, nobody is free right now."
    assert held["transfer_timeout_s"] == 12.5
    assert held["fillers"] == ["One moment.", "Let me check."]
    assert held["filler_every_ms"] == 1500
    assert (held["llm"]["temperature"], held["llm"]["max_tokens"]) == (0.7, 80)
    assert held["llm"]["history_turns"] == before["llm"]["history_turns"]
    assert held["endpointing"]["early_end"] is False
    assert held["endpointing"]["hold_reply"] is None
    assert held["intent_matching"]["confirm_threshold"] == 0.4
    assert held["greeting"] == before["greeting"]
    # The change sent (and audited) is what changed, nothing else.
    entry = (await api.get("/audit", params={"limit": 1})).json()["items"][0]
    assert entry["action"] == "settings.update"
    assert entry["after"] == {
        "name": "Console Shop",
        "transfer_failed": "Sorry, nobody is free right now.",
        "transfer_timeout_s": 12.5,
        "fillers": ["One moment.", "Let me check."],
        "filler_every_ms": 1500,
        "llm": {"temperature": 0.7, "max_tokens": 80},
        "endpointing": {"early_end": False, "hold_reply": None},
        "intent_matching": {"confirm_threshold": 0.4},
    }
    # A value the browser cannot check (the direct score below the retrieval score): the
    # API's refusal is shown and nothing is stored.
    await page.fill("[data-setting='knowledge_matching.direct_score']", "0.2")
    await page.click("#settings-save-top")
    await expect(page.locator("#settings-error")).to_contain_text("direct_score")
    assert (await api.get("/config/settings")).json()["config_version"] == 2
    # One out of the API's bounds that the browser lets through (it must be above 0): the
    # field the API names is marked.
    await page.fill("[data-setting='knowledge_matching.direct_score']", "0.65")
    await page.fill("[data-setting='transfer_timeout_s']", "0")
    await page.click("#settings-save")
    await expect(page.locator("#settings-error")).to_contain_text("transfer_timeout_s")
    await expect(page.locator("[data-setting='transfer_timeout_s']")).to_have_class("invalid")
    assert (await api.get("/config/settings")).json()["config_version"] == 2
    _problems(page).clear()  # the refused request's 422
    await page.reload()
    await expect(page.locator("#settings-form")).to_contain_text("Configuration version 2")
    await _shot(page, f"{viewport}-settings-all")
    width = await page.evaluate("document.documentElement.scrollWidth")
    assert width <= VIEWPORTS[viewport]["width"], width
    assert _problems(page) == []


@pytest.mark.parametrize("viewport", ["laptop", "phone"])
async def test_the_intent_editor_opens_in_place(
    page: Page, console: str, api: httpx.AsyncClient, viewport: str
) -> None:
    for n in range(12):  # a long list: the last intent's row is far down the page
        r = await api.post(
            "/config/intents",
            json={"name": f"topic_{n:02d}", "examples": [f"question number {n}"], "answer": "Yes."},
        )
        assert r.status_code == 201, r.text
    await page.goto(console + "/console/#/intents")
    row = "#intents tr:has(td[data-label=Name]:text-is('topic_11'))"
    await page.click(f"{row} button.edit")
    form = page.locator(".intent-form")
    await expect(form).to_have_count(1)
    await expect(form.locator("h2")).to_have_text("Edit topic_11")
    # Right below the row whose button was pressed, and on screen.
    r_box = await page.locator(row).bounding_box()
    f_box = await form.bounding_box()
    view = page.viewport_size
    assert r_box is not None and f_box is not None and view is not None
    assert r_box["y"] + r_box["height"] - 1 <= f_box["y"] <= r_box["y"] + r_box["height"] + 40
    assert 0 <= f_box["y"] < view["height"] - 100, (f_box, view)
    await expect(page.locator("#i-examples")).to_be_focused()
    await expect(page.locator("#i-confirm")).to_be_visible()
    # The topic: none written, the derived one shown as the field's placeholder and hint.
    topic = page.locator("#i-topic")
    await expect(topic).to_have_value("")
    await expect(topic).to_have_attribute("placeholder", "number")  # of "question number 11"
    await expect(form.locator("label[for=i-topic]")).to_contain_text('derived: "number"')
    await expect(page.locator(f"{row} td[data-label=Topic]")).to_have_text("number (derived)")

    # Cancel: the form goes, nothing is sent.
    version = (await api.get("/config/settings")).json()["config_version"]
    await page.fill("#i-answer", "Changed and then cancelled.")
    await page.click(".intent-form button.cancel")
    await expect(form).to_have_count(0)
    held = (await api.get("/config/intents/topic_11")).json()
    assert (held["answer"], held["config_version"]) == ("Yes.", version)

    # Edit and save.
    await page.click(f"{row} button.edit")
    await page.fill("#i-answer", "Yes, number eleven.")
    await _shot(page, f"{viewport}-intent-editor")
    await page.click(".intent-form button[type=submit]")
    await expect(form).to_have_count(0)
    await expect(page.locator(row)).to_contain_text("Yes, number eleven.")
    held = (await api.get("/config/intents/topic_11")).json()
    assert (held["answer"], held["config_version"]) == ("Yes, number eleven.", version + 1)

    # A new intent with its confirmation question: the form opens below its button.
    await page.click("#new-intent")
    new_box = await page.locator("#new-intent").bounding_box()
    f_box = await form.bounding_box()
    assert new_box is not None and f_box is not None
    assert new_box["y"] + new_box["height"] <= f_box["y"] <= new_box["y"] + new_box["height"] + 60
    await page.fill("#i-name", "opening_soon")
    await page.fill("#i-examples", "When do you open the new shop?")
    await page.fill("#i-answer", "The new shop opens in March.")
    await page.fill("#i-confirm", "Do you want to know when the new shop opens?")
    await page.fill("#i-topic", "the new   shop")
    await page.click(".intent-form button[type=submit]")
    await expect(page.locator("#intents")).to_contain_text("opening_soon")
    held = (await api.get("/config/intents/opening_soon")).json()
    assert held["confirm"] == "Do you want to know when the new shop opens?"
    assert held["topic"] == "the new shop"
    soon = "#intents tr:has(td[data-label=Name]:text-is('opening_soon'))"
    await expect(page.locator(f"{soon} td[data-label=Topic]")).to_have_text("the new shop")
    # A topic the API refuses: the reason is shown in the form, nothing is saved.
    await page.click(f"{soon} button.edit")
    await expect(page.locator("#i-topic")).to_have_value("the new shop")
    await page.fill("#i-topic", "when does the new shop open its doors")
    await page.click(".intent-form button[type=submit]")
    await expect(page.locator(".intent-form .error")).to_contain_text("at most 6 words")
    assert (await api.get("/config/intents/opening_soon")).json()["topic"] == "the new shop"
    await page.click(".intent-form button.cancel")
    # Changing the question of an existing intent: the console says saved only when the API
    # kept it; an API that does not take the field on PATCH is said so, with the form open.
    await page.click(f"{soon} button.edit")
    await expect(page.locator("#i-confirm")).to_have_value(
        "Do you want to know when the new shop opens?"
    )
    await page.fill("#i-confirm", "Are you asking about the new shop?")
    drawn = await page.query_selector("#knowledge")  # replaced when the page reloads
    await page.click(".intent-form button[type=submit]")
    kept = page.locator(".intent-form .error")
    await page.wait_for_function(  # saved and closed, or an error shown
        "() => !document.querySelector('.intent-form')"
        " || document.querySelector('.intent-form .error').textContent !== ''"
    )
    held = (await api.get("/config/intents/opening_soon")).json()
    if held["confirm"] == "Are you asking about the new shop?":
        await expect(form).to_have_count(0)
        # Saved: the page draws itself again; an Edit pressed before that is redrawn away.
        await page.wait_for_function("(el) => !el.isConnected", arg=drawn)
    else:
        assert held["confirm"] == "Do you want to know when the new shop opens?", held
        await expect(kept).to_contain_text("did not change the confirmation question")
        await page.click(".intent-form button.cancel")
    # Knowledge entries open in place too.
    await page.click("#knowledge tr:has(td[data-label=Topic]:text-is('returns')) button.edit")
    await expect(page.locator(".knowledge-form h2")).to_have_text("Edit returns")
    await expect(page.locator("#k-questions")).to_be_focused()
    await expect(page.locator("#k-about")).to_have_attribute("placeholder", "returns")
    await page.keyboard.press("Escape")  # as Cancel
    await expect(page.locator(".knowledge-form")).to_have_count(0)
    # Without a node the matching card's request is 503 (the card is left out): the browser
    # logs each; and the refused topic's 422 once; nothing else.
    logged = [p for p in _problems(page) if "status of 503" not in p]
    assert len(logged) == 1 and "status of 422" in logged[0], logged


@pytest.mark.parametrize("viewport", ["laptop", "phone"])
async def test_calls_and_audit_keep_every_column(
    page: Page, console: str, admin_engine: AsyncEngine, api: httpx.AsyncClient, viewport: str
) -> None:
    width = VIEWPORTS[viewport]["width"]
    now = datetime.now(UTC)
    await add_call(
        admin_engine,
        caller="sip:+4930111222333@pbx.example.com",
        at=now - timedelta(minutes=3),
        end_reason="caller_hangup",
        turns=[("semantic", 200.0)],
    )
    r = await api.patch("/config/settings", json={"greeting": "Hello from the audit test."})
    assert r.status_code == 200, r.text
    await page.goto(console + "/console/#/calls")
    await expect(page.locator("#call-list")).to_contain_text("caller_hangup")
    await _columns_reachable(page, "#call-list", width)
    await _shot(page, f"{viewport}-calls")
    await page.goto(console + "/console/#/audit")
    await expect(page.locator("#audit")).to_contain_text("settings.update")
    await _columns_reachable(page, "#audit", width)
    await expect(
        page.locator("#audit tbody tr").first.locator("td[data-label=Before]")
    ).to_contain_text("Hello, test shop.")
    await _shot(page, f"{viewport}-audit-columns")
    assert await page.evaluate("document.documentElement.scrollWidth") <= width
    # A page the console does not have is said so, not shown as Live.
    await page.goto(console + "/console/#/nowhere")
    await expect(page.locator("main h1")).to_have_text("No such page")
    assert _problems(page) == []
