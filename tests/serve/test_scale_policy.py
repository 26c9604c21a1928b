"""The tier's autoscaling policy: replicas for given calls in flight, queue depths and loads."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from serve.scale.policy import (
    CALL_QUEUE_DEPTH,
    CALLS_IN_FLIGHT,
    NODES_REPORTING,
    CallQueuePolicy,
    Sizing,
    TierLoad,
    decide,
    load_from_metrics,
)

LLM = Sizing(min_replicas=1, max_replicas=4, calls_per_replica=8, max_ongoing_requests=8)


def load(in_flight: float, queued: float = 0, ongoing: float = 0, nodes: int = 1) -> TierLoad:
    return TierLoad(in_flight, queued, ongoing, nodes)


@pytest.mark.parametrize(
    ("in_flight", "queued", "wanted"),
    [
        (0, 0, 1),  # idle: the floor
        (1, 0, 1),
        (8, 0, 1),  # exactly one replica's worth
        (9, 0, 2),  # one call more
        (8, 1, 2),  # a caller waiting counts like a call: they are answered next
        (8, 9, 3),
        (16, 16, 4),
        (40, 100, 4),  # the ceiling
    ],
)
def test_replicas_follow_calls_and_queue(in_flight: int, queued: int, wanted: int) -> None:
    assert decide(load(in_flight, queued), LLM) == wanted


def test_queued_callers_weigh_as_configured() -> None:
    half = Sizing(1, 10, calls_per_replica=4, max_ongoing_requests=8, queue_weight=0.5)
    assert decide(load(4, 0), half) == 1
    assert decide(load(4, 2), half) == 2  # 4 + 0.5 * 2 = 5 calls
    assert decide(load(4, 8), half) == 2  # 4 + 4 = 8 calls: two replicas exactly
    assert decide(load(4, 9), half) == 3


def test_requests_already_there_are_a_floor() -> None:
    # A node stopped reporting, but its requests still arrive: they decide.
    assert decide(load(0, 0, ongoing=20, nodes=0), LLM) == 3
    # Reported calls ask for less than the requests present: the requests win.
    assert decide(load(2, 0, ongoing=17), LLM) == 3
    # No node reports: calls count for nothing (a stale report must not hold replicas).
    assert decide(load(40, 40, ongoing=0, nodes=0), LLM) == 1


def test_bounds_and_bad_inputs() -> None:
    pinned = Sizing(min_replicas=2, max_replicas=2, calls_per_replica=1, max_ongoing_requests=1)
    assert decide(load(0), pinned) == 2
    assert decide(load(50, 50, 50), pinned) == 2
    assert decide(load(-3, -1, -5), LLM) == 1


def test_the_policy_reads_the_replicas_reports() -> None:
    # Every replica reads the same board: the largest value counts once, not the sum.
    metrics = {
        CALLS_IN_FLIGHT: {"r1": 12.0, "r2": 12.0, "r3": 11.0},
        CALL_QUEUE_DEPTH: {"r1": 5.0, "r2": 4.0},
        NODES_REPORTING: {"r1": 2.0, "r2": 2.0},
    }
    got = load_from_metrics(metrics, ongoing_requests=3.0)
    assert got == TierLoad(12.0, 5.0, 3.0, 2)
    assert load_from_metrics(None, 4.0) == TierLoad(0.0, 0.0, 4.0, 0)
    assert load_from_metrics({CALLS_IN_FLIGHT: {"r": float("nan")}}, 0).calls_in_flight == 0.0


def test_the_policy_is_called_with_serve_context() -> None:
    policy = CallQueuePolicy(
        min_replicas=1, max_replicas=3, calls_per_replica=2, max_ongoing_requests=4
    )
    ctx = SimpleNamespace(
        aggregated_metrics={
            CALLS_IN_FLIGHT: {"r1": 3.0},
            CALL_QUEUE_DEPTH: {"r1": 2.0},
            NODES_REPORTING: {"r1": 1.0},
        },
        total_num_requests=1.0,
        policy_state={"kept": 1},
    )
    wanted, state = policy(ctx)
    assert wanted == 3  # (3 + 2) / 2 -> 3
    assert state["kept"] == 1
    assert state["last_load"]["wanted"] == 3
    ctx.aggregated_metrics = {NODES_REPORTING: {"r1": 1.0}}
    assert policy(ctx)[0] == 1  # drained
