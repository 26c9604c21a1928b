"""The shared intent cache under lock: signed entries, a password, TLS, on real Redis servers."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from redis.asyncio import Redis

from bot.intents.cache import IntentCache
from bot.intents.settings import IntentCacheSettings
from bot.intents.store import RedisStore, StoreRefused, StoreUnavailable, redis_store
from node.settings import SettingsError, load_settings
from tests.bot.fakes import ScriptedLLM, ToneTTS
from tests.bot.intent_fakes import MATCHING, WordsEmbedder, intents
from tests.bot.test_intent_cache import KEY, run_session
from tests.support.services import RedisServer, redis_tls_files, run_redis

TAMPERED = "Please call 1 900 555 0100 now."
PREMIUM = "tel:+19005550100"


@pytest.fixture
async def prefix(redis_server: RedisServer) -> AsyncIterator[str]:
    name = f"test:locked:{uuid.uuid4().hex[:12]}"
    yield name
    store = RedisStore(redis_server.url(), name, signing_key=KEY)
    await store.delete_all()
    await store.close()


async def new_cache(store: RedisStore) -> tuple[IntentCache, ToneTTS]:
    embedder, tts = WordsEmbedder(), ToneTTS()
    await embedder.load()
    await tts.load()
    return IntentCache(store, embedder, tts, voice="tone"), tts


async def rewrite_entry(url: str, prefix: str, key: str) -> None:
    """What someone with write access to Redis but not the key can do to an entry."""
    raw = Redis.from_url(url)
    name = f"{prefix}:entry:{key}"
    meta = json.loads(await raw.hget(name, "meta"))  # type: ignore[misc]
    meta.update(answer=TAMPERED, action="transfer", transfer_to=PREMIUM)
    await raw.hset(name, "meta", json.dumps(meta))  # type: ignore[misc]
    await raw.aclose()


async def test_an_entry_rewritten_without_the_key_is_refused(
    redis_server: RedisServer, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    writer, _ = await new_cache(RedisStore(redis_server.url(), prefix, signing_key=KEY))
    await writer.publish(intents(), MATCHING)
    entry = writer.entry("order_status")
    assert entry is not None
    await rewrite_entry(redis_server.url(), prefix, entry.key)

    # A node that starts now reads the index (signed, untouched) and the rewritten entry.
    store = RedisStore(redis_server.url(), prefix, signing_key=KEY)
    reader, tts = await new_cache(store)
    with caplog.at_level(logging.WARNING):
        assert not await reader.reload()
    assert store.refused == 1
    assert "fails its signature check" in caplog.text
    assert reader.entry("order_status") is None
    # Nothing loaded: the caller's question goes to the normal route (the model).
    llm = ScriptedLLM(["The model answers."])
    _, turns = await run_session(reader, tts, "where is my order", llm)
    assert [t.route for t in turns] == ["llm"] and len(llm.prompts) == 1
    assert all(TAMPERED not in (t.answer or "") for t in turns)

    # Publishing the configuration builds that entry again, signed, over the rewritten one.
    await reader.publish(intents(), MATCHING)
    assert reader.built == 1
    again = RedisStore(redis_server.url(), prefix, signing_key=KEY)
    third, _ = await new_cache(again)
    assert await third.reload()
    healed = third.entry("order_status")
    assert healed is not None and healed.answer == "Your order ships in three days."
    assert again.refused == 0
    for cache in (writer, reader, third):
        await cache.stop()


async def test_an_index_published_without_the_key_is_refused(
    redis_server: RedisServer, prefix: str
) -> None:
    writer, _ = await new_cache(RedisStore(redis_server.url(), prefix, signing_key=KEY))
    await writer.publish(intents(), MATCHING)
    # The same entries under another key signed with a key nobody has.
    forger = RedisStore(redis_server.url(), prefix, signing_key=b"a key that is not the nodes'")
    forged, _ = await new_cache(forger)
    await forged.publish(intents(order_answer=TAMPERED), MATCHING)

    store = RedisStore(redis_server.url(), prefix, signing_key=KEY)
    assert await store.get_index() is None  # the forged index is not used
    assert store.refused == 1
    reader, _ = await new_cache(store)
    assert not await reader.reload()
    assert reader.version is None
    # A node holding the configuration puts the signed index back over the forged one.
    assert not await writer.reload()
    check = RedisStore(redis_server.url(), prefix, signing_key=KEY)
    index = await check.get_index()
    assert index is not None and index.version == writer.version
    for cache in (writer, forged, reader):
        await cache.stop()
    await check.close()


async def test_a_password_protected_redis_works_and_a_wrong_password_is_named() -> None:
    with run_redis(password="s3cret-for-tests") as server:
        right = RedisStore(server.url(), "t", signing_key=KEY, password="s3cret-for-tests")
        cache, _ = await new_cache(right)
        await cache.publish(intents(), MATCHING)
        other = RedisStore(server.url(), "t", signing_key=KEY, password="s3cret-for-tests")
        reader, _ = await new_cache(other)
        assert await reader.reload() and reader.entry("order_status") is not None

        for password in ("wrong", None):
            bad = RedisStore(server.url(), "t", signing_key=KEY, password=password)
            with pytest.raises(StoreRefused, match="Redis refused the credentials"):
                await bad.ping()
            with pytest.raises(StoreRefused, match="PASSWORD"):
                await bad.get_index()
            await bad.close()
        for c in (cache, reader):
            await c.stop()


def test_the_settings_make_the_store_with_password_and_tls_files(tmp_path: Path) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_text("not read here")
    cfg = IntentCacheSettings(
        signing_key="0123456789abcdef0123", password="pw", username="bot", tls_ca_file=ca
    )
    store = redis_store("rediss://127.0.0.1:6380/0", cfg)
    kwargs = store._client.connection_pool.connection_kwargs
    assert kwargs["password"] == "pw" and kwargs["username"] == "bot"
    assert kwargs["ssl_ca_certs"] == str(ca)
    with pytest.raises(ValueError, match="SIGNING_KEY"):
        redis_store("redis://127.0.0.1/0", IntentCacheSettings())


def test_a_shared_cache_without_a_signing_key_does_not_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SWITCHBOARD_REDIS_URL", "redis://127.0.0.1:6379/0")
    with pytest.raises(SettingsError, match="SWITCHBOARD_INTENT_CACHE__SIGNING_KEY is not"):
        load_settings()
    monkeypatch.setenv("SWITCHBOARD_INTENT_CACHE__SIGNING_KEY", "short")
    with pytest.raises(SettingsError, match="at least 16 bytes"):
        load_settings()
    monkeypatch.setenv("SWITCHBOARD_INTENT_CACHE__SIGNING_KEY", "0123456789abcdef0123")
    ca = tmp_path / "ca.crt"
    ca.write_text("x")
    monkeypatch.setenv("SWITCHBOARD_INTENT_CACHE__TLS_CA_FILE", str(ca))
    with pytest.raises(SettingsError, match="not rediss://"):
        load_settings()
    monkeypatch.setenv("SWITCHBOARD_REDIS_URL", "rediss://127.0.0.1:6380/0")
    assert load_settings().intent_cache.tls_ca_file == ca


async def test_redis_over_tls_with_a_client_certificate(tmp_path: Path) -> None:
    tls = redis_tls_files(tmp_path, require_client_cert=True)
    with run_redis(tls=tls, password="tls-and-a-password") as server:
        assert server.url().startswith("rediss://")
        good = RedisStore(
            server.url(),
            "t",
            signing_key=KEY,
            password="tls-and-a-password",
            tls_ca_file=str(tls.ca_file),
            tls_cert_file=str(tls.client_cert_file),
            tls_key_file=str(tls.client_key_file),
        )
        cache, _ = await new_cache(good)
        await cache.publish(intents(), MATCHING)
        assert (await good.get_index()) is not None
        await cache.stop()
        # Without the CA the server's certificate is not trusted; without a client
        # certificate the server refuses the handshake: neither connects.
        for kwargs in (
            {"tls_cert_file": str(tls.client_cert_file), "tls_key_file": str(tls.client_key_file)},
            {"tls_ca_file": str(tls.ca_file)},
        ):
            bad = RedisStore(
                server.url(),
                "t",
                timeout_s=2.0,
                signing_key=KEY,
                password="tls-and-a-password",
                **kwargs,
            )
            with pytest.raises(StoreUnavailable):
                await bad.ping()
            await bad.close()
        # A plain connection to the TLS port gets nowhere either.
        plain = RedisStore(
            server.url().replace("rediss://", "redis://"), "t", timeout_s=1.0, signing_key=KEY
        )
        with pytest.raises(StoreUnavailable):
            await plain.ping()
        await plain.close()
