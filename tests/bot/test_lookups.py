"""Business lookups: what is requested, what is said, and that the preamble comes first.

The HTTP service is an ``httpx.MockTransport`` (a boundary fake); the end-to-end tests
call a real one over loopback.
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
from pydantic import ValidationError

from bot.callflow import LookupConfig, LookupParam
from bot.lookups.webhook import BadLookupInput, Webhooks, render
from bot.pipeline.frames import Collected, DataFrame, ResponseDone, Speak
from bot.pipeline.processor import Collector
from bot.pipeline.stages.lookup_runner import LookupRunner
from bot.pipeline.turn import Turn

ORDERS = LookupConfig(
    name="orders",
    url="https://orders.example.com/v1/orders/{order_number}",
    params={"order_number": LookupParam(type="digits", min_length=5, max_length=5)},
    timeout_s=0.5,
    auth_header="Authorization",
    auth_secret="orders",
    preamble="Let me check.",
    answer="Your order is {status}.",
    not_found="No such order.",
    failed="The order system is away.",
)
SEARCH = LookupConfig(
    name="search",
    url="https://crm.example.com/find",
    method="POST",
    params={"account": LookupParam(type="string", max_length=12)},
    answer="Hello {name}.",
)


def hooks(handler: object, *lookups: LookupConfig) -> tuple[Webhooks, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    async def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return await handler(request)  # type: ignore[operator]

    web = Webhooks(lookups or (ORDERS,), {"orders": "tok"}, transport=httpx.MockTransport(handle))
    return web, seen


async def test_found_is_spoken_from_the_returned_fields_with_the_secret_sent() -> None:
    async def ok(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"status": "on its way", "secret": "x"})

    web, seen = hooks(ok)
    result = await web.run("orders", {"order_number": "12345"})
    assert (result.kind, result.text, result.detail) == (
        "found",
        "Your order is on its way.",
        "200",
    )
    assert str(seen[0].url) == "https://orders.example.com/v1/orders/12345"
    assert seen[0].headers["authorization"] == "Bearer tok"
    await web.close()


@pytest.mark.parametrize(
    ("response", "kind", "detail"),
    [
        (httpx.Response(404), "not_found", "404"),
        (httpx.Response(200, json={}), "not_found", "empty"),
        (httpx.Response(200, json=[]), "not_found", "empty"),
        (httpx.Response(200, content=b"null"), "not_found", "empty"),
        (httpx.Response(500, text="boom"), "failed", "500"),
        (httpx.Response(200, text="<html>garbage"), "failed", "not json"),
        (httpx.Response(200, json="a string"), "failed", "not an object"),
        (httpx.Response(200, json={"state": "shipped"}), "failed", "fields missing"),
        (httpx.Response(200, json={"status": {"nested": 1}}), "failed", "fields missing"),
        (httpx.Response(302, headers={"Location": "http://evil.example"}), "failed", "302"),
    ],
)
async def test_bad_answers_are_spoken_not_silent(
    response: httpx.Response, kind: str, detail: str
) -> None:
    async def reply(request: httpx.Request) -> httpx.Response:
        return response

    web, seen = hooks(reply)
    result = await web.run("orders", {"order_number": "12345"})
    assert (result.kind, result.detail) == (kind, detail)
    assert result.text == (ORDERS.not_found if kind == "not_found" else ORDERS.failed)
    assert len(seen) == 1  # a redirect is not followed: only the configured URL is called
    await web.close()


async def test_a_slow_service_is_spoken_within_its_timeout() -> None:
    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(5)
        return httpx.Response(200, json={"status": "late"})

    web, _ = hooks(slow)
    started = time.monotonic()
    result = await web.run("orders", {"order_number": "12345"})
    assert (result.kind, result.detail) == ("failed", "timeout")
    assert time.monotonic() - started < ORDERS.timeout_s + 2.0  # not the 5 s the service takes
    await web.close()


@pytest.mark.parametrize(
    "values", [{"order_number": "1234"}, {"order_number": "12a45"}, {}, {"x": "1"}]
)
async def test_bad_values_never_reach_the_service(values: dict[str, str]) -> None:
    async def never(request: httpx.Request) -> httpx.Response:
        raise AssertionError("called")

    web, seen = hooks(never)
    with pytest.raises(BadLookupInput):
        web.request("orders", values)
    result = await web.run("orders", values)
    assert result.kind == "bad_input" and result.text == ORDERS.failed and seen == []
    await web.close()


async def test_post_sends_the_values_as_json_and_encodes_url_fields() -> None:
    async def ok(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=[{"name": "Ann"}])

    web, seen = hooks(ok, SEARCH)
    result = await web.run("search", {"account": "AB 12/3"})
    assert result.text == "Hello Ann."
    assert seen[0].method == "POST" and json.loads(seen[0].content) == {"account": "AB 12/3"}
    path = LookupConfig(name="p", url="http://h/x/{v}", params={"v": LookupParam()}, answer="{a}")
    web2, seen2 = hooks(ok, path)
    await web2.run("p", {"v": "../admin?x=1"})
    assert seen2[0].url.raw_path == b"/x/..%2Fadmin%3Fx%3D1"
    await web.close()
    await web2.close()


def test_configuration_is_checked_at_load() -> None:
    with pytest.raises(ValidationError, match="not a param"):
        LookupConfig(name="x", url="http://h/{other}", params={"v": LookupParam()}, answer="a")
    with pytest.raises(ValidationError, match="go together"):
        LookupConfig(
            name="x", url="http://h/", params={"v": LookupParam()}, answer="a", auth_header="X"
        )
    with pytest.raises(ValidationError):
        LookupConfig(name="x", url="ftp://h/", params={"v": LookupParam()}, answer="a")
    with pytest.raises(ValueError, match="orders"):
        Webhooks([ORDERS], {})  # its secret is not set


def test_render_speaks_plain_values_only() -> None:
    assert render("Due {eta}.", {"eta": "Friday"}) == "Due Friday."
    assert render("Due {eta}.", {"eta": 3}) == "Due 3."
    assert render("Due {eta}.", {"eta": "<b>Friday</b>"}) is None
    assert render("Due {eta}.", {"eta": "x" * 500}) is None
    assert render("Due {eta}.", {"eta": True}) is None


async def test_the_preamble_goes_out_before_the_service_answers() -> None:
    release = asyncio.Event()
    out = Collector()

    async def held(request: httpx.Request) -> httpx.Response:
        await release.wait()
        return httpx.Response(200, json={"status": "packed"})

    web, _ = hooks(held)
    events: list[tuple[str, str]] = []

    def say(turn: Turn | None, text: str) -> DataFrame:
        return Speak(turn=turn, text=text)

    runner = LookupRunner(web, say=say, on_event=lambda k, d: events.append((k, d)))
    runner.link(out)
    runner.start()
    turn = Turn(call_id="c1")
    await runner.put(
        Collected(
            turn=turn,
            collector="order_number",
            value="12345",
            lookup="orders",
            param="order_number",
        )
    )
    await asyncio.sleep(0.1)
    assert [f.text for f in out.frames if isinstance(f, Speak)] == ["Let me check."]
    release.set()
    await asyncio.sleep(0.1)
    assert [f.text for f in out.frames if isinstance(f, Speak)] == [
        "Let me check.",
        "Your order is packed.",
    ]
    assert isinstance(out.frames[-1], ResponseDone) and turn.route == "lookup"
    assert events == [("lookup", "orders: found 200")]
    assert "12345" not in turn.answer
    await runner.stop()
    await web.close()
