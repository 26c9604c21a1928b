"""The console's Users and API tokens pages in a real headless Chromium, at a laptop and a
phone width: each click is checked against what the API then holds. Screenshots:
test-artifacts/console/."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, Page, expect
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.admin import test_console
from tests.admin.conftest import add_token, add_user, bearer
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


async def _user(api: httpx.AsyncClient, name: str) -> dict[str, Any]:
    users = (await api.get("/users", params={"limit": 200})).json()["items"]
    return next(u for u in users if u["name"] == name)


async def _page(browser: Browser, viewport: str) -> tuple[Page, list[str]]:
    context = await browser.new_context(viewport=VIEWPORTS[viewport])  # type: ignore[arg-type]
    page = await context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("dialog", lambda d: d.accept())
    return page, problems


async def _settled(page: Page) -> None:
    """Every redraw the last click started has landed: a click now reaches the page that
    stays, not one about to be replaced (a click whose press and release land on two
    drawings of the same button is no click)."""
    await expect(page.locator("main")).not_to_have_attribute("aria-busy", "true")


async def _logged_in(page: Page, problems: list[str], base: str, *who: str) -> None:
    await _log_in(page, base, *who)
    problems.clear()  # the browser reports the first /auth/me's 401 itself


async def _in_view_below(page: Page, row: str, form: str) -> None:
    """The form opened right below the row whose button was pressed, and is on screen."""
    r = await page.locator(row).bounding_box()
    f = await page.locator(form).bounding_box()
    view = page.viewport_size
    assert r is not None and f is not None and view is not None
    assert r["y"] + r["height"] - 1 <= f["y"] <= r["y"] + r["height"] + 40, (r, f)
    assert 0 <= f["y"] < view["height"] - 100, (f, view)


@pytest.mark.parametrize("viewport", ["laptop", "phone"])
async def test_users_page(
    browser: Browser, console: str, api: httpx.AsyncClient, viewport: str
) -> None:
    page, problems = await _page(browser, viewport)
    try:
        await _logged_in(page, problems, console)
        await page.goto(console + "/console/#/users")
        await expect(page.locator("main h1")).to_have_text("Users")
        await expect(page.locator("nav a[data-page=users]")).to_have_class(re.compile("active"))

        # Add a user.
        await page.fill("#u-name", "bob")
        await page.fill("#u-password", "bob's long passphrase")
        await page.select_option("#u-role", "editor")
        await page.click("#new-user-form button[type=submit]")
        row = "#users tr:has(td[data-label=Name]:text-is('bob'))"
        await expect(page.locator(row)).to_contain_text("active")
        await _settled(page)
        bob = await _user(api, "bob")
        assert (bob["role"], bob["disabled"]) == ("editor", False)

        # Change the role: the API holds it at once.
        await page.select_option("select.role[data-user=bob]", "viewer")
        await expect(page.locator("#toast")).to_contain_text("bob: role viewer")
        assert (await _user(api, "bob"))["role"] == "viewer"
        await _settled(page)

        # Disable, then enable.
        await page.click(f"{row} button.disable")
        await expect(page.locator(row)).to_contain_text("disabled")
        assert (await _user(api, "bob"))["disabled"] is True
        await _settled(page)
        await page.click(f"{row} button.enable")
        await expect(page.locator(row)).to_contain_text("active")
        assert (await _user(api, "bob"))["disabled"] is False
        await _settled(page)

        # Reset the password: the form opens below bob's row; Cancel closes it unsent.
        await page.click(f"{row} button.reset")
        await expect(page.locator(".reset-form")).to_be_visible()
        await _in_view_below(page, row, ".reset-form")
        await page.click(".reset-form button.cancel")
        await expect(page.locator(".reset-form")).to_have_count(0)
        await page.click(f"{row} button.reset")
        await page.fill("#r-password", "a brand new passphrase")
        await _shot(page, f"{viewport}-users")
        await page.click(".reset-form button[type=submit]")
        await expect(page.locator("#toast")).to_contain_text("New password set for bob")
        old = await api.post(
            "/auth/login", json={"name": "bob", "password": "bob's long passphrase"}
        )
        new = await api.post(
            "/auth/login", json={"name": "bob", "password": "a brand new passphrase"}
        )
        assert (old.status_code, new.status_code) == (401, 200), (old.text, new.text)

        width = await page.evaluate("document.documentElement.scrollWidth")
        assert width <= VIEWPORTS[viewport]["width"], width
        assert problems == [], problems
    finally:
        await page.context.close()


@pytest.mark.parametrize("viewport", ["laptop", "phone"])
async def test_tokens_page(
    browser: Browser,
    console: str,
    admin_engine: AsyncEngine,
    api: httpx.AsyncClient,
    viewport: str,
) -> None:
    await add_user(admin_engine, "vic", "viewer")
    page, problems = await _page(browser, viewport)
    try:
        # A viewer: no Users page (and #/users says so, not Live), their own tokens only.
        await _logged_in(page, problems, console, "vic", "viewer")
        await expect(page.locator("nav a[data-page=users]")).to_be_hidden()
        await page.goto(console + "/console/#/users")
        await expect(page.locator("#admins-only")).to_be_visible()
        await page.click("nav a[data-page=tokens]")
        await expect(page.locator("main h1")).to_have_text("API tokens")
        await expect(page.locator("#no-tokens")).to_be_visible()
        assert await page.locator("#t-role option").all_inner_texts() == ["viewer"]
        await page.fill("#t-name", "nightly-report")
        await page.click("#new-token-form button[type=submit]")
        secret = (await page.locator("#new-token").inner_text()).strip()
        assert secret.startswith("sbt_"), secret
        await _shot(page, f"{viewport}-tokens")
        async with httpx.AsyncClient(base_url=console + "/api/v1", timeout=10) as anon:
            me = await anon.get("/auth/me", headers=bearer(secret))
            assert me.status_code == 200 and me.json()["name"] == "vic", me.text
            row = "#tokens tr:has(td[data-label=Name]:text-is('nightly-report'))"
            await expect(page.locator(row)).to_contain_text("active")
            # The secret is shown once: not after the page is drawn again.
            await page.reload()
            await expect(page.locator(row)).to_be_visible()
            await expect(page.locator("#new-token")).to_have_count(0)
            await _settled(page)
            # Revoke: the next request with it is refused.
            await page.click(f"{row} button.revoke")
            await expect(page.locator(row)).to_contain_text("revoked")
            gone = await anon.get("/auth/me", headers=bearer(secret))
            assert gone.status_code == 401, gone.text
        held = (await api.get("/tokens")).json()["items"]
        assert [(t["user"], t["name"], t["revoked"]) for t in held if t["user"] == "vic"] == [
            ("vic", "nightly-report", True)
        ]
        # A viewer reads the settings and intents, and is offered no change.
        await page.click("nav a[data-page=settings]")
        await expect(page.locator("[data-setting='name']")).to_be_disabled()
        assert await page.locator("[data-setting]:enabled").count() == 0
        assert await page.locator("#settings-form button").count() == 0
        await page.click("nav a[data-page=intents]")
        await expect(page.locator("#intents")).to_contain_text("opening_hours")
        assert await page.locator("#intents button, #new-intent").count() == 0
        problems[:] = [p for p in problems if "status of 503" not in p]  # no node: no matching
        width = await page.evaluate("document.documentElement.scrollWidth")
        assert width <= VIEWPORTS[viewport]["width"], width
        assert problems == [], problems
    finally:
        await page.context.close()


async def test_an_admin_sees_everyones_tokens_and_revokes_one(
    browser: Browser, console: str, admin_engine: AsyncEngine, api: httpx.AsyncClient
) -> None:
    secret = await add_token(admin_engine, "deployer", "editor")
    # Its owner demoted since: the token still says editor, and holds viewer.
    r = await api.patch("/users/deployer", json={"role": "viewer"})
    assert r.status_code == 200, r.text
    page, problems = await _page(browser, "laptop")
    try:
        await _logged_in(page, problems, console)
        await page.goto(console + "/console/#/tokens")
        row = "#tokens tr:has(td[data-label=Name]:text-is('deployer-ci'))"
        await expect(page.locator(row)).to_contain_text("deployer")
        await expect(page.locator(f"{row} td[data-label=Role]")).to_have_text("editor")
        await expect(page.locator(f"{row} td[data-label='Holds now']")).to_have_text(
            "viewer (its owner's role now)"
        )
        assert await page.locator("#t-role option").all_inner_texts() == [
            "viewer",
            "editor",
            "admin",
        ]
        await page.click(f"{row} button.revoke")
        await expect(page.locator(row)).to_contain_text("revoked")
        async with httpx.AsyncClient(base_url=console + "/api/v1", timeout=10) as anon:
            assert (await anon.get("/auth/me", headers=bearer(secret))).status_code == 401
        assert problems == [], problems
    finally:
        await page.context.close()
