"""A second bot node for tests: holds an intent cache on Redis and reports its reloads.

    python -m tests.bot.intent_node REDIS_URL PREFIX

Prints ``ready <version>`` once loaded, then ``reload <version> <order_status answer>`` after
each reload, and exits when stdin closes.
"""

from __future__ import annotations

import asyncio
import sys

from bot.intents.cache import IntentCache
from bot.intents.store import RedisStore
from tests.bot.fakes import ToneTTS
from tests.bot.intent_fakes import WordsEmbedder

KEY = b"test-signing-key-of-the-suite"


async def main(url: str, prefix: str) -> None:
    embedder, tts = WordsEmbedder(), ToneTTS()
    await embedder.load()
    await tts.load()
    cache = IntentCache(
        RedisStore(url, prefix, signing_key=KEY), embedder, tts, voice="tone", heartbeat_s=0.1
    )
    await cache.reload()
    cache.start()
    print(f"ready {cache.version}", flush=True)
    loop = asyncio.get_running_loop()
    stdin_closed = loop.run_in_executor(None, sys.stdin.read)
    seen = cache.reloads
    while not stdin_closed.done():
        await asyncio.sleep(0.05)
        if cache.reloads != seen:
            seen = cache.reloads
            entry = cache.entry("order_status")
            answer = entry.answer if entry else "-"
            print(f"reload {cache.version} {answer} tts={len(tts.texts)}", flush=True)
    await cache.stop()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
