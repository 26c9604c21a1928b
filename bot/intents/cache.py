"""The semantic response cache: intents with ready answer audio, shared through a store.

Each node keeps a local copy of the live index (example embeddings, thresholds and answer
audio), so a lookup needs only the embedder and this process: Redis is read when the
configuration changes, never per turn. While the shared store cannot be reached for longer
than ``stale_after_s``, lookups are refused (the LLM answers), because another node may have
changed the configuration meanwhile; the watcher reconnects with backoff and reloads.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import Sequence
from contextlib import aclosing
from dataclasses import dataclass, replace

import numpy as np

from bot.intents.background import background_lines
from bot.intents.clauses import clauses, decides, worth_splitting
from bot.intents.confirm import confirm_question
from bot.intents.fit import Fitted, fit
from bot.intents.match import (
    IntentIndex,
    IntentMatchingConfig,
    IntentVectors,
    Match,
    Vectors,
    query_text,
)
from bot.intents.settings import IntentCacheSettings
from bot.intents.stock import EmbeddedRequest, embed_requests, with_stock_phrasings
from bot.intents.store import (
    CONNECTED,
    HEARTBEAT,
    CacheEntry,
    CacheIndex,
    CacheStore,
    StoreRefused,
    StoreUnavailable,
)
from bot.pipeline.speech_cache import SpeechCache, pre_synthesized
from bot.profile import IntentConfig
from bot.tasks import cancel_and_wait
from serve import TTS, Embedder
from telephony.config import SAMPLE_RATE

log = logging.getLogger(__name__)


def entry_key(intent: IntentConfig, *, voice: str, embedder: str, sample_rate: int) -> str:
    """The content hash an entry is stored under: any change to what it says, how it
    sounds or how it is matched gives a new key."""
    content = {
        "intent": intent.model_dump(mode="json"),
        "voice": voice,
        "embedder": embedder,
        "sample_rate": sample_rate,
    }
    raw = json.dumps(content, sort_keys=True).encode()
    return hashlib.sha256(raw).hexdigest()[:32]


def index_version(keys: Sequence[str], matching: IntentMatchingConfig) -> str:
    rule = matching.model_dump(mode="json")
    raw = json.dumps({"keys": list(keys), "matching": rule}, sort_keys=True).encode()
    return hashlib.sha256(raw).hexdigest()[:16]


@dataclass(frozen=True)
class Lookup:
    """A lookup's decision and, on a hit, the entry to play."""

    match: Match
    entry: CacheEntry | None
    lookup_ms: float


@dataclass(frozen=True)
class _State:
    version: str
    source: CacheIndex
    index: IntentIndex
    entries: dict[str, CacheEntry]
    thresholds: IntentMatchingConfig
    fitted: Fitted


_DEFAULTS = IntentCacheSettings()


