"""The node's figures in the Prometheus format: turns, stage latencies, cache hits, errors,
calls and SIP counters, models' calls and failures.

Turns are counted as they end (``NodeMetrics.observe_turn``, from the node's turn sink);
SIP and model counters already kept by telephony and serve are read at scrape time, so
nothing on the call path changes for them. Each node has its own registry (no global state).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from bot.pipeline.turn import STAGES, Turn
from telephony.stats import node_stat_keys

#: Routes answered from the intent cache's ready audio.
CACHE_ROUTES = frozenset({"exact", "semantic"})
#: Latency buckets (s): a human turn gap is ~0.2 s, a slow LLM answer several seconds.
LATENCY_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)
#: Call-queue wait buckets (s): from a slot freeing at once to the longest allowed wait.
QUEUE_BUCKETS = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)
#: SIP figures that are levels, not running totals.
_SIP_GAUGES = frozenset({"calls_active", "registered"})


class NodeMetrics:
    """One node's metrics registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.turns = Counter(
            "switchboard_turns", "Caller turns ended, by route", ["route"], registry=r
        )
        self.cache_hits = Counter(
            "switchboard_intent_cache_hits",
            "Turns answered from the intent cache's ready audio",
            registry=r,
        )
        self.stage_seconds = Histogram(
            "switchboard_turn_stage_seconds",
            "Time from the end of the caller's speech to each stage of the turn",
            ["stage"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.voice_to_voice = Histogram(
            "switchboard_voice_to_voice_seconds",
            "End of the caller's speech to the first audio of the answer, by route",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.errors = Counter("switchboard_errors", "Errors, by kind", ["kind"], registry=r)
        self.decisions = Counter(
            "switchboard_turn_decisions",
            "Turns decided, by what the bot did (answer, ask, unsure, decline, generate, "
            "collect) and on which words (first, second: the second recognizer's, own)",
            ["kind", "heard"],
            registry=r,
        )
        self.barge_ins = Counter(
            "switchboard_barge_ins", "Turns the caller interrupted", registry=r
        )
        self.queue_wait = Histogram(
            "switchboard_call_queue_wait_seconds",
            "Time callers spent in the call queue, by how it ended (dequeued, timeout, "
            "abandoned, transferred, closed; full: turned away at once)",
            ["outcome"],
            buckets=QUEUE_BUCKETS,
            registry=r,
        )
        self.queue_outcomes = Counter(
            "switchboard_call_queue_callers",
            "Callers who went through the call queue, by how they left it: dequeued, "
            "abandoned, timeout, transferred (the overflow target), full, closed (the node "
            "stopped)",
            ["outcome"],
            registry=r,
        )

        self.call_outcomes = Counter(
            "switchboard_call_outcomes",
            "Calls ended, by outcome (resolved, transferred, abandoned, refused, failed) and "
            "its reason (docs/calllog.md)",
            ["outcome", "reason"],
            registry=r,
        )
        self.turn_outcomes = Counter(
            "switchboard_turn_outcomes",
            "Turns of ended calls, by outcome (answered, confirmed_no, declined, cut...)",
            ["outcome"],
            registry=r,
        )

    def observe_outcome(self, outcome: str, reason: str, turns: Sequence[str]) -> None:
        """A call ended: one more of its outcome and reason, and of each turn's outcome."""
        self.call_outcomes.labels(outcome, reason).inc()
        for turn in turns:
            self.turn_outcomes.labels(turn).inc()

    def observe_turn(self, turn: Turn) -> None:
        """Count a turn that ended and observe its stage times."""
        self.turns.labels(turn.route).inc()
        if turn.decision is not None:
            self.decisions.labels(turn.decision.kind, turn.decision.heard).inc()
        if turn.route in CACHE_ROUTES:
            self.cache_hits.inc()
        if turn.barged_in:
            self.barge_ins.inc()
        if turn.error:
            self.errors.labels(error_kind(turn.error)).inc()
        since = turn.since_speech_end_ms()
        for stage in STAGES[1:]:
            if stage in since:
                self.stage_seconds.labels(stage).observe(since[stage] / 1000.0)
        if "first_audio_out" in since:
            self.voice_to_voice.labels(turn.route).observe(since["first_audio_out"] / 1000.0)

    def observe_queue_wait(self, outcome: str, seconds: float) -> None:
        """A caller's time in the call queue, as it ended (and one more of its outcome)."""
        self.queue_wait.labels(outcome).observe(seconds)
        self.queue_outcomes.labels(outcome).inc()

    def add_snapshot(
        self,
        *,
        sip: Callable[[], Mapping[str, int]] | None = None,
        models: Callable[[], Mapping[str, Mapping[str, float]]] | None = None,
        live_calls: Callable[[], int] | None = None,
        queue: Callable[[], Mapping[str, float]] | None = None,
        cache_refused: Callable[[], int] | None = None,
    ) -> None:
        """Figures read when scraped: SIP counters, model counters, calls in progress, the
        call queue (``waiting``, ``active``, ``max_active``, ``longest_wait_s``; empty: no
        queue), and the shared
        intent cache's entries refused for a failed signature check."""
        self.registry.register(_Snapshot(sip, models, live_calls, queue, cache_refused))


def error_kind(error: str) -> str:
    """A short label for a turn's error text: the stage that failed (``asr``, ``llm``...)."""
    head = error.split(":", 1)[0].strip().lower()
    word = "".join(ch if ch.isalnum() else "_" for ch in head)[:32]
    return word or "unknown"


_QUEUE_GAUGES = (
    ("waiting", "switchboard_call_queue_depth", "Callers waiting in the call queue"),
    ("active", "switchboard_conversations_active", "Calls talking to the bot (queue slots)"),
    ("max_active", "switchboard_conversations_max", "Conversations the node holds at once"),
    (
        "limit",
        "switchboard_conversations_limit",
        "Conversations the node holds at once now: at most the maximum, fewer while its "
        "model work waits for the CPU (the adaptive limit)",
    ),
    (
        "longest_wait_s",
        "switchboard_call_queue_longest_wait_seconds",
        "How long the first caller in line has waited so far (0: nobody in line)",
    ),
)


class _Snapshot(Collector):
    def __init__(
        self,
        sip: Callable[[], Mapping[str, int]] | None,
        models: Callable[[], Mapping[str, Mapping[str, float]]] | None,
        live_calls: Callable[[], int] | None,
        queue: Callable[[], Mapping[str, float]] | None = None,
        cache_refused: Callable[[], int] | None = None,
    ) -> None:
        self._sip = sip
        self._models = models
        self._live = live_calls
        self._queue = queue
        self._cache_refused = cache_refused

    def collect(self) -> Iterable[Metric]:
        if self._live is not None:
            yield GaugeMetricFamily(
                "switchboard_calls_active", "Calls in progress on this node", value=self._live()
            )
        queue = self._queue() if self._queue is not None else {}
        for key, name, doc in _QUEUE_GAUGES:
            if key in queue:
                yield GaugeMetricFamily(name, doc, value=queue[key])
        if self._cache_refused is not None:
            yield CounterMetricFamily(
                "switchboard_intent_cache_refused",
                "Intent cache entries and indexes read from Redis and refused for a failed "
                "signature check",
                value=self._cache_refused(),
            )
        if self._sip is not None:
            stats = self._sip()
            for key in (*node_stat_keys(), "worker_restarts"):
                if key not in stats:
                    continue
                name = f"switchboard_sip_{key.removesuffix('_total')}"
                doc = f"SIP front and workers: {key.replace('_', ' ')}"
                if key in _SIP_GAUGES:
                    yield GaugeMetricFamily(name, doc, value=stats[key])
                else:
                    yield CounterMetricFamily(name, doc, value=stats[key])
            for key in ("workers", "workers_up", "front_relays_open", "front_stream_open"):
                if key in stats:
                    yield GaugeMetricFamily(
                        f"switchboard_sip_{key}", f"SIP node now: {key}", value=stats[key]
                    )
        if self._models is not None:
            calls = CounterMetricFamily(
                "switchboard_model_calls", "Calls into each model", labels=["model"]
            )
            failures = CounterMetricFamily(
                "switchboard_model_failures",
                "Failed model calls, by model and kind (error, timeout)",
                labels=["model", "kind"],
            )
            for model, m in self._models().items():
                calls.add_metric([model], m.get("count", 0.0))
                failures.add_metric([model, "error"], m.get("errors", 0.0))
                failures.add_metric([model, "timeout"], m.get("timeouts", 0.0))
            yield calls
            yield failures
