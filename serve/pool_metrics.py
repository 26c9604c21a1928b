"""The shared pool's queue in the Prometheus format: work submitted, queued, dropped over
its budget and withdrawn, by urgency, and what waits now.

Read at scrape time from the pool's own counters (``PriorityPool.counts``), as the node's
other model figures are: nothing on the call path changes for them. A node registers one
``PoolCollector`` in its registry (``registry.register(PoolCollector())``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from serve.base import shared_executor
from serve.priority_pool import PriorityPool

#: (count in ``PriorityPool.counts``, metric name, help), one counter each, by urgency.
POOL_COUNTERS = (
    ("submitted", "switchboard_model_pool_submitted", "Model jobs submitted to the shared pool"),
    (
        "queued",
        "switchboard_model_pool_queued",
        "Model jobs that found no free worker in the shared pool and waited",
    ),
    (
        "dropped",
        "switchboard_model_pool_dropped",
        "Model jobs dropped before they ran: speculative work that waited over its budget",
    ),
    (
        "withdrawn",
        "switchboard_model_pool_withdrawn",
        "Model jobs withdrawn before they ran: the caller spoke again",
    ),
    (
        "wait_seconds",
        "switchboard_model_pool_wait_seconds",
        "Seconds the shared pool's started jobs waited for a worker, in all",
    ),
)


class PoolCollector(Collector):
    """The counters of ``pool`` (the shared pool unless given), labelled by urgency
    (``now``: a turn has ended; ``ahead``: work in a caller's pause; ``spare``: work that may
    not be needed), and the jobs waiting."""

    def __init__(self, pool: Callable[[], PriorityPool] = shared_executor) -> None:
        self._pool = pool

    def collect(self) -> Iterable[Metric]:
        pool = self._pool()
        counts = pool.counts()
        for key, name, doc in POOL_COUNTERS:
            family = CounterMetricFamily(name, doc, labels=["urgency"])
            for urgency, values in counts.items():
                family.add_metric([urgency], values[key])
            yield family
        waiting = GaugeMetricFamily(
            "switchboard_model_pool_waiting",
            "Model jobs waiting for a worker of the shared pool now",
            labels=["urgency"],
        )
        for urgency, n in pool.waiting_by_level().items():
            waiting.add_metric([urgency], n)
        yield waiting