class IntentCache:
    """Builds, shares and matches the intents' pre-computed answers."""

    def __init__(
        self,
        store: CacheStore,
        embedder: Embedder,
        tts: TTS,
        *,
        voice: str,
        sample_rate: int = SAMPLE_RATE,
        stale_after_s: float = _DEFAULTS.stale_after_s,
        heartbeat_s: float = _DEFAULTS.heartbeat_s,
        retry_max_s: float = _DEFAULTS.retry_max_s,
        speech_cache: SpeechCache | None = None,
    ) -> None:
        self.store = store
        self._embedder = embedder
        self._tts = tts
        self.voice = voice
        self.sample_rate = sample_rate
        self.stale_after_s = stale_after_s
        self.heartbeat_s = heartbeat_s
        self.retry_max_s = retry_max_s
        #: Answer and confirmation audio of earlier starts, read instead of synthesizing.
        self.speech_cache = speech_cache
        self._state: _State | None = None
        self._pending: CacheIndex | None = None  # published locally, not yet to the store
        self._pending_entries: list[CacheEntry] = []
        self._last_ok = time.monotonic()
        self._watcher: asyncio.Task[None] | None = None
        self._reloaded = asyncio.Event()
        #: The background lines' embeddings (``bot.intents.background``), once embedded.
        self._background: Vectors | None = None
        #: The stock requests' embeddings (``bot.intents.stock``), once embedded.
        self._stock: tuple[EmbeddedRequest, ...] | None = None
        #: Entries this process synthesized and embedded itself (tests and logs).
        self.built = 0
        self.reloads = 0

    # -- state ---------------------------------------------------------------------

    @property
    def version(self) -> str | None:
        return None if self._state is None else self._state.version

    @property
    def intents(self) -> list[str]:
        return [] if self._state is None else [i.name for i in self._state.index.intents]

    @property
    def fresh(self) -> bool:
        """True while the local copy can be trusted to be the live configuration."""
        if self.store.local:
            return True
        return time.monotonic() - self._last_ok < self.stale_after_s

    def entry(self, name: str) -> CacheEntry | None:
        return None if self._state is None else self._state.entries.get(name)

    def acting_entry(self, action: str) -> CacheEntry | None:
        """The first intent whose answer takes ``action`` (``transfer``: puts the caller
        through to a person; ``hangup``: the profile's goodbye), if any."""
        if self._state is None:
            return None
        found = (e for e in self._state.entries.values() if e.action == action)
        return next(found, None)

    @property
    def fitted(self) -> Fitted | None:
        """The live configuration's rule as fitted at load, its background and warnings."""
        return None if self._state is None else self._state.fitted

    async def _embed_background(self) -> Vectors:
        if self._background is None:
            self._background = await self._embedder.embed(list(background_lines()))
        return self._background

    # -- configuration -------------------------------------------------------------

    async def publish(self, intents: Sequence[IntentConfig], matching: IntentMatchingConfig) -> str:
        """Make ``intents`` the live configuration on every node; returns its version.

        Only entries whose key is new are synthesized and embedded. With the store away,
        this node uses the new configuration at once and publishes it when the store returns.
        """
        emb_name = self._embedder.description
        keys = [
            entry_key(i, voice=self.voice, embedder=emb_name, sample_rate=self.sample_rate)
            for i in intents
        ]
        have: dict[str, CacheEntry] = {}
        if self._state is not None:
            have = {e.key: e for e in self._state.entries.values()}
        store_ok = True
        missing = [k for k in keys if k not in have]
        if missing:
            try:
                have.update(await self.store.get_entries(missing))
            except StoreUnavailable as exc:
                store_ok = False
                log.warning("intent cache: store unavailable while publishing: %s", exc)
        built: list[CacheEntry] = []
        for intent, key in zip(intents, keys, strict=True):
            if key not in have:
                entry = await self._build(intent, key)
                have[key] = entry
                built.append(entry)
        index = CacheIndex(
            version=index_version(keys, matching), keys=tuple(keys), matching=matching
        )
        await self._stock_for(index)
        self._install(index, have, await self._background_for(index))
        if store_ok:
            try:
                if built:
                    await self.store.put_entries(built)
                await self.store.put_index(index)
                self._last_ok = time.monotonic()
                self._pending, self._pending_entries = None, []
            except StoreUnavailable as exc:
                store_ok = False
                log.warning("intent cache: store unavailable while publishing: %s", exc)
        if not store_ok:
            self._pending = index
            self._pending_entries = [have[k] for k in keys]
        log.info(
            "intent cache: published %s (%d intents, %d built)",
            index.version,
            len(keys),
            len(built),
        )
        return index.version

    async def reload(self) -> bool:
        """Load the store's live index if it differs from the local copy; True if it did."""
        index = await self.store.get_index()
        if index is None and self._state is not None and self._pending is None:
            # The store lost its copy (a Redis restarted without persistence): put ours back.
            self._pending = self._state_index()
            self._pending_entries = list(self._state.entries.values())
            await self._flush_pending()
            return False
        if index is None or index.version == self.version:
            return False
        have = {} if self._state is None else {e.key: e for e in self._state.entries.values()}
        missing = [k for k in index.keys if k not in have]
        if missing:
            have.update(await self.store.get_entries(missing))
        absent = [k for k in index.keys if k not in have]
        if absent:  # a publisher still writing, or expired entries: wait for the next message
            log.warning("intent cache: %d entries of %s missing", len(absent), index.version)
            return False
        await self._stock_for(index)
        self._install(index, have, await self._background_for(index))
        self.reloads += 1
        self._reloaded.set()
        log.info("intent cache: reloaded %s (%d intents)", index.version, len(index.keys))
        return True

    def _state_index(self) -> CacheIndex:
        assert self._state is not None
        return self._state.source

    async def _background_for(self, index: CacheIndex) -> Vectors | None:
        """The background lines' vectors when ``index`` holds intents to them."""
        return await self._embed_background() if index.matching.background else None

    async def _stock_for(self, index: CacheIndex) -> None:
        """Embed the stock requests, the first time an index may adopt their phrasings."""
        if index.matching.stock_phrasings and self._stock is None:
            self._stock = await embed_requests(self._embedder.embed)

    def _install(
        self, index: CacheIndex, entries: dict[str, CacheEntry], background: Vectors | None
    ) -> None:
        chosen = [entries[k] for k in index.keys]
        vectors = [
            IntentVectors(
                name=e.name,
                examples=e.examples,
                negatives=e.negatives,
                example_vectors=e.example_vectors,
                negative_vectors=e.negative_vectors,
                action=e.action,
            )
            for e in chosen
        ]
        configured = index.matching
        if configured.stock_phrasings and self._stock:
            vectors, notes = with_stock_phrasings(vectors, self._stock)
            for note in notes:
                log.info("intent cache: %s", note)
        if background is None:
            fitted = Fitted(configured, np.zeros((0, 0), np.float32), (), (), ())
        else:
            fitted = fit(
                vectors,
                background_lines(),
                background,
                configured,
                raise_threshold=configured.fit_threshold,
            )
        for warning in fitted.warnings:
            log.warning("intent cache: %s", warning.message)
        for name, threshold in fitted.thresholds.items():
            log.info(
                "intent cache: threshold %.2f for intent %r (configured %.2f)",
                threshold,
                name,
                configured.threshold,
            )
        self._state = _State(
            version=index.version,
            source=index,
            index=IntentIndex(
                vectors,
                fitted.background if background is not None else None,
                fitted.thresholds,
            ),
            entries={e.name: e for e in chosen},
            thresholds=fitted.rule,
            fitted=fitted,
        )

    async def _build(self, intent: IntentConfig, key: str) -> CacheEntry:
        texts = [*intent.examples, *intent.negatives]
        vectors = await self._embedder.embed(texts)
        n = len(intent.examples)
        audio = await self._synthesize(intent.answer)
        confirm = confirm_question(intent)
        confirm_audio = await self._synthesize(confirm)
        self.built += 1
        return CacheEntry(
            key=key,
            name=intent.name,
            answer=intent.answer,
            action=intent.action,
            examples=tuple(intent.examples),
            negatives=tuple(intent.negatives),
            example_vectors=np.ascontiguousarray(vectors[:n]),
            negative_vectors=np.ascontiguousarray(vectors[n:]),
            audio=audio,
            sample_rate=self.sample_rate,
            transfer_to=intent.transfer_to,
            confirm=confirm,
            confirm_audio=confirm_audio,
        )

    async def _synthesize(self, text: str) -> bytes:
        started = time.monotonic()
        audio, from_disk = await pre_synthesized(
            self.speech_cache, self._tts, text, self.sample_rate, lambda: self._speak(text)
        )
        log.debug(
            "intent cache: pre-synthesized %r in %.0f ms%s",
            text[:40],
            (time.monotonic() - started) * 1000,
            " (from disk)" if from_disk else "",
        )
        return audio

    async def _speak(self, text: str) -> bytes:
        async with aclosing(self._tts.synthesize(text, sample_rate=self.sample_rate)) as chunks:
            return b"".join([chunk async for chunk in chunks])

    # -- lookups -------------------------------------------------------------------

    async def lookup(self, text: str) -> Lookup:
        """Decide whether the cache answers ``text``. Needs no store access; may raise
        ``ProviderError`` from the embedder (the router treats it as a miss)."""
        started = time.perf_counter()
        state = self._state
        if state is None:
            match = Match(route="none", intent=None, score=0.0, reason="cache not loaded")
        elif not self.fresh:
            match = Match(route="none", intent=None, score=0.0, reason="store unreachable")
        else:
            found = state.index.exact(text)
            if found is None:
                query = query_text(text)
                vector = await self._embedder.embed([query])
                found = state.index.semantic(vector[0], state.thresholds)
                if state.thresholds.clauses and worth_splitting(found):
                    found = await self._by_clause(query, found, state)
            match = found
        entry = None
        asking = match.route == "confirm" or match.ask_if_unanswered
        wanted = match.best if asking else match.intent
        if state is not None and wanted is not None:
            entry = state.entries.get(wanted)
        return Lookup(match=match, entry=entry, lookup_ms=(time.perf_counter() - started) * 1e3)

    async def _by_clause(self, query: str, whole: Match, state: _State) -> Match:
        """``whole``, or the match of a clause of ``query`` that the rule answers, for the
        intent the whole is nearest to (``bot.intents.clauses``)."""
        parts = clauses(query)
        if not parts:
            return whole
        vectors = await self._embedder.embed(parts)
        found = whole
        for part, vector in zip(parts, vectors, strict=True):
            match = state.index.semantic(vector, state.thresholds)
            if decides(match, whole):
                found = replace(match, clause=part)
        return found

    # -- watching the store ----------------------------------------------------------

    def start(self) -> None:
        """Follow the store's changes (and reconnect after an outage) in the background."""
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.create_task(self._watch(), name="intent-cache-watch")

    async def stop(self) -> None:
        await cancel_and_wait(self._watcher)
        self._watcher = None
        await self.store.close()

    async def wait_reload(self, timeout_s: float) -> bool:
        """Wait for the next reload from the store (tests)."""
        self._reloaded.clear()
        try:
            await asyncio.wait_for(self._reloaded.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    async def _watch(self) -> None:
        backoff = 0.2
        down = False
        while True:
            try:
                async with aclosing(self.store.watch(self.heartbeat_s)) as events:
                    async for event in events:
                        if event == CONNECTED:
                            await self._flush_pending()
                            await self.reload()
                            if down:
                                log.info("intent cache: store is back")
                                down = False
                        elif event not in (HEARTBEAT, self.version):
                            await self.reload()
                        # Trusted again only once the local copy is known to be current.
                        self._last_ok = time.monotonic()
                        backoff = 0.2
            except StoreRefused as exc:
                if not down:
                    log.error("intent cache: %s; retrying", exc)
                    down = True
            except StoreUnavailable as exc:
                if not down:
                    log.warning("intent cache: store unavailable, retrying: %s", exc)
                    down = True
            except Exception:
                # A bad entry or a bug must not stop the node from ever reloading again.
                log.exception("intent cache: watcher failed; retrying")
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self.retry_max_s)

    async def _flush_pending(self) -> None:
        index = self._pending
        if index is None:
            return
        await self.store.put_entries(self._pending_entries)
        await self.store.put_index(index)
        self._pending, self._pending_entries = None, []
        log.info("intent cache: published %s after the store returned", index.version)
