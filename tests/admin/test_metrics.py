"""/metrics: turns, stage latency, cache hits and errors observed; SIP and model counters read."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.ext.asyncio import AsyncEngine

from admin.app import create_app
from admin.metrics import NodeMetrics, error_kind
from admin.settings import AdminSettings
from bot.pipeline.turn import Turn
from tests.admin.conftest import add_token, bearer
from tests.admin.fake_node import FakeNode


def _turn(route: str, v2v_s: float | None, error: str | None = None) -> Turn:
    turn = Turn(call_id="c1", route=route, error=error)  # type: ignore[arg-type]
    turn.mark("speech_end", 100.0)
    turn.mark("eot_decided", 100.3)
    if v2v_s is not None:
        turn.mark("first_audio_out", 100.0 + v2v_s)
    return turn


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


async def test_metrics_need_a_token_and_show_what_the_node_observed(
    admin_engine: AsyncEngine,
) -> None:
    metrics = NodeMetrics()
    metrics.observe_turn(_turn("semantic", 0.15))
    metrics.observe_turn(_turn("semantic", 0.25))
    metrics.observe_turn(_turn("llm", 1.2))
    metrics.observe_turn(_turn("llm", None, error="llm: first token timed out"))
    metrics.add_snapshot(
        sip=lambda: {
            "calls_active": 2,
            "calls_total": 7,
            "front_rejected_busy": 1,
            "workers": 3,
            "registered": 1,
            "register_failovers": 2,
            "front_stream_connections": 4,
            "front_stream_open": 1,
        },
        models=lambda: {"asr": {"count": 9.0, "errors": 1.0, "timeouts": 0.0}},
        live_calls=lambda: 2,
        cache_refused=lambda: 3,
    )
    app = create_app(admin_engine, AdminSettings(), node=FakeNode(metrics=metrics))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="https://testserver") as client:
        assert (await client.get("/metrics")).status_code == 401
        token = await add_token(admin_engine, "prom", "viewer")
        r = await client.get("/metrics", headers=bearer(token))
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    got = _samples(r.text)
    assert got[("switchboard_turns_total", (("route", "semantic"),))] == 2
    assert got[("switchboard_turns_total", (("route", "llm"),))] == 2
    assert got[("switchboard_intent_cache_hits_total", ())] == 2
    assert got[("switchboard_errors_total", (("kind", "llm"),))] == 1
    v2v = (("le", "0.2"), ("route", "semantic"))
    assert got[("switchboard_voice_to_voice_seconds_bucket", v2v)] == 1
    assert got[("switchboard_voice_to_voice_seconds_count", (("route", "llm"),))] == 1
    eot = (("le", "0.3"), ("stage", "eot_decided"))
    assert got[("switchboard_turn_stage_seconds_bucket", eot)] == 4
    assert got[("switchboard_sip_calls_total", ())] == 7
    assert got[("switchboard_sip_calls_active", ())] == 2
    assert got[("switchboard_sip_front_rejected_busy_total", ())] == 1
    assert got[("switchboard_intent_cache_refused_total", ())] == 3
    assert got[("switchboard_sip_registered", ())] == 1  # a gauge: the binding is held
    assert got[("switchboard_sip_register_failovers_total", ())] == 2
    assert got[("switchboard_sip_front_stream_connections_total", ())] == 4
    assert got[("switchboard_sip_front_stream_open", ())] == 1  # a gauge: connections now
    assert got[("switchboard_calls_active", ())] == 2
    assert got[("switchboard_model_failures_total", (("kind", "error"), ("model", "asr")))] == 1


async def test_metrics_can_be_public(admin_engine: AsyncEngine) -> None:
    app = create_app(admin_engine, AdminSettings(metrics_public=True), node=FakeNode())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="https://testserver") as client:
        assert (await client.get("/metrics")).status_code == 200


def test_error_kinds_are_short_labels() -> None:
    assert error_kind("asr: timed out after 5s") == "asr"
    assert error_kind("LLM stream failed") == "llm_stream_failed"
    assert error_kind("") == "unknown"


def test_the_grafana_dashboard_only_queries_metrics_the_node_exports() -> None:
    import re  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    from prometheus_client import generate_latest  # noqa: PLC0415

    from telephony.endpoint import STAT_KEYS  # noqa: PLC0415
    from telephony.sip_dispatch import FRONT_KEYS  # noqa: PLC0415

    metrics = NodeMetrics()
    metrics.observe_turn(_turn("semantic", 0.15, error="asr: failed"))
    metrics.observe_outcome("transferred", "asked", ["answered", "declined"])
    stats = dict.fromkeys((*STAT_KEYS, *FRONT_KEYS, "workers", "workers_up"), 1)
    metrics.add_snapshot(
        sip=lambda: stats,
        models=lambda: {"asr": {"count": 1.0}},
        live_calls=lambda: 0,
    )
    exported = {name for name, _ in _samples(generate_latest(metrics.registry).decode())}
    dashboard = Path(__file__).resolve().parents[2] / "infra" / "grafana" / "switchboard.json"
    queried = set(re.findall(r"switchboard_[a-z0-9_]+", dashboard.read_text()))
    assert queried, "no queries found"
    assert queried <= exported, sorted(queried - exported)


def test_call_outcomes_are_counted_by_outcome_and_reason() -> None:
    from prometheus_client import generate_latest  # noqa: PLC0415

    metrics = NodeMetrics()
    metrics.observe_outcome("abandoned", "not_sure", ["answered", "declined"])
    metrics.observe_outcome("abandoned", "not_sure", ["declined"])
    text = generate_latest(metrics.registry).decode()
    assert 'switchboard_call_outcomes_total{outcome="abandoned",reason="not_sure"} 2.0' in text
    assert 'switchboard_turn_outcomes_total{outcome="declined"} 2.0' in text
    assert 'switchboard_turn_outcomes_total{outcome="answered"} 1.0' in text
