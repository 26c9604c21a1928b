"""The configuration pages' node card (a version "not applied on node X" with the reason,
and the version the node runs) and the transfer targets field of the Settings page, in a
real headless Chromium at a laptop and a phone width; screenshots in
test-artifacts/console/."""

from __future__ import annotations

import httpx
import pytest
from playwright.async_api import Page, expect
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.config import nodes as node_config
from tests.admin import test_console, test_console_config
from tests.admin.test_console import CHROMIUM, VIEWPORTS, _shot

# The console's server, browser and logged-in page, as test_console_config.py makes them.
admin_db_url = test_console.admin_db_url
recordings = test_console.recordings
console = test_console.console
browser = test_console.browser
api = test_console_config.api
page = test_console_config.page

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")


@pytest.mark.parametrize("viewport", ["laptop", "phone"])
async def test_a_version_not_applied_on_a_node_is_shown_with_the_reason(
    page: Page, console: str, admin_engine: AsyncEngine, api: httpx.AsyncClient, viewport: str
) -> None:
    r = await api.patch("/config/settings", json={"greeting": "Hello again."})
    assert r.status_code == 200, r.text
    # What ConfigSync writes for a node that applied version 1 then could not apply 2.
    await node_config.report_applied(admin_engine, "node-a:5060", 1)
    await node_config.report_failed(
        admin_engine, "node-a:5060", 2, "ProviderTimeout: embedder timed out after 2.0s"
    )
    await node_config.report_applied(admin_engine, "node-b:5060", 2)
    await page.goto(console + "/console/#/settings")
    card = page.locator("#config-nodes")
    refused = card.locator("li.node-refused")
    await expect(refused).to_have_count(1)
    await expect(refused).to_contain_text(
        "Version 2 not applied on node node-a:5060: ProviderTimeout: embedder timed out after 2.0s"
    )
    await expect(refused).to_contain_text("It runs version 1.")
    await expect(card.locator("li[data-node='node-b:5060']")).to_have_text(
        "Node node-b:5060 runs version 2."
    )
    await _shot(page, f"{viewport}-settings-nodes")
    # The intents page, where such a failure usually comes from, says it too.
    await page.goto(console + "/console/#/intents")
    await expect(page.locator("#config-nodes li.node-refused")).to_contain_text(
        "not applied on node node-a:5060"
    )
    assert (
        await page.evaluate("document.documentElement.scrollWidth")
        <= (VIEWPORTS[viewport]["width"])
    )
    assert [p for p in test_console_config._problems(page) if "status of 503" not in p] == []


async def test_transfer_targets_are_edited_one_a_line(
    page: Page, console: str, api: httpx.AsyncClient
) -> None:
    await page.goto(console + "/console/#/settings")
    field = page.locator("[data-setting='transfer_targets']")
    await expect(field).to_have_value("")
    await field.fill("sip:desk@pbx.example.com warm\ntel:+4930123456 refer bridge-on-failure")
    await page.click("#settings-save")
    await expect(page.locator("#settings-form")).to_contain_text("Configuration version 2")
    held = (await api.get("/config/settings")).json()["transfer_targets"]
    assert held == [
        {"uri": "sip:desk@pbx.example.com", "mode": "warm", "bridge_on_refer_failure": False},
        {"uri": "tel:+4930123456", "mode": "refer", "bridge_on_refer_failure": True},
    ]
    # Drawn back as written.
    await expect(field).to_have_value(
        "sip:desk@pbx.example.com warm\ntel:+4930123456 refer bridge-on-failure"
    )
    # A target the API refuses is said so; nothing stored.
    await field.fill("desk@pbx.example.com")
    await page.click("#settings-save")
    await expect(page.locator("#settings-error")).to_contain_text("transfer_targets")
    assert (await api.get("/config/settings")).json()["config_version"] == 2
    test_console_config._problems(page).clear()
