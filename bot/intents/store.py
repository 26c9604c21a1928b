"""Where the intent cache's entries live: in this process, or in Redis shared by every node.

Redis layout (``P`` is the key prefix, ``switchboard:intents`` by default):

- ``P:entry:<key>``: a hash per built entry: ``meta`` (JSON: name, answer, action, transfer
  target, examples, negatives, sample rate), ``examples`` and ``negatives`` (float32 rows, raw
  bytes), ``audio`` (16-bit mono PCM at the call's rate). ``<key>`` hashes the intent's
  content, the voice and the embedder, so an unchanged intent is never rebuilt.
- ``P:index``: JSON ``{"version", "entries": [key...], "matching": {...}}``, the live
  configuration (``matching``: the ``IntentMatchingConfig``, validated when read). Entries
  that leave the index expire after a day.
- ``P:reload``: the pub/sub channel; the message is the new index version.

Each entry's hash has a ``sig`` field and the index's JSON a ``"sig"``: an HMAC-SHA256 of the
rest with the nodes' shared key (``bot.intents.signing``). What fails the check is not used:
an entry is left out (the node builds its own, or keeps its current configuration), an index
reads as none (a node with a configuration puts its own back); each refusal is counted
(``RedisStore.refused``) and logged. A password, an ACL user and TLS (``rediss://``, a CA
file, a client certificate) are passed to the client; Redis refusing the credentials is a
``StoreRefused`` that says so.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import hmac
import json
import logging
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

import numpy as np
from redis.asyncio import Redis
from redis.exceptions import AuthenticationError, NoPermissionError, RedisError

from bot.intents.match import IntentMatchingConfig, Vectors
from bot.intents.settings import IntentCacheSettings
from bot.intents.signing import Signer

#: Yielded by ``CacheStore.watch`` when (re)connected, and on each quiet heartbeat.
CONNECTED = "\x00connected"
HEARTBEAT = "\x00heartbeat"

RETIRED_TTL_S = 86_400

log = logging.getLogger(__name__)


class StoreUnavailable(Exception):
    """The shared store cannot be reached (retryable: the cache retries with backoff)."""


class StoreRefused(StoreUnavailable):
    """The shared store refused this node's credentials (a wrong password or user, or a
    user without the rights): a setting to fix, reported as such; still retried."""


def _unavailable(exc: BaseException) -> StoreUnavailable:
    """The store error for a client error: a refusal of the credentials named as one."""
    if isinstance(exc, AuthenticationError):
        return StoreRefused(
            f"Redis refused the credentials (check SWITCHBOARD_INTENT_CACHE__PASSWORD and "
            f"__USERNAME): {exc}"
        )
    if isinstance(exc, NoPermissionError):
        return StoreRefused(f"the Redis user lacks a permission the intent cache needs: {exc}")
    return StoreUnavailable(str(exc) or type(exc).__name__)


@dataclass(frozen=True)
class CacheEntry:
    """One intent with its example embeddings and its answer as ready telephone audio."""

    key: str
    name: str
    answer: str
    action: str | None
    examples: tuple[str, ...]
    negatives: tuple[str, ...]
    example_vectors: Vectors
    negative_vectors: Vectors
    audio: bytes
    sample_rate: int
    #: Where the ``transfer`` action sends the caller.
    transfer_to: str | None = None
    #: The yes-or-no question asked when the match is not sure, and its audio.
    confirm: str = ""
    confirm_audio: bytes = b""


@dataclass(frozen=True)
class CacheIndex:
    """The live configuration: which entries, and the matching rule."""

    version: str
    keys: tuple[str, ...]
    matching: IntentMatchingConfig

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": self.version,
                "entries": list(self.keys),
                "matching": self.matching.model_dump(mode="json"),
            }
        )

    @classmethod
    def from_json(cls, raw: str | bytes) -> CacheIndex:
        """Raises ``ValueError`` (a ``ValidationError``) for a rule out of its bounds."""
        data = json.loads(raw)
        return cls(
            version=str(data["version"]),
            keys=tuple(str(k) for k in data["entries"]),
            matching=IntentMatchingConfig.from_stored(dict(data["matching"])),
        )


class CacheStore(abc.ABC):
    """Storage for entries and the index, plus change notifications."""

    #: True when the store is this process's memory (never stale, never down).
    local = False

    @abc.abstractmethod
    async def get_entries(self, keys: list[str]) -> dict[str, CacheEntry]:
        """The stored entries among ``keys`` (missing ones are left out)."""

    @abc.abstractmethod
    async def put_entries(self, entries: list[CacheEntry]) -> None:
        """Store entries (idempotent: same key, same content)."""

    @abc.abstractmethod
    async def get_index(self) -> CacheIndex | None:
        """The live index, or None if none was ever published."""

    @abc.abstractmethod
    async def put_index(self, index: CacheIndex) -> None:
        """Make ``index`` live and tell every node."""

    @abc.abstractmethod
    def watch(self, heartbeat_s: float) -> AsyncGenerator[str, None]:
        """``CONNECTED``, then each published version, with ``HEARTBEAT`` when quiet;
        raises ``StoreUnavailable`` when the store goes away."""

    async def close(self) -> None:  # noqa: B027 - most stores hold nothing to release
        """Release connections."""


class MemoryStore(CacheStore):
    """The embedded default: the cache lives in this process only."""

    local = True

    def __init__(self) -> None:
        self._entries: dict[str, CacheEntry] = {}
        self._index: CacheIndex | None = None
        self._watchers: list[asyncio.Queue[str]] = []

    async def get_entries(self, keys: list[str]) -> dict[str, CacheEntry]:
        return {k: self._entries[k] for k in keys if k in self._entries}

    async def put_entries(self, entries: list[CacheEntry]) -> None:
        for entry in entries:
            self._entries[entry.key] = entry

    async def get_index(self) -> CacheIndex | None:
        return self._index

    async def put_index(self, index: CacheIndex) -> None:
        self._index = index
        for queue in self._watchers:
            queue.put_nowait(index.version)

    async def watch(self, heartbeat_s: float) -> AsyncGenerator[str, None]:
        queue: asyncio.Queue[str] = asyncio.Queue()
        self._watchers.append(queue)
        try:
            yield CONNECTED
            while True:
                try:
                    yield await asyncio.wait_for(queue.get(), heartbeat_s)
                except TimeoutError:
                    yield HEARTBEAT
        finally:
            self._watchers.remove(queue)


def _vectors(raw: bytes | None, dim: int) -> Vectors:
    if not raw:
        return np.zeros((0, dim), np.float32)
    return np.frombuffer(raw, dtype=np.float32).reshape(-1, dim).copy()


class RedisStore(CacheStore):
    """Entries, embeddings and audio in Redis hashes, signed, changes over pub/sub."""

    def __init__(
        self,
        url: str,
        prefix: str = "switchboard:intents",
        timeout_s: float = 1.0,
        *,
        signing_key: bytes,
        username: str | None = None,
        password: str | None = None,
        tls_ca_file: str | None = None,
        tls_cert_file: str | None = None,
        tls_key_file: str | None = None,
    ):
        self.prefix = prefix
        self._signer = Signer(signing_key)
        #: Entries and indexes read from Redis and refused for a failed signature check.
        self.refused = 0
        options: dict[str, Any] = {}
        if username is not None:
            options["username"] = username
        if password is not None:
            options["password"] = password
        if url.startswith("rediss://"):
            options["ssl_ca_certs"] = tls_ca_file
            options["ssl_certfile"] = tls_cert_file
            options["ssl_keyfile"] = tls_key_file
        elif tls_ca_file or tls_cert_file or tls_key_file:
            raise ValueError("TLS files are given but the Redis URL is not rediss://")
        self._client: Redis = Redis.from_url(
            url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s, **options
        )

    def _entry_key(self, key: str) -> str:
        return f"{self.prefix}:entry:{key}"

    @property
    def channel(self) -> str:
        return f"{self.prefix}:reload"

    def _refuse(self, what: str) -> None:
        self.refused += 1
        log.warning(
            "intent cache: %s in Redis fails its signature check: not used (%d refused)",
            what,
            self.refused,
        )

    async def get_entries(self, keys: list[str]) -> dict[str, CacheEntry]:
        try:
            async with self._client.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.hgetall(self._entry_key(key))
                rows: list[dict[bytes, bytes]] = await pipe.execute()
        except (RedisError, OSError) as exc:
            raise _unavailable(exc) from exc
        out: dict[str, CacheEntry] = {}
        for key, row in zip(keys, rows, strict=True):
            if not row:
                continue
            fields = {k.decode(errors="replace"): v for k, v in row.items()}
            signature = fields.pop("sig", b"").decode(errors="replace")
            if not self._signer.check("entry", self._entry_key(key), fields, signature):
                self._refuse(f"entry {key}")
                continue
            out[key] = _decode_entry(key, row)
        return out

    async def put_entries(self, entries: list[CacheEntry]) -> None:
        try:
            async with self._client.pipeline(transaction=True) as pipe:
                for entry in entries:
                    name = self._entry_key(entry.key)
                    fields = _encode_entry(entry)
                    fields["sig"] = self._signer.sign("entry", name, fields).encode()
                    pipe.delete(name)  # no field of someone else's stays beside ours
                    pipe.hset(name, mapping=fields)  # type: ignore[arg-type]
                await pipe.execute()
        except (RedisError, OSError) as exc:
            raise _unavailable(exc) from exc

    def _sign_index(self, payload: str) -> str:
        return self._signer.sign("index", f"{self.prefix}:index", {"index": payload.encode()})

    async def get_index(self) -> CacheIndex | None:
        try:
            raw = await self._client.get(f"{self.prefix}:index")
        except (RedisError, OSError) as exc:
            raise _unavailable(exc) from exc
        if raw is None:
            return None
        try:
            data = json.loads(raw)
            signature = str(data.pop("sig", ""))
            payload = json.dumps(data)  # the index's JSON exactly as it was signed
            index = CacheIndex.from_json(payload)
        except (ValueError, KeyError, TypeError, AttributeError):
            self._refuse("the index (unreadable)")
            return None
        if not hmac.compare_digest(self._sign_index(payload), signature):
            self._refuse(f"the index {index.version}")
            return None
        return index

    async def put_index(self, index: CacheIndex) -> None:
        old = await self.get_index()
        payload = index.to_json()
        signed = json.dumps({**json.loads(payload), "sig": self._sign_index(payload)})
        try:
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.set(f"{self.prefix}:index", signed)
                for key in set(old.keys if old else ()) - set(index.keys):
                    pipe.expire(self._entry_key(key), RETIRED_TTL_S)
                pipe.publish(self.channel, index.version)
                await pipe.execute()
        except (RedisError, OSError) as exc:
            raise _unavailable(exc) from exc

    async def ping(self) -> None:
        """Reach the server (and log in): raises ``StoreRefused`` for refused credentials."""
        try:
            await self._client.ping()
        except (RedisError, OSError) as exc:
            raise _unavailable(exc) from exc

    async def watch(self, heartbeat_s: float) -> AsyncGenerator[str, None]:
        pubsub = self._client.pubsub()
        try:
            await pubsub.subscribe(self.channel)
            yield CONNECTED
            while True:
                message = await pubsub.get_message(
                    ignore_subscribe_messages=True, timeout=heartbeat_s
                )
                if message is not None and message.get("type") == "message":
                    data = message["data"]
                    yield data.decode() if isinstance(data, bytes) else str(data)
                else:
                    await self._client.ping()  # a dead server shows here within a heartbeat
                    yield HEARTBEAT
        except (RedisError, OSError) as exc:
            raise _unavailable(exc) from exc
        finally:
            with contextlib.suppress(RedisError, OSError):
                await pubsub.aclose()  # type: ignore[no-untyped-call]

    async def delete_all(self) -> int:
        """Remove every key under the prefix (tests, and an operator's clean-up)."""
        keys = [k async for k in self._client.scan_iter(match=f"{self.prefix}:*")]
        return int(await self._client.delete(*keys)) if keys else 0

    async def close(self) -> None:
        await self._client.aclose()


def _encode_entry(entry: CacheEntry) -> dict[str, bytes]:
    meta = {
        "name": entry.name,
        "answer": entry.answer,
        "action": entry.action,
        "transfer_to": entry.transfer_to,
        "confirm": entry.confirm,
        "examples": list(entry.examples),
        "negatives": list(entry.negatives),
        "sample_rate": entry.sample_rate,
        "dim": int(entry.example_vectors.shape[1]),
    }
    return {
        "meta": json.dumps(meta).encode(),
        "examples": entry.example_vectors.astype(np.float32).tobytes(),
        "negatives": entry.negative_vectors.astype(np.float32).tobytes(),
        "audio": entry.audio,
        "confirm_audio": entry.confirm_audio,
    }


def _decode_entry(key: str, row: dict[bytes, bytes]) -> CacheEntry:
    meta = json.loads(row[b"meta"])
    dim = int(meta["dim"])
    return CacheEntry(
        key=key,
        name=str(meta["name"]),
        answer=str(meta["answer"]),
        action=meta["action"],
        examples=tuple(meta["examples"]),
        negatives=tuple(meta["negatives"]),
        example_vectors=_vectors(row.get(b"examples"), dim),
        negative_vectors=_vectors(row.get(b"negatives"), dim),
        audio=row.get(b"audio", b""),
        sample_rate=int(meta["sample_rate"]),
        transfer_to=meta.get("transfer_to"),
        confirm=str(meta.get("confirm", "")),
        confirm_audio=row.get(b"confirm_audio", b""),
    )


def redis_store(url: str, settings: IntentCacheSettings) -> RedisStore:
    """The shared store as the intent cache's settings describe it."""
    if settings.signing_key is None:
        raise ValueError("a shared intent cache needs SWITCHBOARD_INTENT_CACHE__SIGNING_KEY")

    def path(value: object) -> str | None:
        return None if value is None else str(value)

    return RedisStore(
        url,
        settings.prefix,
        timeout_s=settings.timeout_s,
        signing_key=settings.signing_key.get_secret_value().encode(),
        username=settings.username,
        password=None if settings.password is None else settings.password.get_secret_value(),
        tls_ca_file=path(settings.tls_ca_file),
        tls_cert_file=path(settings.tls_cert_file),
        tls_key_file=path(settings.tls_key_file),
    )
