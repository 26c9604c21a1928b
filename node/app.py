"""A bot node: models loaded and warmed, then the SIP endpoint answering calls."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
import time
from contextlib import aclosing

from threadpoolctl import threadpool_limits

from bot.calllog import CallLog
from bot.intents.cache import IntentCache
from bot.intents.store import CacheStore, MemoryStore, RedisStore
from bot.knowledge.index import KnowledgeIndex
from bot.lookups.webhook import Webhooks
from bot.pipeline.call_port import CallPort
from bot.pipeline.prompts import PromptAudio
from bot.pipeline.session import CallSession
from bot.pipeline.turn import Turn
from bot.pipeline.turnlog import log_turn, log_turn_with_text
from bot.profile import BotProfile, load_profile
from bot.recording import CallRecorder, RecordedCall, recording_path
from node.calllog import open_call_log, recordings_dir
from node.looplag import LoopLagMonitor
from node.settings import Settings
from serve import ChatMessage, ModelSet, load_models
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
        self.webhooks: Webhooks | None = None
        self._sessions: set[asyncio.Task[None]] = set()
        self.loop_lag = LoopLagMonitor(report_every_s=settings.loop_lag_report_s)

    async def start(self) -> None:
        """Load and warm the models, synthesize fixed phrases, then start answering."""
        started = time.monotonic()
        # First: a database on the wrong schema stops the node before models load.
        self.call_log = await open_call_log(self.settings)
        spec = self.settings.models
        if not self.profile.intents and not self.profile.knowledge:
            # Sentence embeddings serve the intent cache and the knowledge base only.
            spec = spec.model_copy(update={"embedder": None})
        self.models = await load_models(spec, progress=_progress)
        prof = self.profile
        # The knowledge base's answers too: spoken as written, they start like a cached one.
        fixed = [prof.greeting, prof.apology, prof.unsure, prof.decline, *prof.fillers]
        fixed += [entry.answer for entry in prof.knowledge]
        if prof.transfer_failed is not None:
            fixed.append(prof.transfer_failed)
        fixed += call_flow_phrases(prof)
        for text in fixed:
            await self.prompts.add(self.models.tts, text)
        if self.profile.intents and self.models.embedder is not None:
            self.intent_cache = await self._start_intent_cache(self.models)
        if self.profile.knowledge and self.models.embedder is not None:
            self.knowledge = await KnowledgeIndex.build(
                self.profile.knowledge, self.models.embedder, self.profile.knowledge_matching
            )
        await self._warm_system_prompt(self.models)
        if prof.lookups:
            secrets = {k: v.get_secret_value() for k, v in self.settings.lookup_secrets.items()}
            self.webhooks = Webhooks(prof.lookups, secrets)
        self.endpoint = SipServer(self.settings.sip, self._on_call)
        await self.endpoint.start()
        self.loop_lag.start()
        sip = self.settings.sip
        log.info(
            "ready: answering SIP on udp:%s:%d (started in %.1fs)",
            sip.host,
            sip.port,
            time.monotonic() - started,
        )

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

        recorder: CallRecorder | None = None
        if self.profile.recording.enabled:
            path = recording_path(recordings_dir(self.settings), call.call_id)
            try:
                recorder = CallRecorder(path.resolve(), call.sample_rate)
            except OSError as exc:  # a full or read-only disk degrades the call, no more
                log.error("call %s: cannot record: %s", call.call_id, exc)
            else:
                call = RecordedCall(call, recorder)
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
            webhooks=self.webhooks,
            recording=None if recorder is None else str(recorder.path),
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

    async def stop(self) -> None:
        """Hang up and release the endpoint."""
        await self.loop_lag.stop()
        if self.endpoint is not None:
            await self.endpoint.stop()
        if self.intent_cache is not None:
            await self.intent_cache.stop()
        if self.webhooks is not None:
            await self.webhooks.close()
        if self.call_log is not None:
            await self.call_log.close()


def call_flow_phrases(profile: BotProfile) -> list[str]:
    """What menus, collectors and lookups say in fixed words: synthesized at start, so
    that a key press is answered as fast as a cached intent."""
    intents = {i.name: i.answer for i in profile.intents}
    out: list[str] = []
    for menu in profile.menus:
        out += [menu.prompt, menu.invalid]
        for opt in menu.options:
            out += [opt.say] if opt.say else []
            out += [intents[opt.intent]] if opt.intent else []
    for col in profile.collectors:
        out += [col.prompt, col.reprompt, col.give_up]
    for lookup in profile.lookups:
        out += [lookup.preamble, lookup.not_found, lookup.failed]
    if profile.recording.enabled and profile.recording.announcement:
        out.append(profile.recording.announcement)
    return out + profile.call_limits.phrases()


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def run_node(settings: Settings) -> None:
    """Run a bot node until SIGINT or SIGTERM."""
    # numpy's BLAS (OpenBLAS) starts a thread per core, and after each product its threads
    # spin waiting for the next one: every Whisper pass (its log-mel features) then burnt
    # ~100 ms of a second core besides its own ~120 ms. Every model here already has its
    # own thread; the BLAS gets one too.
    threadpool_limits(limits=1, user_api="blas")
    profile = load_profile(settings.profile)
    node = Node(settings, profile)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await node.start()
    try:
        await stop.wait()
    finally:
        log.info("stopping")
        await node.stop()
