"""Try an utterance in the console of a real node (the default profile, the packaged models)
in a real headless Chromium: each route is shown with its own reason; on the knowledge and
LLM routes the intents' verdict is a line of its own, never the route's reason."""

from __future__ import annotations

import pytest
from playwright.async_api import Page, async_playwright, expect

from bot.calllog.store import make_engine
from testkit.botproc import run_bot
from tests.admin.conftest import PASSWORD, add_user
from tests.admin.test_console import ARTIFACTS, CHROMIUM, VIEWPORTS

pytestmark = [
    pytest.mark.models,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed"),
]


async def _try(page: Page, text: str) -> dict[str, str]:
    await page.fill("#try-text", text)
    await page.click("#try-form button[type=submit]")
    await expect(page.locator("#try-result")).to_have_attribute("data-text", text)
    shown: dict[str, str] = {}
    for part in ("route", "answer", "why", "intents"):
        cell = page.locator(f"#try-{part}")
        shown[part] = await cell.inner_text() if await cell.count() else ""
    return shown


async def test_try_an_utterance_shows_each_routes_own_reason() -> None:
    assert CHROMIUM is not None
    with run_bot() as bot:
        engine = make_engine(f"sqlite+aiosqlite:///{bot.data_dir / 'switchboard.db'}")
        try:
            await add_user(engine, "ada", "admin")
        finally:
            await engine.dispose()
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
            )
            try:
                for viewport in ("laptop", "phone"):
                    context = await browser.new_context(viewport=VIEWPORTS[viewport])  # type: ignore[arg-type]
                    page = await context.new_page()
                    await page.goto(bot.admin_url + "/")
                    await page.fill("#login-name", "ada")
                    await page.fill("#login-password", PASSWORD)
                    await page.click("#login-form button[type=submit]")
                    await page.click("nav a[data-page=intents]")
                    await expect(page.locator("#matching")).to_be_visible()

                    # An intent's words: the intent route, with the intent as its reason.
                    got = await _try(page, "where is my order")
                    assert got["route"] == "exact", got
                    assert "order_status" in got["why"], got
                    assert got["answer"].startswith("You can follow your order"), got
                    assert got["intents"] == "", got

                    # A knowledge route: the entry is the reason; the nearest intent (held
                    # back by a negative example) is its own line, not the route's reason.
                    got = await _try(page, "can I pay with paypal")
                    assert got["route"] == "knowledge", got
                    assert "payment_methods" in got["why"], got
                    assert "negative" not in got["why"] and "intent" not in got["why"], got
                    assert "PayPal" in got["answer"], got
                    assert "not used" in got["intents"], got
                    ARTIFACTS.mkdir(parents=True, exist_ok=True)
                    await page.screenshot(
                        path=str(ARTIFACTS / f"{viewport}-try.png"), full_page=False
                    )

                    # The docs' example: an intent held back, the language model answers.
                    got = await _try(page, "where is my parcel")
                    assert got["route"] == "llm", got
                    assert "language model" in got["why"] and "order_status" not in got["why"]
                    assert "order_status" in got["intents"], got
                    assert "negative" in got["intents"], got
                    await context.close()
            finally:
                await browser.close()
