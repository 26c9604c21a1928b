"""Try an utterance in the console of a real node (its own profile, the packaged models) in a
real headless Chromium: each route is shown with its own reason; on the knowledge and LLM
routes the intents' verdict is a line of its own, never the route's reason. What the console
shows is compared with the API's own answer for the same words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Page, async_playwright, expect

from bot.calllog.store import make_engine
from testkit.botproc import run_bot
from tests.admin.conftest import PASSWORD, add_token, add_user, bearer
from tests.admin.test_console import ARTIFACTS, CHROMIUM, VIEWPORTS

pytestmark = [
    pytest.mark.models,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed"),
]

PROFILE_TOML = """
name = "Try Shop"
greeting = "Hello, this is the try shop."
apology = "Sorry, could you say that again?"
system_prompt = "You are the phone assistant of a shop. Answer in one short sentence."

[[intents]]
name = "order_status"
examples = ["Where is my order?", "Where's my package?", "Has my order shipped?",
            "When will my parcel arrive?", "I want to track my order."]
negatives = ["I want to cancel my order."]
answer = "You can track your order with the link in your confirmation email."
confirm = "Do you want to know where your order is?"

[[knowledge]]
topic = "payment_methods"
questions = ["Can I pay with PayPal?", "Which ways can I pay?"]
answer = "You can pay by card or with PayPal."
"""

#: Words of an intent's example; a knowledge entry's question; neither.
EXAMPLE, QUESTION, NEITHER = "where is my order", "can I pay with PayPal", "tell me a joke"


async def _try(page: Page, text: str) -> dict[str, str]:
    await page.fill("#try-text", text)
    await page.click("#try-form button[type=submit]")
    await expect(page.locator("#try-result")).to_have_attribute("data-text", text)
    shown: dict[str, str] = {}
    for part in ("route", "answer", "why", "intents"):
        cell = page.locator(f"#try-{part}")
        shown[part] = await cell.inner_text() if await cell.count() else ""
    return shown


def _consistent(shown: dict[str, str], api: dict[str, Any]) -> None:
    """The console's lines say what the API answered, each in its own place."""
    assert shown["route"] == api["route"], (shown, api)
    if api["route"] in {"exact", "semantic", "confirm"}:
        assert api["intent"] in shown["why"] and shown["intents"] == "", (shown, api)
        return
    # Knowledge and LLM routes: no intent and no intent's reason in the route's reason.
    if api["intent"]:
        assert api["intent"] not in shown["why"], (shown, api)
        assert shown["intents"].startswith(f"nearest {api['intent']}"), (shown, api)
        assert "not used" in shown["intents"], (shown, api)
    for word in ("negative", "background", "threshold"):
        assert word not in shown["why"], (shown, api)
    if api["knowledge_topic"]:
        assert api["knowledge_topic"] in shown["why"], (shown, api)
    else:
        assert "the language model answers" in shown["why"], (shown, api)


async def test_try_an_utterance_shows_each_routes_own_reason(tmp_path: Path) -> None:
    assert CHROMIUM is not None
    profile = tmp_path / "try.toml"
    profile.write_text(PROFILE_TOML)
    with run_bot(profile=profile) as bot:
        engine = make_engine(f"sqlite+aiosqlite:///{bot.data_dir / 'switchboard.db'}")
        try:
            await add_user(engine, "ada", "admin")
            token = await add_token(engine, "reader", "viewer")
        finally:
            await engine.dispose()
        async with httpx.AsyncClient(
            base_url=bot.admin_url + "/api/v1", headers=bearer(token), timeout=30
        ) as api:
            answers = {
                text: (await api.post("/config/try", json={"text": text})).json()
                for text in (EXAMPLE, QUESTION, NEITHER)
            }
        # The cases this test is about: an intent route, and a knowledge route beside which
        # an intent was near and not used.
        assert answers[EXAMPLE]["route"] == "exact", answers
        assert answers[QUESTION]["route"] == "knowledge", answers
        assert answers[QUESTION]["intent"] == "order_status", answers
        assert answers[NEITHER]["route"] == "llm", answers
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
                    for text in (EXAMPLE, NEITHER, QUESTION):
                        shown = await _try(page, text)
                        _consistent(shown, answers[text])
                    assert shown["answer"] == "You can pay by card or with PayPal."
                    ARTIFACTS.mkdir(parents=True, exist_ok=True)
                    await page.screenshot(path=str(ARTIFACTS / f"{viewport}-try.png"))
                    await context.close()
            finally:
                await browser.close()
