"""The tier's autoscaling policy: replicas for the calls in flight and the callers queued.

Ray Serve's default policy counts requests per replica. On a phone line that signal comes
late: a call in flight asks the LLM only between the caller's words, and a caller waiting
in the queue asks nothing yet, but will within seconds of being answered. This policy sizes
each deployment for the calls themselves:

    wanted = ceil((calls in flight + queue depth * queue_weight) / calls_per_replica)

and never below what the requests already there need (``ceil(ongoing / max_ongoing)``, a
guard against a node that stopped reporting), bounded by ``min_replicas``/``max_replicas``.
Ray Serve applies ``upscale_delay_s``/``downscale_delay_s`` on top. The inputs come from the
nodes (``serve.scale.load``) through each replica's ``record_autoscaling_stats``;
docs/scaling.md explains how to tune it.

Pure Python: ``decide`` is unit-tested without Ray; ``CallQueuePolicy`` reads Serve's
``AutoscalingContext``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Names of the metrics each replica reports (``record_autoscaling_stats``).
CALLS_IN_FLIGHT = "calls_in_flight"
CALL_QUEUE_DEPTH = "call_queue_depth"
#: How many nodes' reports were fresh: 0 means no node reports, and only requests count.
NODES_REPORTING = "nodes_reporting"


@dataclass(frozen=True)
class TierLoad:
    """What the nodes report, summed over nodes, and what Serve counts itself."""

    calls_in_flight: float
    call_queue_depth: float
    #: Requests running and queued at this deployment, over all its replicas.
    ongoing_requests: float
    nodes_reporting: int = 1


@dataclass(frozen=True)
class Sizing:
    """One deployment's bounds and per-replica capacity."""

    min_replicas: int
    max_replicas: int
    calls_per_replica: float
    max_ongoing_requests: int
    #: A queued caller counts this much of a call in flight (1: fully, as they will be
    #: answered as soon as a slot frees).
    queue_weight: float = 1.0


def decide(load: TierLoad, sizing: Sizing) -> int:
    """The replicas ``sizing``'s deployment should have under ``load``."""
    by_requests = math.ceil(max(0.0, load.ongoing_requests) / sizing.max_ongoing_requests)
    by_calls = 0
    if load.nodes_reporting > 0:
        demand = max(0.0, load.calls_in_flight) + sizing.queue_weight * max(
            0.0, load.call_queue_depth
        )
        by_calls = math.ceil(demand / sizing.calls_per_replica - 1e-9)
    wanted = max(by_calls, by_requests, sizing.min_replicas)
    return min(wanted, sizing.max_replicas)


def load_from_metrics(
    metrics: Mapping[str, Mapping[Any, float]] | None, ongoing_requests: float
) -> TierLoad:
    """The load from the replicas' reports: every replica reads the same board, so the
    freshest (largest) value of each counts once, not summed over replicas."""
    metrics = metrics or {}

    def largest(name: str) -> float:
        values = [v for v in (metrics.get(name) or {}).values() if math.isfinite(v)]
        return max(values) if values else 0.0

    return TierLoad(
        calls_in_flight=largest(CALLS_IN_FLIGHT),
        call_queue_depth=largest(CALL_QUEUE_DEPTH),
        ongoing_requests=ongoing_requests,
        nodes_reporting=int(largest(NODES_REPORTING)),
    )


class CallQueuePolicy:
    """A Ray Serve custom autoscaling policy (``AutoscalingPolicy(policy_function=...,
    policy_kwargs=...)``): an instance is called with each tick's ``AutoscalingContext``."""

    def __init__(
        self,
        *,
        min_replicas: int,
        max_replicas: int,
        calls_per_replica: float,
        max_ongoing_requests: int,
        queue_weight: float = 1.0,
    ) -> None:
        self.sizing = Sizing(
            min_replicas=min_replicas,
            max_replicas=max_replicas,
            calls_per_replica=calls_per_replica,
            max_ongoing_requests=max_ongoing_requests,
            queue_weight=queue_weight,
        )

    def __call__(self, ctx: Any) -> tuple[int, dict[str, Any]]:
        load = load_from_metrics(ctx.aggregated_metrics, float(ctx.total_num_requests))
        wanted = decide(load, self.sizing)
        state = dict(ctx.policy_state or {})
        state["last_load"] = {
            "calls_in_flight": load.calls_in_flight,
            "call_queue_depth": load.call_queue_depth,
            "ongoing_requests": load.ongoing_requests,
            "wanted": wanted,
        }
        return wanted, state
