"""The console in a real headless Chromium (Debian's package, driven by Playwright): log in,
see a live call appear, open a finished call's waterfall, create an intent, change a setting,
read the audit log; on a laptop and a phone width. Screenshots: test-artifacts/console/."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, async_playwright, expect
from sqlalchemy.ext.asyncio import AsyncEngine

from admin.app import create_app
from admin.server import AdminServer
from admin.settings import AdminSettings
from bot.config.store import seed
from tests.admin.conftest import PASSWORD, add_call, add_user, link_recording
from tests.admin.test_config import PROFILE

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "console"
CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (infra/install.sh --test installs it)"
)
VIEWPORTS = {"laptop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}


@pytest.fixture(params=["sqlite"])
def admin_db_url(tmp_path: Path) -> str:
    """The console tests run on SQLite (the API tests cover both backends)."""
    return f"sqlite+aiosqlite:///{tmp_path / 'console.db'}"


@pytest.fixture
def recordings(tmp_path: Path) -> Path:
    return tmp_path / "recordings"


@pytest.fixture
async def console(admin_engine: AsyncEngine, recordings: Path) -> AsyncIterator[str]:
    """The app served by uvicorn on a free loopback port; yields its base URL."""
    await seed(admin_engine, PROFILE, "profile:test.toml")
    await add_user(admin_engine, "ada", "admin")
    app = create_app(admin_engine, AdminSettings(), recordings_dir=recordings)
    server = AdminServer(app, "127.0.0.1", 0)
    await server.start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        await server.stop()


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    assert CHROMIUM is not None
    async with async_playwright() as pw:
        chromium = await pw.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        try:
            yield chromium
        finally:
            await chromium.close()


async def _shot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


async def _log_in(page: Page, base: str, name: str = "ada", role: str = "admin") -> None:
    await page.goto(base + "/")
    await page.fill("#login-name", name)
    await page.fill("#login-password", PASSWORD)
    await page.click("#login-form button[type=submit]")
    await expect(page.locator("#who")).to_have_text(f"{name} ({role})")


@pytest.mark.parametrize("viewport", ["laptop", "phone"])
async def test_console_pages(
    browser: Browser, console: str, admin_engine: AsyncEngine, recordings: Path, viewport: str
) -> None:
    context = await browser.new_context(viewport=VIEWPORTS[viewport])  # type: ignore[arg-type]
    page = await context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    try:
        await page.goto(console + "/")
        await expect(page.locator("#login-form")).to_be_visible()
        await page.fill("#login-name", "ada")
        await page.fill("#login-password", "not the password")
        await page.click("#login-form button[type=submit]")
        await expect(page.locator("#login-error")).to_have_text("wrong name or password")
        problems.clear()  # the browser reports the 401 itself
        await _log_in(page, console)
        await _shot(page, f"{viewport}-login-done")

        # Live calls: one appears without a reload.
        await expect(page.locator("#no-live-calls")).to_be_visible()
        now = datetime.now(UTC)
        await add_call(admin_engine, caller="sip:+4930555@pbx", at=now, end_reason=None, turns=[])
        await expect(page.locator("#live-calls")).to_contain_text("sip:+4930555@pbx")
        await _shot(page, f"{viewport}-live")

        # A finished, recorded call: its turns' waterfalls and its recording.
        finished = await add_call(
            admin_engine,
            caller="sip:+4930777@pbx",
            at=now - timedelta(minutes=5),
            end_reason="bot_hangup",
            turns=[("semantic", 180.0), ("llm", 950.0)],
        )
        await link_recording(admin_engine, finished, recordings, seconds=1)
        await page.click("nav a[data-page=calls]")
        await page.click("#call-list tr:has-text('sip:+4930777@pbx')")
        await expect(page.locator(".turn")).to_have_count(2)
        first = page.locator(".waterfall[data-seq='1']")
        await expect(first.locator(".bar")).to_have_count(5)
        await expect(first).to_contain_text("180 ms")
        # The bars are laid out from the stored times: response_done's ends at the track's end.
        track = await first.locator(".track").last.bounding_box()
        done = await first.locator(".bar.stage-response_done").bounding_box()
        assert track is not None and done is not None
        assert abs((done["x"] + done["width"]) - (track["x"] + track["width"])) < 2
        assert done["width"] > 0.5 * track["width"]  # 460 ms of 3000 ms came before it
        await expect(page.locator("main")).to_contain_text("question 2")
        # The player's source is the API's recording, fetched with the login's cookie.
        await expect(page.locator(".recording audio")).to_have_count(1)
        fetched = await page.evaluate(
            "fetch(document.querySelector('.recording audio').src)"
            ".then(r => r.arrayBuffer().then(b => [r.status, r.headers.get('content-type'),"
            " b.byteLength]))"
        )
        assert fetched == [200, "audio/wav", 44 + 8000 * 4], fetched
        await _shot(page, f"{viewport}-call-waterfall")

        # Intents: a new one, and a clash refused with the reason.
        await page.click("nav a[data-page=intents]")
        await page.click("#new-intent")
        await page.fill("#i-name", "returns")
        await page.fill("#i-examples", "How do I send something back?\nCan I return this?")
        await page.fill("#i-answer", "Send it back within 30 days.")
        await page.click(".intent-form button[type=submit]")
        await expect(page.locator("main table").first).to_contain_text("returns")
        await page.click("#new-intent")
        await page.fill("#i-name", "hours_again")
        await page.fill("#i-examples", "When are you open?")
        await page.fill("#i-answer", "Nine to five.")
        await page.click(".intent-form button[type=submit]")
        await expect(page.locator(".intent-form .error")).to_contain_text("belongs to both")
        problems.clear()  # the refused request's 422
        # Trying words needs a node's models: the console says so.
        await page.fill("#try-text", "when are you open")
        await page.click("#try-form button[type=submit]")
        await expect(page.locator("#try-result")).to_contain_text("switchboard run")
        problems.clear()
        await _shot(page, f"{viewport}-intents")

        # Settings, then the audit log shows both changes.
        await page.click("nav a[data-page=settings]")
        await page.fill("#s-greeting", "Welcome to the console shop.")
        # The save's own request, answered, before the page drawn from it: a failure says
        # which of the two did not come (once, beside three busy test processes, the page
        # still read version 2 after 15 s, with no error shown).
        async with page.expect_response(
            lambda r: r.url.endswith("/config/settings") and r.request.method == "PATCH"
        ) as saved:
            await page.click("#settings-save")
        response = await saved.value
        assert response.status == 200, await response.text()
        assert (await response.json())["config_version"] == 3
        await expect(page.locator("#settings-form")).to_contain_text("Configuration version 3")
        await _shot(page, f"{viewport}-settings")
        await page.click("nav a[data-page=latency]")
        await expect(page.locator("main")).to_contain_text("Voice-to-voice by route")
        # The chart: a P50 and a P95 line for each route with timed turns.
        await expect(page.locator("svg.chart polyline.route-semantic")).to_have_count(2)
        await expect(page.locator("svg.chart polyline.route-llm")).to_have_count(2)
        await _shot(page, f"{viewport}-latency")
        await page.click("nav a[data-page=audit]")
        change = page.locator("tr:has-text('settings.update settings')")
        await expect(change).to_contain_text("Welcome to the console shop.")
        await expect(change).not_to_contain_text("system_prompt")  # only what changed
        await expect(page.locator("main")).to_contain_text("intent.create intent:returns")
        await _shot(page, f"{viewport}-audit")
        # Nothing overflows a phone's width but the tables' own scrolling.
        width = await page.evaluate("document.documentElement.scrollWidth")
        assert width <= VIEWPORTS[viewport]["width"], width
        assert problems == [], problems
    finally:
        await context.close()
