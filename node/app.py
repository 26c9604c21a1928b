"""A bot node: models loaded and warmed, then the SIP endpoint answering calls."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import signal
import sys
import time
from contextlib import aclosing
from typing import Any

from threadpoolctl import threadpool_limits

from admin.app import create_app
from admin.metrics import NodeMetrics
from admin.server import AdminServer
from bot.calllog import CallLog
from bot.calllog.store import make_engine
from bot.config.store import Versioned
from bot.intents.cache import IntentCache
from bot.intents.store import CacheStore, MemoryStore, RedisStore, redis_store
from bot.knowledge.index import KnowledgeIndex
from bot.lookups.webhook import Webhooks
from bot.pipeline.call_port import CallPort
from bot.pipeline.clock import MONOTONIC
from bot.pipeline.prompts import PromptAudio
from bot.pipeline.session import CallSession, fixed_phrases
from bot.pipeline.speech_cache import SpeechCache
from bot.pipeline.stages.call_control import overflow_targets
from bot.pipeline.turn import Turn
from bot.pipeline.turnlog import TurnSink, log_turn, log_turn_with_text
from bot.profile import BotProfile, load_profile
from bot.queue.limit import LimitKeeper
from bot.queue.line import CallQueue
from bot.queue.lobby import Lobby
from bot.recording import CallRecorder, RecordedCall, recording_path
from node.admin_port import AdminPort
from node.call_places import CallPlaces
from node.calllog import database_url, node_name, open_call_log, recordings_dir
from node.config_sync import ConfigSync
from node.heap import freeze_startup_objects
from node.looplag import LoopLagMonitor
from node.settings import Settings
from serve import ChatMessage, ModelSet, load_models
from serve.base import shared_executor, unhurried
from serve.pool_metrics import PoolCollector
from serve.registry import ModelSpec
from telephony import SipServer
from telephony.config import SAMPLE_RATE
from telephony.webrtc import WebRtcCalls

log = logging.getLogger(__name__)


class Node:
    """Everything one ``switchboard run`` process holds."""

    def __init__(self, settings: Settings, profile: BotProfile) -> None:
        self.settings = settings
        self.profile = profile
        self.models: ModelSet | None = None
        self.speech_cache = SpeechCache.from_settings(settings.speech_cache, settings.data_dir)
        self.prompts = PromptAudio(sample_rate=SAMPLE_RATE, speech_cache=self.speech_cache)
        self.endpoint: SipServer | None = None
        self.call_log: CallLog | None = None
        self.intent_cache: IntentCache | None = None
        self.knowledge: KnowledgeIndex | None = None
        self.webhooks: Webhooks | None = None
        #: The call queue (``SWITCHBOARD_QUEUE__MAX_ACTIVE`` set): callers beyond it wait.
        self.lobby: Lobby | None = None
        #: Its limit, moved by the model pool's load (``SWITCHBOARD_QUEUE__ADAPTIVE``).
        self.queue_limit: LimitKeeper | None = None
        self._sessions: set[asyncio.Task[None]] = set()
        self.loop_lag = LoopLagMonitor(report_every_s=settings.loop_lag_report_s)
        #: The Ray Serve tier (``SWITCHBOARD_TIER__BACKEND=ray``) and the node's load report.
        self.tier: Any = None
        self._load_reporter: Any = None
        self._sip_report: asyncio.Task[None] | None = None
        self.admin: AdminServer | None = None
        self.config: ConfigSync | None = None
        self.webrtc: WebRtcCalls | None = None
        #: The node's one count of calls, SIP and browser: its call limit and its drain.
        self.places = CallPlaces()
        self.metrics = NodeMetrics()
        # The shared model pool's work by urgency: submitted, queued, dropped over budget.
        self.metrics.registry.register(PoolCollector())
        self.metrics.add_snapshot(
            sip=lambda: self.endpoint.stats() if self.endpoint is not None else {},
            models=self._model_metrics,
            live_calls=lambda: len(self.call_log.live_calls()) if self.call_log else 0,
            queue=self._queue_metrics,
            cache_refused=self._cache_refused,
        )

    async def start(self) -> None:
        """Load and warm the models, synthesize fixed phrases, then start answering."""
        started = time.monotonic()
        # First: a database on the wrong schema stops the node before models load.
        self.call_log = await open_call_log(self.settings)
        if self.call_log is not None:
            self.call_log.on_outcome = self.metrics.observe_outcome
        # The configuration: the database's newest version (the file seeds an empty one).
        self.config = ConfigSync(
            make_engine(database_url(self.settings)),
            poll_s=self.settings.admin.config_poll_s,
            apply=self._apply_config,
            node=node_name(self.settings),
        )
        found = await self.config.initial(self.profile, f"profile:{self.settings.profile.name}")
        if found is not None:
            self.profile = found.profile
            self.call_log.config_version = str(found.version)
        self._warn_unlisted_targets(self.profile)
        if self.settings.admin.enabled:
            await self._start_admin()
        spec = self.settings.models
        if not self.profile.intents and not self.profile.knowledge:
            # Sentence embeddings serve the intent cache and the knowledge base only.
            spec = spec.model_copy(update={"embedder": None})
        self.models = await self._load_models(spec)
        # No caller waits for start-up: on a loaded machine it is not held to a turn's
        # model timeouts (the intent cache's watcher starts outside, as calls do).
        with unhurried():
            for text in fixed_phrases(self.profile):
                await self.prompts.add(self.models.tts, text)
        if self.profile.intents and self.models.embedder is not None:
            self.intent_cache = await self._start_intent_cache(self.models, self.profile)
        if self.profile.knowledge and self.models.embedder is not None:
            with unhurried():
                self.knowledge = await KnowledgeIndex.build(
                    self.profile.knowledge, self.models.embedder, self.profile.knowledge_matching
                )
        with unhurried():
            await self._warm_system_prompt(self.models)
        queue = self.settings.queue
        if queue.max_active is not None:
            line = CallQueue(queue.max_active, queue.max_waiting, clock=MONOTONIC.now)
            # The models' work is this node's own (not the tier's, which scales on the
            # queue's depth instead): the limit follows how long that work waits.
            if queue.adaptive and self.settings.tier.backend == "in-process":
                self.queue_limit = LimitKeeper(
                    line,
                    shared_executor().counts,
                    min_active=queue.min_active,
                    busy_wait_ms=queue.busy_wait_ms,
                    interval_s=queue.limit_interval_s,
                    settle_s=queue.limit_settle_s,
                )
            self.lobby = Lobby(
                line,
                queue,
                self.prompts,
                self.models.tts,
                call_log=self.call_log,
                on_wait=self.metrics.observe_queue_wait,
                targets=overflow_targets(
                    lambda: self.profile, frozenset(self.settings.sip.transfer_targets) or None
                ),
                transfer_timeout_s=self.profile.transfer_timeout_s,
                clock=MONOTONIC,  # the calls' clock
            )
            with unhurried():  # the queue's prompts, made before any call as above
                await self.lobby.prepare()
        if self.profile.lookups:
            secrets = {k: v.get_secret_value() for k, v in self.settings.lookup_secrets.items()}
            self.webhooks = Webhooks(self.profile.lookups, secrets)
        # What the node keeps for its life, out of the collector's way before the first
        # call: the calls' garbage is then collected soon after each call (node/heap.py).
        frozen = freeze_startup_objects()
        log.debug("%d objects of the start left out of garbage collection", frozen)
        self.endpoint = SipServer(self.settings.sip, self._on_call)
        await self.endpoint.start()
        self.places.sip = self.endpoint  # browser calls from now on, as phone calls
        self.loop_lag.start()
        if self.queue_limit is not None:
            self.queue_limit.start()
        if self._load_reporter is not None:
            self._load_reporter.start()
        self._sip_report = asyncio.get_running_loop().create_task(
            self._report_sip(), name="sip-stats"
        )
        self.config.start()
        sip = self.settings.sip
        where = [f"udp:{sip.host}:{sip.port}"] + [
            f"{proto.lower()}:{sip.host}:{port}"
            for proto in ("TCP", "TLS")
            if (port := self.endpoint.stream_port(proto)) is not None
        ]
        log.info(
            "ready: answering SIP on %s (started in %.1fs)",
            ", ".join(where),
            time.monotonic() - started,
        )

    async def _load_models(self, spec: ModelSpec) -> ModelSet:
        """The models in this process, or the tier's ``ray`` backends (Ray is imported
        only then: the embedded default never loads it)."""
        tier = self.settings.tier
        if tier.backend == "in-process":
            return await load_models(spec, progress=_progress)
        from serve.scale.cluster import connect_tier  # noqa: PLC0415 - optional extra
        from serve.scale.load import LoadReporter  # noqa: PLC0415

        self.tier = await connect_tier(spec, tier, progress=_progress)
        self._load_reporter = LoadReporter(
            tier,
            node_name(self.settings),
            calls_in_flight=lambda: len(self._sessions),
            call_queue_depth=lambda: self.lobby.queue.waiting if self.lobby is not None else 0,
        )
        models: ModelSet = self.tier.models
        return models

    async def _apply_config(self, found: Versioned) -> None:
        """Run configuration ``found`` from the next call on; only new phrases and changed
        intents are synthesized (the intent cache and the prompts keep what they have)."""
        assert self.models is not None
        profile, models = found.profile, self.models
        started = time.monotonic()
        for text in fixed_phrases(profile):
            await self.prompts.add(models.tts, text)
        if models.embedder is None:
            if profile.intents or profile.knowledge:
                log.warning(
                    "configuration %d has intents or knowledge, but this node started without "
                    "them and has no sentence embedder loaded: restart it to use them",
                    found.version,
                )
        else:
            # Everything that can fail first, then swapped in: a version this node cannot
            # apply leaves the one it ran in use, not half of each.
            knowledge = self.knowledge
            if (profile.knowledge, profile.knowledge_matching) != (
                self.profile.knowledge,
                self.profile.knowledge_matching,
            ):
                knowledge = (
                    await KnowledgeIndex.build(
                        profile.knowledge, models.embedder, profile.knowledge_matching
                    )
                    if profile.knowledge
                    else None
                )
            if self.intent_cache is not None:
                await self.intent_cache.publish(profile.intents, profile.intent_matching)
            elif profile.intents:
                self.intent_cache = await self._start_intent_cache(models, profile)
            self.knowledge = knowledge
        self.profile = profile
        self._warn_unlisted_targets(profile)
        if self.call_log is not None:
            self.call_log.config_version = str(found.version)
        log.info(
            "configuration version %d (%s) in use from the next call (applied in %.0f ms)",
            found.version,
            found.comment,
            (time.monotonic() - started) * 1000,
        )

    def _webrtc_calls(self) -> WebRtcCalls | None:
        """Browser test calls, when the ``webrtc`` extra (aiortc) is installed."""
        if importlib.util.find_spec("aiortc") is None:
            log.info("browser test calls off: the webrtc extra (aiortc) is not installed")
            return None
        # A browser test call takes a place a phone call could have (node/call_places.py).
        self.webrtc = WebRtcCalls(
            self._on_call, sample_rate=SAMPLE_RATE, take_place=self.places.take_browser
        )
        self.places.browser = self.webrtc
        return self.webrtc

    def _queue_metrics(self) -> dict[str, float]:
        if self.lobby is None:
            return {}
        q = self.lobby.queue
        return {
            "waiting": q.waiting,
            "active": q.active,
            "max_active": q.max_active,
            "limit": q.limit,
            "longest_wait_s": round(q.longest_wait(), 1),
        }

    def _model_metrics(self) -> dict[str, dict[str, float]]:
        m = self.models
        if m is None:
            return {}
        kinds = {"asr": m.asr, "llm": m.llm, "tts": m.tts, "vad": m.vad, "embedder": m.embedder}
        return {kind: p.metrics() for kind, p in kinds.items() if p is not None}

    def _cache_refused(self) -> int:
        store = None if self.intent_cache is None else self.intent_cache.store
        return store.refused if isinstance(store, RedisStore) else 0

    def _warn_unlisted_targets(self, profile: BotProfile) -> None:
        """A profile's transfer target outside SWITCHBOARD_SIP__TRANSFER_TARGETS is a
        configuration mistake: said at once, not when a caller asks for it."""
        listed = set(self.settings.sip.transfer_targets)
        for target in sorted(profile.transfer_uris() - listed if listed else ()):
            log.warning(
                "transfer target %s of the profile is not in SWITCHBOARD_SIP__TRANSFER_TARGETS: "
                "transfers to it will be refused",
                target,
            )

    async def _start_admin(self) -> None:
        """The REST API and console, on the call log's database, in this event loop."""
        cfg = self.settings.admin
        app = create_app(
            make_engine(database_url(self.settings)),
            cfg,
            node=AdminPort(self, self._webrtc_calls()),
            recordings_dir=recordings_dir(self.settings),
        )
        self.admin = AdminServer(app, cfg.host, cfg.port)
        await self.admin.start()

    async def _start_intent_cache(self, models: ModelSet, profile: BotProfile) -> IntentCache:
        assert models.embedder is not None
        cfg = self.settings.intent_cache
        store: CacheStore = (
            MemoryStore()
            if self.settings.redis_url is None
            else redis_store(self.settings.redis_url, cfg)
        )
        m = self.settings.models
        cache = IntentCache(
            store,
            models.embedder,
            models.tts,
            voice=f"{m.tts}:{m.tts_voice_path or 'packaged'}",
            sample_rate=SAMPLE_RATE,
            stale_after_s=cfg.stale_after_s,
            heartbeat_s=cfg.heartbeat_s,
            retry_max_s=cfg.retry_max_s,
            speech_cache=self.speech_cache,
        )
        with unhurried():
            await cache.publish(profile.intents, profile.intent_matching)
        cache.start()
        return cache

    async def _warm_system_prompt(self, models: ModelSet) -> None:
        # llama.cpp keeps the KV cache of the last prompt's prefix: evaluating the system
        # prompt now saves the first caller several hundred ms on their first answer.
        warm = [
            ChatMessage(role="system", content=self.profile.system_prompt),
            ChatMessage(role="user", content="Hello"),
        ]
        async with aclosing(models.llm.stream(warm, max_tokens=1)) as pieces:
            async for _ in pieces:
                pass

    async def _on_call(self, call: CallPort) -> None:
        assert self.models is not None
        log_line = log_turn_with_text if self.settings.log_transcripts else log_turn
        call_log = self.call_log

        metrics = self.metrics

        def on_turn(turn: Turn) -> None:
            log_line(turn)
            metrics.observe_turn(turn)
            if call_log is not None:
                call_log.turn_finished(turn)

        recorder: CallRecorder | None = None
        if self.profile.recording.enabled:
            path = recording_path(recordings_dir(self.settings), call.call_id)
            try:
                recorder = CallRecorder(path.resolve(), call.sample_rate)
            except OSError as exc:  # a full or read-only disk degrades the call, no more
                log.error("call %s: cannot record: %s", call.call_id, exc)
            else:
                call = RecordedCall(call, recorder)
        admission = None
        if self.lobby is not None:  # beyond the node's conversations: in line first
            recording = None if recorder is None else str(recorder.path)
            try:
                admission = await self.lobby.admit(call, recording=recording)
            except BaseException:
                if recorder is not None:
                    recorder.close()
                raise
            if admission.ticket is None:  # ended in line: timed out, transferred, hung up...
                if recorder is not None:
                    recorder.close()
                return
        sink: TurnSink = on_turn
        ticket = admission.ticket if admission is not None else None
        if ticket is not None and self.lobby is not None:
            line = self.lobby.queue

            def sink(turn: Turn) -> None:
                line.heard(ticket)  # the conversation's load now shows (the adaptive limit)
                on_turn(turn)

        try:
            await self._converse(call, recorder, sink)
        finally:
            if self.lobby is not None and ticket is not None:
                self.lobby.release(ticket)  # the next caller in line

    async def _converse(
        self, call: CallPort, recorder: CallRecorder | None, on_turn: TurnSink
    ) -> None:
        assert self.models is not None
        session = CallSession(
            call,
            self.models,
            self.profile,
            self.prompts,
            on_turn=on_turn,
            call_log=self.call_log,
            intent_cache=self.intent_cache,
            call_actions=self.settings.call_actions,
            knowledge=self.knowledge,
            webhooks=self.webhooks,
            recording=None if recorder is None else str(recorder.path),
            transfer_targets=frozenset(self.settings.sip.transfer_targets) or None,
        )
        task = asyncio.current_task()
        if task is not None:
            self._sessions.add(task)
        try:
            await session.run()
        finally:
            if recorder is not None:
                recorder.close()
            if task is not None:
                self._sessions.discard(task)

    def log_sip_stats(self) -> None:
        """The SIP node's counters (the front's decisions, the workers' calls) as one line."""
        if self.endpoint is None:
            return
        counters = {k: v for k, v in self.endpoint.stats().items() if v}
        log.info("sip stats", extra={"record": {"event": "sip_stats", **counters}})

    async def _report_sip(self) -> None:
        while True:
            await asyncio.sleep(self.settings.loop_lag_report_s)
            self.log_sip_stats()

    async def drain(self, give_up: asyncio.Event) -> None:
        """Take no new call, SIP or browser, and let the live ones of both end, for
        ``sip.drain_s`` at most."""
        if self.endpoint is None:
            return
        max_s = self.settings.sip.drain_s
        sip, browser = self.places.live
        log.info(
            "draining: new calls get 503; waiting up to %.0f s for %d live (%d SIP, %d browser)",
            max_s,
            sip + browser,
            sip,
            browser,
        )
        if await self.places.drain(max_s, give_up=give_up):
            log.info("drained: no live call")
        else:
            sip, browser = self.places.live
            log.warning(
                "drain ended with %d live calls (%d SIP, %d browser): hanging them up",
                sip + browser,
                sip,
                browser,
            )
            # Callers still in line: the overflow target, or the apology; never a silent BYE.
            await self.close_line()

    async def close_line(self) -> None:
        """Dismiss every caller still in the call queue (the overflow target, or the
        apology and a hang-up), each with its call-log records, before the stop."""
        if self.lobby is not None and not self.lobby.closing:
            await self.lobby.close()

    async def stop(self) -> None:
        """Hang up and release the endpoint; the call log's last records are written."""
        await self.close_line()
        await self.loop_lag.stop()
        if self.queue_limit is not None:
            await self.queue_limit.stop()
        if self._sip_report is not None:
            self._sip_report.cancel()
        if self.config is not None:
            await self.config.stop()
            await self.config.engine.dispose()
        if self.webrtc is not None:
            await self.webrtc.close()
        if self.admin is not None:
            await self.admin.stop()
            await self.admin.app.state.db.engine.dispose()
        if self.endpoint is not None:
            self.log_sip_stats()  # the last counters, before the node's are gone
            await self.endpoint.stop()
        if self.intent_cache is not None:
            await self.intent_cache.stop()
        if self.webhooks is not None:
            await self.webhooks.close()
        if self.call_log is not None:
            await self.call_log.close()
        if self._load_reporter is not None:
            await self._load_reporter.stop()
        if self.tier is not None:
            await asyncio.to_thread(self.tier.close)


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def run_node(settings: Settings) -> None:
    """Run a bot node until SIGINT or SIGTERM.

    SIGTERM drains (new calls get 503 + Retry-After so that a trunk tries another node; live
    calls go on for ``sip.drain_s`` at most); a second SIGTERM, or SIGINT, stops at once.
    Either way live calls are hung up and the call log's records written before the exit.
    """
    # numpy's BLAS (OpenBLAS) starts a thread per core, and after each product its threads
    # spin waiting for the next one: every Whisper pass (its log-mel features) then burnt
    # ~100 ms of a second core besides its own ~120 ms. Every model here already has its
    # own thread; the BLAS gets one too.
    threadpool_limits(limits=1, user_api="blas")
    profile = load_profile(settings.profile)
    node = Node(settings, profile)
    stop = asyncio.Event()  # SIGINT, or a second SIGTERM: stop now
    drain = asyncio.Event()  # the first SIGTERM: take no new call, let the live ones end

    def on_sigterm() -> None:
        (stop if drain.is_set() else drain).set()

    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError):
        loop.add_signal_handler(signal.SIGINT, stop.set)
        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    await node.start()
    try:
        waits = [asyncio.ensure_future(e.wait()) for e in (stop, drain)]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
        if drain.is_set() and not stop.is_set():
            await node.drain(give_up=stop)
    finally:
        log.info("stopping")
        await node.stop()
        log.info("stopped")
