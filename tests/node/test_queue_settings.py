"""The call queue's settings as the node reads them, and its figures on /metrics."""

from __future__ import annotations

import os

import pytest
from prometheus_client import generate_latest

from admin.metrics import NodeMetrics
from bot.queue.line import CallQueue
from node.settings import SettingsError, load_settings


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.upper().startswith("SWITCHBOARD_"):
            monkeypatch.delenv(key)


def test_the_queue_is_off_unless_max_active_is_set() -> None:
    assert not load_settings().queue.enabled


def test_queue_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWITCHBOARD_QUEUE__MAX_ACTIVE", "4")
    monkeypatch.setenv("SWITCHBOARD_QUEUE__MAX_WAITING", "6")
    monkeypatch.setenv("SWITCHBOARD_QUEUE__OVERFLOW_TARGET", "sip:desk@10.0.0.9")
    q = load_settings().queue
    assert (q.max_active, q.max_waiting, q.overflow_target) == (4, 6, "sip:desk@10.0.0.9")


def test_a_queue_the_sip_slots_cannot_hold_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWITCHBOARD_SIP__MAX_CALLS", "10")
    monkeypatch.setenv("SWITCHBOARD_QUEUE__MAX_ACTIVE", "8")
    monkeypatch.setenv("SWITCHBOARD_QUEUE__MAX_WAITING", "4")
    with pytest.raises(SettingsError) as err:
        load_settings()
    (line,) = err.value.problems
    assert "SWITCHBOARD_SIP__MAX_CALLS (10)" in line and "to 12" in line


def test_an_overflow_target_off_the_transfer_list_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SWITCHBOARD_QUEUE__MAX_ACTIVE", "1")
    monkeypatch.setenv("SWITCHBOARD_QUEUE__OVERFLOW_TARGET", "sip:desk@127.0.0.1")
    monkeypatch.setenv("SWITCHBOARD_SIP__TRANSFER_TARGETS", "sip:agents@127.0.0.1")
    with pytest.raises(SettingsError) as err:
        load_settings()
    (line,) = err.value.problems
    assert "OVERFLOW_TARGET (sip:desk@127.0.0.1) is not in" in line, line
    monkeypatch.setenv(
        "SWITCHBOARD_SIP__TRANSFER_TARGETS", "sip:agents@127.0.0.1,sip:desk@127.0.0.1"
    )
    assert load_settings().queue.overflow_target == "sip:desk@127.0.0.1"
    monkeypatch.setenv("SWITCHBOARD_QUEUE__OVERFLOW_TARGET", "the desk")
    with pytest.raises(SettingsError, match="OVERFLOW_TARGET"):
        load_settings()


def test_a_misspelt_queue_setting_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWITCHBOARD_QUEUE__MAX_ACTIV", "4")
    with pytest.raises(SettingsError, match="did you mean SWITCHBOARD_QUEUE__MAX_ACTIVE"):
        load_settings()


def test_queue_depth_and_waits_are_on_metrics() -> None:
    m = NodeMetrics()
    m.add_snapshot(queue=lambda: {"waiting": 3, "active": 2, "max_active": 2})
    m.observe_queue_wait("dequeued", 4.2)
    m.observe_queue_wait("timeout", 120.0)
    text = generate_latest(m.registry).decode()
    assert "switchboard_call_queue_depth 3.0" in text
    assert "switchboard_conversations_active 2.0" in text
    assert "switchboard_conversations_max 2.0" in text
    assert 'switchboard_call_queue_wait_seconds_count{outcome="dequeued"} 1.0' in text
    assert 'switchboard_call_queue_wait_seconds_sum{outcome="timeout"} 120.0' in text


def test_no_queue_figures_without_a_queue() -> None:
    m = NodeMetrics()
    m.add_snapshot(queue=dict)
    assert "switchboard_call_queue_depth" not in generate_latest(m.registry).decode()


def test_longest_wait_and_each_outcomes_count_are_on_metrics() -> None:
    now = [100.0]
    q = CallQueue(max_active=1, max_waiting=3, clock=lambda: now[0])
    m = NodeMetrics()
    m.add_snapshot(queue=lambda: {"waiting": q.waiting, "longest_wait_s": q.longest_wait()})
    q.enter("talking")
    assert "switchboard_call_queue_longest_wait_seconds 0.0" in generate_latest(m.registry).decode()
    q.enter("first in line")
    now[0] = 130.0
    q.enter("second in line")
    now[0] = 142.5
    text = generate_latest(m.registry).decode()
    assert "switchboard_call_queue_longest_wait_seconds 42.5" in text  # the first in line's
    assert "switchboard_call_queue_depth 2.0" in text
    for outcome, seconds in (("transferred", 120.0), ("transferred", 0.0), ("timeout", 120.0)):
        m.observe_queue_wait(outcome, seconds)
    m.observe_queue_wait("closed", 12.0)
    text = generate_latest(m.registry).decode()
    assert 'switchboard_call_queue_callers_total{outcome="transferred"} 2.0' in text
    assert 'switchboard_call_queue_callers_total{outcome="timeout"} 1.0' in text
    assert 'switchboard_call_queue_callers_total{outcome="closed"} 1.0' in text
    assert 'switchboard_call_queue_callers_total{outcome="dequeued"}' not in text


def test_the_adaptive_limit_is_on_with_a_queue_and_its_figure_is_on_metrics(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SWITCHBOARD_QUEUE__MAX_ACTIVE", "8")
    q = load_settings().queue
    assert (q.adaptive, q.min_active, q.busy_wait_ms, q.limit_interval_s) == (True, 2, 150.0, 2.0)
    monkeypatch.setenv("SWITCHBOARD_QUEUE__ADAPTIVE", "false")
    assert not load_settings().queue.adaptive
    line = CallQueue(max_active=8, max_waiting=2)
    m = NodeMetrics()
    m.add_snapshot(queue=lambda: {"max_active": line.max_active, "limit": line.limit})
    line.set_limit(5)
    text = generate_latest(m.registry).decode()
    assert "switchboard_conversations_max 8.0" in text
    assert "switchboard_conversations_limit 5.0" in text
