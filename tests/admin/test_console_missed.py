"""The console's Missed questions page: what callers asked that the bot did not answer,
the most calls affected first (then the most turns); an editor picks one and adds it as
an example of an intent or a question of a knowledge entry (a new configuration version,
audited) and it drops out of the list. In a real headless Chromium at a laptop and a
phone width; screenshots in test-artifacts/console/."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from playwright.async_api import Browser, Page, expect
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.admin import test_console, test_console_config
from tests.admin.conftest import add_user
from tests.admin.test_console import CHROMIUM, VIEWPORTS, _log_in, _shot
from tests.admin.test_missed_questions import MIN, add_turns

# The console's server, browser and logged-in page, as test_console_config.py makes them.
admin_db_url = test_console.admin_db_url
recordings = test_console.recordings
console = test_console.console
browser = test_console.browser
api = test_console_config.api
page = test_console_config.page

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")


@pytest.mark.parametrize("viewport", ["laptop", "phone"])
async def test_a_missed_question_is_added_as_an_example(
    page: Page, console: str, admin_engine: AsyncEngine, api: httpx.AsyncClient, viewport: str
) -> None:
    await add_turns(
        admin_engine,
        [
            ("Do you sell gift cards?", "fallback", None, 30 * MIN),
            ("do you sell gift cards", "fallback", None, 20 * MIN),
            ("Can I pay by invoice?", "confirm", "opening_hours", 10 * MIN),
            ("Is there parking near the shop?", "fallback", None, 5 * MIN),
            ("do you sell gift cards", "fallback", None, 4 * MIN),
        ],
    )
    # Another caller asks about parking: two calls, ahead of one caller's three turns.
    await add_turns(admin_engine, [("Is there parking near the shop?", "fallback", None, MIN)])
    await page.click("nav a[data-page=missed]")
    rows = page.locator("#missed tbody tr")
    await expect(rows).to_have_count(3)
    await expect(rows.first.locator("td[data-label='Caller said']")).to_have_text(
        "Is there parking near the shop?"
    )
    await expect(rows.first.locator("td[data-label=Calls]")).to_have_text("2 calls")
    await expect(rows.first.locator("td[data-label=Times]")).to_have_text("2")
    gift = rows.nth(1)
    await expect(gift.locator("td[data-label='Caller said']")).to_have_text(
        "do you sell gift cards"
    )
    await expect(gift.locator("td[data-label=Calls]")).to_have_text("1 call")
    await expect(gift.locator("td[data-label=Times]")).to_have_text("3")
    width = VIEWPORTS[viewport]["width"]
    for title in ("Caller said", "Calls", "Times", "Last", "Bot", "Nearest"):
        box = await rows.first.locator(f"td[data-label='{title}']").bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width + 0.5
    await _shot(page, f"{viewport}-missed")
    version = (await api.get("/config/settings")).json()["config_version"]

    # The invoice question: the bot asked about opening hours, chosen already.
    row = page.locator("#missed tr:has(td:text-is('Can I pay by invoice?'))")
    await row.locator("button.suggest").click()
    form = page.locator(".suggest-form")
    await expect(form).to_be_visible()
    await expect(page.locator("#m-target")).to_have_value("intent:opening_hours")
    await expect(page.locator("#m-text")).to_have_value("Can I pay by invoice?")
    # Cancel sends nothing.
    await form.locator("button.cancel").click()
    await expect(form).to_have_count(0)
    assert (await api.get("/config/settings")).json()["config_version"] == version

    # Gift cards, to a knowledge entry, the words edited first.
    row = page.locator("#missed tr:has(td:text-is('do you sell gift cards'))")
    await row.locator("button.suggest").click()
    await page.fill("#m-text", "Do you sell gift cards?")
    await page.select_option("#m-target", "knowledge:returns")
    await _shot(page, f"{viewport}-missed-suggest")
    drawn = await page.query_selector("#missed")
    await form.locator("button[type=submit]").click()
    await page.wait_for_function("(el) => !el.isConnected", arg=drawn)
    await expect(page.locator("#missed tbody tr")).to_have_count(2)
    await expect(page.locator("#missed")).not_to_contain_text("gift cards")
    held = (await api.get("/config/knowledge/returns")).json()
    assert held["questions"] == ["How do I return something?", "Do you sell gift cards?"]
    assert held["config_version"] == version + 1
    (entry,) = (await api.get("/audit", params={"limit": 1})).json()["items"]
    assert (entry["action"], entry["target"], entry["actor"]) == (
        "knowledge.update",
        "knowledge:returns",
        "user:ada",
    )
    assert await page.evaluate("document.documentElement.scrollWidth") <= width
    assert test_console_config._problems(page) == []


async def test_a_viewer_sees_missed_questions_without_suggesting(
    browser: Browser, console: str, admin_engine: AsyncEngine
) -> None:
    await add_user(admin_engine, "vic", "viewer")
    await add_turns(admin_engine, [("Do you deliver on Sundays?", "fallback", None, MIN)])
    context = await browser.new_context(viewport=VIEWPORTS["laptop"])  # type: ignore[arg-type]
    try:
        viewer = await context.new_page()
        await _log_in(viewer, console, "vic", "viewer")
        await viewer.goto(console + "/console/#/missed")
        await expect(viewer.locator("#missed")).to_contain_text("Do you deliver on Sundays?")
        await expect(viewer.locator("button.suggest")).to_have_count(0)
    finally:
        await context.close()


@pytest.mark.parametrize("viewport", ["laptop", "phone"])
async def test_a_knowledge_entry_is_started_from_a_missed_question(
    page: Page, console: str, admin_engine: AsyncEngine, api: httpx.AsyncClient, viewport: str
) -> None:
    await add_turns(
        admin_engine,
        [
            ("Do you repair bikes?", "fallback", None, timedelta(days=40)),
            ("Is there parking near the shop?", "fallback", None, 5 * MIN),
            ("No", "fallback", None, 4 * MIN),
        ],
    )
    await page.click("nav a[data-page=missed]")
    rows = page.locator("#missed tbody tr")
    # "No" answered nothing asked: it is a caller's words like any other here.
    await expect(rows).to_have_count(2)
    await expect(page.locator("#missed-grouping")).to_have_text(
        "grouped by words (no sentence embedder here)"
    )
    # Further back: the days selector.
    await page.select_option("#missed-days", "90")
    await expect(rows).to_have_count(3)
    await expect(page.locator("#missed")).to_contain_text("Do you repair bikes?")
    await page.select_option("#missed-days", "7")
    await expect(rows).to_have_count(2)
    version = (await api.get("/config/settings")).json()["config_version"]

    row = page.locator("#missed tr:has(td:text-is('Is there parking near the shop?'))")
    await row.locator("button.new-entry").click()
    form = page.locator(".knowledge-form")
    await expect(form).to_be_visible()
    await expect(page.locator("#k-questions")).to_have_value("Is there parking near the shop?")
    await page.fill("#k-topic", "parking")
    await page.fill("#k-answer", "There is free parking behind the shop.")
    width = VIEWPORTS[viewport]["width"]
    assert await page.evaluate("document.documentElement.scrollWidth") <= width
    await _shot(page, f"{viewport}-missed-new-entry")
    drawn = await page.query_selector("#missed")
    await form.locator("button[type=submit]").click()
    await page.wait_for_function("(el) => !el.isConnected", arg=drawn)
    await expect(page.locator("#missed tbody tr")).to_have_count(1)
    await expect(page.locator("#missed")).not_to_contain_text("parking")
    held = (await api.get("/config/knowledge/parking")).json()
    assert held["questions"] == ["Is there parking near the shop?"]
    assert held["answer"] == "There is free parking behind the shop."
    assert held["config_version"] == version + 1
    (entry,) = (await api.get("/audit", params={"limit": 1})).json()["items"]
    assert (entry["action"], entry["target"], entry["actor"]) == (
        "knowledge.create",
        "knowledge:parking",
        "user:ada",
    )
    assert test_console_config._problems(page) == []
