"""A bot node: models loaded and warmed, then the SIP endpoint answering calls."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
import time
from contextlib import aclosing
from typing import Any

from threadpoolctl import threadpool_limits

from bot.calllog import CallLog
from bot.intents.cache import IntentCache
from bot.intents.store import CacheStore, MemoryStore, RedisStore
from bot.knowledge.index import KnowledgeIndex
from bot.pipeline.call_port import CallPort
from bot.pipeline.prompts import PromptAudio
from bot.pipeline.session import CallSession
from bot.pipeline.turn import Turn
from bot.pipeline.turnlog import log_turn, log_turn_with_text
from bot.profile import BotProfile, load_profile
from node.calllog import node_name, open_call_log
from node.looplag import LoopLagMonitor
from node.settings import Settings
from serve import ChatMessage, ModelSet, load_models
from serve.registry import ModelSpec
from telephony import SipServer
from telephony.config import SAMPLE_RATE

log = logging.getLogger(__name__)


class Node:
    """Everything one ``switchboard run`` process holds."""

    def __init__(self, settings: Settings, profile: BotProfile) -> None:
        self.settings = settings
        self.profile = profile
        self.models: ModelSet | None = None
        self.prompts = PromptAudio(sample_rate=SAMPLE_RATE)
        self.endpoint: SipServer | None = None
        self.call_log: CallLog | None = None
        self.intent_cache: IntentCache | None = None
        self.knowledge: KnowledgeIndex | None = None
        self._sessions: set[asyncio.Task[None]] = set()
        self.loop_lag = LoopLagMonitor(report_every_s=settings.loop_lag_report_s)
        #: The Ray Serve tier (``SWITCHBOARD_TIER__BACKEND=ray``) and the node's load report.
        self.tier: Any = None
        self._load_reporter: Any = None
        self._sip_report: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Load and warm the models, synthesize fixed phrases, then start answering."""
        started = time.monotonic()
        # First: a database on the wrong schema stops the node before models load.
        self.call_log = await open_call_log(self.settings)
        spec = self.settings.models
        if not self.profile.intents and not self.profile.knowledge:
            # Sentence embeddings serve the intent cache and the knowledge base only.
            spec = spec.model_copy(update={"embedder": None})
        self.models = await self._load_models(spec)
        prof = self.profile
        # The knowledge base's answers too: spoken as written, they start like a cached one.
        fixed = [prof.greeting, prof.apology, prof.unsure, prof.decline, *prof.fillers]
        fixed += [entry.answer for entry in prof.knowledge]
        if prof.transfer_failed is not None:
            fixed.append(prof.transfer_failed)
        for text in fixed:
            await self.prompts.add(self.models.tts, text)
        if self.profile.intents and self.models.embedder is not None:
            self.intent_cache = await self._start_intent_cache(self.models)
        if self.profile.knowledge and self.models.embedder is not None:
            self.knowledge = await KnowledgeIndex.build(
                self.profile.knowledge, self.models.embedder, self.profile.knowledge_matching
            )
        await self._warm_system_prompt(self.models)
        self.endpoint = SipServer(self.settings.sip, self._on_call)
        await self.endpoint.start()
        self.loop_lag.start()
        if self._load_reporter is not None:
            self._load_reporter.start()
        self._sip_report = asyncio.get_running_loop().create_task(
            self._report_sip(), name="sip-stats"
        )
        sip = self.settings.sip
        log.info(
            "ready: answering SIP on udp:%s:%d (started in %.1fs)",
            sip.host,
            sip.port,
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
            # No call queue yet: a node beyond max_calls answers 503 (telephony/).
            call_queue_depth=lambda: 0,
        )
        models: ModelSet = self.tier.models
        return models

    async def _start_intent_cache(self, models: ModelSet) -> IntentCache:
        assert models.embedder is not None
        cfg = self.settings.intent_cache
        store: CacheStore = (
            MemoryStore()
            if self.settings.redis_url is None
            else RedisStore(self.settings.redis_url, cfg.prefix, timeout_s=cfg.timeout_s)
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
        )
        await cache.publish(self.profile.intents, self.profile.intent_matching)
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

        def on_turn(turn: Turn) -> None:
            log_line(turn)
            if call_log is not None:
                call_log.turn_finished(turn)

        session = CallSession(
            call,
            self.models,
            self.profile,
            self.prompts,
            on_turn=on_turn,
            call_log=call_log,
            intent_cache=self.intent_cache,
            call_actions=self.settings.call_actions,
            knowledge=self.knowledge,
        )
        task = asyncio.current_task()
        if task is not None:
            self._sessions.add(task)
        try:
            await session.run()
        finally:
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
        """Take no new call and let the live ones end, for ``sip.drain_s`` at most."""
        if self.endpoint is None:
            return
        max_s = self.settings.sip.drain_s
        live = self.endpoint.active_calls
        log.info("draining: new calls get 503; waiting up to %.0f s for %d live", max_s, live)
        if await self.endpoint.drain(max_s, give_up=give_up):
            log.info("drained: no live call")
        else:
            log.warning(
                "drain ended with %d live calls: hanging them up", self.endpoint.active_calls
            )

    async def stop(self) -> None:
        """Hang up and release the endpoint; the call log's last records are written."""
        await self.loop_lag.stop()
        if self._sip_report is not None:
            self._sip_report.cancel()
        if self.endpoint is not None:
            self.log_sip_stats()  # the last counters, before the node's are gone
            await self.endpoint.stop()
        if self.intent_cache is not None:
            await self.intent_cache.stop()
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
