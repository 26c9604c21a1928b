"""The console's Outcomes page: the six calls with known endings (and one more, whose intent
is named like markup) stored through the call log's writer under two configuration
versions; the page's figures for the days picked, checked against what the API answers for
the same range, the two versions side by side, the CSV links, and the markup shown as text.
In a real headless Chromium at a laptop and a phone width; screenshots in
test-artifacts/console/."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from playwright.async_api import Page, expect

from tests.admin import test_console, test_console_config
from tests.admin.test_console import CHROMIUM, VIEWPORTS, _shot
from tests.calllog.helpers import open_log
from tests.calllog.known_calls import HANGUP, KNOWN, KnownCall, report

# The console's server, browser and logged-in page, as test_console_config.py makes them.
admin_db_url = test_console.admin_db_url
recordings = test_console.recordings
console = test_console.console
browser = test_console.browser
api = test_console_config.api
page = test_console_config.page

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")

HOSTILE = "<img src=x onerror=alert(1)>"
#: Answered from an intent named like markup, then the caller hung up: resolved.
MARKUP = KnownCall(
    "markup-intent",
    40,
    12.0,
    [("exact", "What is this?", HOSTILE, "An answer.")],
    HANGUP,
    ("resolved", "caller_hangup"),
    ["answered"],
)
RANGE = {"since": "2026-11-20T00:00:00Z", "until": "2026-11-22T00:00:00Z"}


@pytest.fixture
async def outcomes(console: str, admin_db_url: str, tmp_path: Path, api: httpx.AsyncClient) -> None:
    """The known calls' first three and the markup call under configuration version 1, the
    rest under version 2 (a settings change, as a node records the version it runs)."""
    r = await api.patch("/config/settings", json={"name": "Switchboard two"})
    assert r.status_code == 200, r.text
    assert r.json()["config_version"] == 2
    log = await open_log(admin_db_url, tmp_path / "spool")
    try:
        for n, call in enumerate([*KNOWN[:3], MARKUP, *KNOWN[3:]]):
            log.config_version = "1" if n < 4 else "2"
            report(log, call)
            await log.writer.flush()
    finally:
        await log.close()


def pct(rate: float | None) -> str:
    return "—" if rate is None else f"{rate * 100:.1f} %"


@pytest.mark.usefixtures("outcomes")
@pytest.mark.parametrize("viewport", ["laptop", "phone"])
async def test_the_outcomes_page_shows_the_apis_figures(
    page: Page, console: str, api: httpx.AsyncClient, viewport: str
) -> None:
    alerts: list[str] = []
    page.on("dialog", lambda d: alerts.append(d.message))
    s = (await api.get("/outcomes/summary", params=RANGE)).json()
    # The figures this test is about, as the API has them (7 calls: 2 resolved, 2
    # transferred, 3 abandoned).
    t = s["totals"]
    assert (t["calls"], t["resolved"], t["transferred"], t["abandoned"]) == (7, 2, 2, 3)
    assert (pct(t["containment_rate"]), pct(t["transfer_rate"])) == ("28.6 %", "28.6 %")
    assert pct(t["abandonment_rate"]) == "42.9 %"

    await page.click("nav a[data-page=outcomes]")
    await expect(page.locator("#outcomes-range")).to_be_visible()
    await page.fill("#o-from", "2026-11-20")
    await page.fill("#o-to", "2026-11-21")
    await page.click("#outcomes-range button[type=submit]")
    await expect(page.locator("#outcome-calls")).to_have_text("7")
    await expect(page.locator("#rate-containment")).to_have_text("28.6 %")
    await expect(page.locator("#rate-transfer")).to_have_text("28.6 %")
    await expect(page.locator("#rate-abandonment")).to_have_text("42.9 %")
    await expect(page.locator("#average-length")).to_have_text(f"{s['average_call_s']:.1f} s")
    # The first answer beside it: 200 (the markup call), 300, 500 and 900 ms.
    first = (s["first_answer_calls"], s["first_answer_p50_ms"], s["first_answer_p95_ms"])
    assert first == (4, 400.0, 840.0)
    await expect(page.locator("#first-answer")).to_have_text("400 ms / 840 ms")
    # The post-call question: asked once, answered yes.
    assert s["post_call"]["asked"] == 1
    await expect(page.locator("#post-call-yes")).to_have_text("100.0 %")
    # "Not sure": the one topic, a link to Missed questions on its words (followed below).
    topics = page.locator("#not-sure-topics a.missed-link")
    await expect(topics).to_have_count(1)
    await expect(topics).to_have_text("Do you sell gift cards?")
    calls = page.locator("#not-sure-topics td[data-label=Calls]")
    await expect(calls).to_have_text(str(s["not_sure_topics"][0]["calls"]))

    # By day and by hour: one row each, as the API has them.
    days = page.locator("#outcome-days tbody tr")
    await expect(days).to_have_count(len(s["by_day"]))
    for i, d in enumerate(s["by_day"]):
        row = days.nth(i)
        await expect(row.locator("td[data-label=Day]")).to_have_text(d["day"])
        await expect(row.locator("td[data-label=Calls]")).to_have_text(str(d["calls"]))
        await expect(row.locator("td[data-label=Containment]")).to_have_text(
            pct(d["containment_rate"])
        )
        await expect(row.locator("td[data-label=Abandonment]")).to_have_text(
            pct(d["abandonment_rate"])
        )
    hours = page.locator("#outcome-hours tbody tr")
    await expect(hours).to_have_count(len(s["by_hour"]))
    first = s["by_hour"][0]
    await expect(hours.first.locator("td[data-label=Hour]")).to_have_text(f"{first['hour']:02d}:00")
    await expect(hours.first.locator("td[data-label=Transfers]")).to_have_text(
        pct(first["transfer_rate"])
    )

    # Transfers by reason, abandonment by place: each reason's count.
    assert s["transfers_by_reason"] == {"asked": 1, "declined": 1}
    for reason, n in s["transfers_by_reason"].items():
        row = page.locator(f"#transfers-by-reason tr:has(td:text-is('{reason}'))")
        await expect(row.locator("td[data-label=Calls]")).to_have_text(str(n))
    for place, n in s["abandoned_by_place"].items():
        row = page.locator(f"#abandoned-by-place tr:has(td:text-is('{place.replace('_', ' ')}'))")
        await expect(row.locator("td[data-label=Calls]")).to_have_text(str(n))
    await expect(page.locator("#refused-failed")).to_have_text("No refused or failed calls.")

    # The intents and entries: every row as the API has it, the markup one as text.
    rows = page.locator("#outcome-entries tbody tr")
    await expect(rows).to_have_count(len(s["entries"]))
    labels = [
        ("Intent or entry", "name"),
        ("Asked", "asked"),
        ("Answered", "answered"),
        ("Confirmed no", "confirmed_no"),
        ("Then put through", "followed_by_transfer"),
        ("Then hung up", "followed_by_hangup"),
    ]
    for i, e in enumerate(s["entries"]):
        for label, key in labels:
            cell = rows.nth(i).locator(f"td[data-label='{label}']")
            await expect(cell).to_have_text(str(e[key]))
    order = next(e for e in s["entries"] if e["name"] == "order_status")
    assert (order["asked"], order["answered"], order["confirmed_no"]) == (2, 1, 1)
    await expect(page.locator("#outcome-entries")).to_contain_text(HOSTILE)
    assert await page.locator("#main img").count() == 0

    # The CSV links: the range shown, and what they download is the API's.
    for name in ("calls", "turns"):
        href = await page.locator(f"#csv-{name}").get_attribute("href")
        assert href is not None
        url = urlsplit(href)
        assert url.path == f"/api/v1/outcomes/{name}.csv"
        assert {k: v[0] for k, v in parse_qs(url.query).items()} == RANGE
    got = await page.evaluate(
        "async () => (await fetch(document.getElementById('csv-calls').href)).text()"
    )
    assert got == (await api.get("/outcomes/calls.csv", params=RANGE)).text
    assert got.count("\r\n") == 1 + 7

    # Two versions side by side: 1 against 2 (the newest), chosen already.
    both = (await api.get("/outcomes/compare", params=RANGE | {"a": "1", "b": "2"})).json()
    a, b = both["a"]["totals"], both["b"]["totals"]
    assert (a["calls"], b["calls"]) == (4, 3)
    await expect(page.locator("#compare-a")).to_have_value("1")
    await expect(page.locator("#compare-b")).to_have_value("2")
    compare = page.locator("#compare table")
    await expect(compare.locator("thead")).to_contain_text("Version 1")
    await expect(compare.locator("thead")).to_contain_text("Version 2")
    contained = compare.locator("tr:has(td:text-is('Containment'))")
    await expect(contained.locator("td.version-a")).to_have_text(pct(a["containment_rate"]))
    await expect(contained.locator("td.version-b")).to_have_text(pct(b["containment_rate"]))
    assert (pct(a["containment_rate"]), pct(b["containment_rate"])) == ("50.0 %", "0.0 %")
    await expect(contained.locator("td.diff")).to_have_text("−50.0 pt")
    calls = compare.locator("tr:has(td:text-is('Ended calls'))")
    await expect(calls.locator("td.version-a")).to_have_text("4")
    await expect(calls.locator("td.version-b")).to_have_text("3")
    await expect(calls.locator("td.diff")).to_have_text("−1")
    await expect(compare.locator("tr.section", has_text=HOSTILE)).to_have_count(1)

    await _shot(page, f"{viewport}-outcomes")

    # The other way round, by the selects.
    await page.select_option("#compare-a", "2")
    await page.select_option("#compare-b", "1")
    await page.click("#compare-form button[type=submit]")
    await expect(calls.locator("td.version-a")).to_have_text("3")
    await expect(calls.locator("td.diff")).to_have_text("+1")

    width = VIEWPORTS[viewport]["width"]
    for label, _ in labels:
        box = await rows.first.locator(f"td[data-label='{label}']").bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width + 0.5
    assert await page.evaluate("document.documentElement.scrollWidth") <= width
    assert alerts == []
    assert await page.locator("#main img").count() == 0
    assert test_console_config._problems(page) == []

    # The "not sure" topic opens Missed questions showing that group alone.
    await page.click("nav a[data-page=outcomes]")
    await page.click("#not-sure-topics a.missed-link")
    await expect(page.locator("#missed-filter")).to_contain_text("do you sell gift cards")
    missed = page.locator("#missed tbody tr")
    await expect(missed).to_have_count(1)
    await expect(missed.first).to_contain_text("Do you sell gift cards?")
    await page.click("#missed-filter a")
    await expect(page.locator("#missed tbody tr")).to_have_count(2)
    assert test_console_config._problems(page) == []


async def test_a_backwards_range_says_why(page: Page) -> None:
    await page.click("nav a[data-page=outcomes]")
    await expect(page.locator("#outcomes-range")).to_be_visible()
    await page.fill("#o-from", "2026-11-21")
    await page.fill("#o-to", "2026-11-19")
    await page.click("#outcomes-range button[type=submit]")
    await expect(page.locator("#outcome-error")).to_contain_text("since must be before until")
    test_console_config._problems(page).clear()  # the browser reports the 422 itself
