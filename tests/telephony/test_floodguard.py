"""FloodGuard: per-source and node-wide token buckets, bans, bounded tables (a fake clock)."""

from __future__ import annotations

import logging

import pytest

from telephony.floodguard import FloodGuard, FrontLimits


def test_a_source_over_its_rate_is_dropped_then_refilled() -> None:
    g = FloodGuard(FrontLimits(per_source_rate=10, per_source_burst=5), now=0.0)
    assert [g.admit("10.0.0.1", 0.0) for _ in range(7)] == [True] * 5 + [False] * 2
    assert g.admit("10.0.0.2", 0.0)  # another source has its own bucket
    assert not g.admit("10.0.0.1", 0.05)  # half a token
    assert g.admit("10.0.0.1", 0.2)  # 0.15 s later: 1.5 tokens more
    assert g.counters["front_dropped_rate"] == 3 and g.counters["front_bans"] == 0


def test_a_flooding_source_is_banned_and_the_ban_ends(caplog: pytest.LogCaptureFixture) -> None:
    lim = FrontLimits(per_source_rate=1, per_source_burst=2, ban_after_drops=5, ban_s=30)
    g = FloodGuard(lim, now=0.0)
    with caplog.at_level(logging.WARNING, logger="telephony.floodguard"):
        results = [g.admit("10.0.0.9", 0.0) for _ in range(10)]
    assert results == [True, True] + [False] * 8
    assert g.banned("10.0.0.9", 1.0) and g.counters["front_bans"] == 1
    assert g.counters["front_dropped_rate"] == 5 and g.counters["front_dropped_banned"] == 3
    assert "banned 10.0.0.9 for 30 s (5 datagrams over its rate)" in caplog.text
    assert not g.admit("10.0.0.9", 29.0)  # still banned, though its bucket has refilled
    assert g.admit("10.0.0.9", 30.5)  # the ban is over: a fresh bucket
    assert not g.banned("10.0.0.9", 30.5)


def test_drops_spread_over_time_do_not_ban() -> None:
    lim = FrontLimits(per_source_rate=1, per_source_burst=1, ban_after_drops=3, ban_window_s=5)
    g = FloodGuard(lim, now=0.0)
    for t in range(0, 60, 6):  # two datagrams at once every 6 s: one dropped each time
        assert g.admit("10.0.0.3", float(t))
        assert not g.admit("10.0.0.3", float(t))
    assert g.counters["front_bans"] == 0


def test_failed_authentications_ban() -> None:
    g = FloodGuard(FrontLimits(ban_after_auth_failures=3, ban_s=60), now=0.0)
    for t in (0.0, 1.0):
        g.auth_failed("10.0.0.4", t)
    assert g.admit("10.0.0.4", 2.0)
    g.auth_failed("10.0.0.4", 2.5)
    assert not g.admit("10.0.0.4", 3.0) and g.counters["front_auth_failures"] == 3


def test_the_node_rate_holds_for_every_source_together() -> None:
    g = FloodGuard(FrontLimits(node_rate=10, node_burst=4), now=0.0)
    admitted = [g.admit(f"10.0.1.{i}", 0.0) for i in range(6)]  # six sources, one each
    assert admitted == [True] * 4 + [False] * 2
    assert g.counters["front_dropped_node_rate"] == 2 and g.counters["front_dropped_rate"] == 0
    assert g.admit("10.0.1.9", 0.1)  # refilled


def test_tables_are_bounded_and_say_so(caplog: pytest.LogCaptureFixture) -> None:
    lim = FrontLimits(max_sources=3, max_bans=2, per_source_burst=1, ban_after_auth_failures=1)
    g = FloodGuard(lim, now=0.0)
    with caplog.at_level(logging.WARNING, logger="telephony.floodguard"):
        for i in range(10):
            g.admit(f"10.0.2.{i}", 0.0)
        for i in range(4):
            g.auth_failed(f"10.0.3.{i}", float(i))
    assert len(g.sources) <= 3 and len(g.bans) == 2
    assert set(g.bans) == {"10.0.3.2", "10.0.3.3"}  # the bans ending soonest made room
    assert g.counters["front_sources_evicted"] >= 7 and g.counters["front_bans_evicted"] == 2
    full = [r.getMessage() for r in caplog.records if "table is full" in r.getMessage()]
    assert len(full) == 2  # once per table within a minute
    assert "SWITCHBOARD_SIP__LIMITS__MAX_SOURCES" in full[0]
    assert "SWITCHBOARD_SIP__LIMITS__MAX_BANS" in full[1]


def test_sweep_forgets_idle_sources_and_ended_bans() -> None:
    g = FloodGuard(FrontLimits(ban_s=10, ban_after_auth_failures=1), now=0.0)
    g.admit("10.0.4.1", 0.0)
    g.auth_failed("10.0.4.2", 0.0)
    g.sweep(5.0)
    assert "10.0.4.1" in g.sources and "10.0.4.2" in g.bans
    g.sweep(100.0)
    assert not g.sources and not g.bans


def test_answers_never_acked_ban_their_source(caplog: pytest.LogCaptureFixture) -> None:
    lim = FrontLimits(ban_after_unacked=3, unacked_window_s=100, ban_s=60)
    g = FloodGuard(lim, now=0.0)
    g.unacked("10.0.5.1", 0.0)
    g.unacked("10.0.5.1", 50.0)
    g.sweep(60.0)  # its datagram bucket is long forgotten; its unACKed calls are not
    assert "10.0.5.1" not in g.sources and g.admit("10.0.5.1", 60.0)
    with caplog.at_level(logging.WARNING, logger="telephony.floodguard"):
        g.unacked("10.0.5.1", 90.0)
    assert not g.admit("10.0.5.1", 91.0) and g.counters["front_bans"] == 1
    assert "banned 10.0.5.1 for 60 s (3 answered calls never ACKed)" in caplog.text
    # spread wider than the window: never three in one, no ban
    for t in (200.0, 250.0, 310.0, 360.0, 420.0):
        g.unacked("10.0.5.2", t)
    assert g.admit("10.0.5.2", 421.0) and g.counters["front_bans"] == 1
    g.sweep(1000.0)
    assert not g.unacked_seen


def test_an_upstream_proxy_is_never_banned_and_has_no_per_source_rate(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Behind a proxy every caller comes from its address: banning it would cut off all."""
    lim = FrontLimits(
        per_source_rate=1,
        per_source_burst=2,
        ban_after_drops=3,
        ban_after_unacked=2,
        node_rate=100,
        node_burst=50,
        upstreams=["10.1.0.0/24", "192.0.2.7"],
    )
    g = FloodGuard(lim, now=0.0)
    with caplog.at_level(logging.WARNING, logger="telephony.floodguard"):
        assert all(g.admit("10.1.0.5", 0.0) for _ in range(40))  # no per-source bucket
        for _ in range(3):
            g.unacked("192.0.2.7", 1.0)
            g.auth_failed("192.0.2.7", 1.0)
    assert not g.banned("192.0.2.7", 2.0) and g.admit("192.0.2.7", 2.0)
    assert g.counters["front_bans"] == 0 and g.counters["front_upstream_spared"] >= 1
    assert "upstream 192.0.2.7 not banned" in caplog.text
    # The node-wide rate still holds for it.
    assert not all(g.admit("10.1.0.5", 2.0) for _ in range(60))
    # Anyone else is limited and banned as before.
    assert [g.admit("10.1.1.5", 3.0) for _ in range(6)] == [True, True] + [False] * 4
    assert g.banned("10.1.1.5", 3.5)
