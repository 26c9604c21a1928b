"""The console's test call in a real headless Chromium with a fake microphone (a WAV file of
the caller's question), to a real node: the call goes through the pipeline and is logged."""

from __future__ import annotations

import asyncio
import wave
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import async_playwright, expect

from bot.calllog.store import make_engine
from testkit.botproc import run_bot
from testkit.voices import RATE, speak
from tests.admin.conftest import PASSWORD, add_token, add_user, bearer
from tests.admin.test_console import ARTIFACTS, CHROMIUM
from tests.admin.test_node import PROFILE_TOML, QUESTION

pytestmark = [
    pytest.mark.models,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed"),
]


def _microphone(path: Path) -> None:
    """3 s of silence, the question, 8 s of silence (Chromium loops the file)."""
    silence = b"\0\0" * RATE
    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(RATE)
        wav.writeframes(silence * 3 + speak(QUESTION) + silence * 8)


async def test_the_operator_calls_the_bot_from_the_console(tmp_path: Path) -> None:
    assert CHROMIUM is not None
    profile = tmp_path / "shop.toml"
    profile.write_text(PROFILE_TOML)
    mic = tmp_path / "question.wav"
    _microphone(mic)
    with run_bot(profile=profile) as bot:
        engine = make_engine(f"sqlite+aiosqlite:///{bot.data_dir / 'switchboard.db'}")
        try:
            await add_user(engine, "ada", "admin")
            token = await add_token(engine, "reader", "viewer")
        finally:
            await engine.dispose()
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(
                executable_path=CHROMIUM,
                headless=True,
                args=[
                    "--no-sandbox",
                    "--use-fake-ui-for-media-stream",
                    "--use-fake-device-for-media-stream",
                    f"--use-file-for-fake-audio-capture={mic}",
                    "--autoplay-policy=no-user-gesture-required",
                ],
            )
            try:
                page = await browser.new_page()
                await page.goto(bot.admin_url + "/")
                await page.fill("#login-name", "ada")
                await page.fill("#login-password", PASSWORD)
                await page.click("#login-form button[type=submit]")
                await page.click("nav a[data-page=call]")
                await page.click("#start-call")
                await expect(page.locator("#call-status")).to_have_text(
                    "In a call: speak to the bot.", timeout=15_000
                )
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                await page.screenshot(path=str(ARTIFACTS / "laptop-test-call.png"))
                await asyncio.sleep(12.0)  # the greeting, the question at 3 s, the answer
                await page.click("#end-call")
                await expect(page.locator("#call-status")).to_have_text("Call ended.")
            finally:
                await browser.close()
        async with httpx.AsyncClient(
            base_url=bot.admin_url, headers=bearer(token), timeout=30
        ) as api:
            calls: list[dict[str, Any]] = []
            for _ in range(100):
                calls = (await api.get("/api/v1/calls")).json()["items"]
                if calls and calls[0]["ended_at"]:
                    break
                await asyncio.sleep(0.1)
            assert len(calls) == 1 and calls[0]["caller"] == "webrtc:ada", calls
            detail = (await api.get(f"/api/v1/calls/{calls[0]['id']}")).json()
    asked = [t for t in detail["turns_detail"] if t["intent"] == "order_status"]
    assert asked, detail["turns_detail"]
    assert asked[0]["answer"].startswith("You can track your order")
