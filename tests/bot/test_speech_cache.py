"""Pre-synthesized speech on disk: read back at the next start instead of synthesized."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bot.intents.cache import IntentCache
from bot.intents.store import MemoryStore
from bot.pipeline.prompts import PromptAudio
from bot.pipeline.speech_cache import SUFFIX, SpeechCache, SpeechCacheSettings, speech_key
from node.settings import load_settings
from tests.bot.fakes import ToneTTS
from tests.bot.intent_fakes import MATCHING, WordsEmbedder, intents

PHRASE = "Thank you for calling."
RATE = 8000


class VoiceTTS(ToneTTS):
    """A tone synthesizer that counts its calls and names its voice (None: not cacheable)."""

    def __init__(self, voice: str | None = "tone v1") -> None:
        super().__init__()
        self.voice = voice

    @property
    def cache_key(self) -> str | None:
        return self.voice


def stored(folder: Path) -> list[Path]:
    return sorted(folder.glob(f"*{SUFFIX}"))


async def loaded(tts: ToneTTS) -> ToneTTS:
    await tts.load()
    return tts


async def test_a_phrase_is_read_back_without_synthesizing(tmp_path: Path) -> None:
    first = await loaded(VoiceTTS())
    audio = await PromptAudio(RATE, speech_cache=SpeechCache(tmp_path)).add(first, PHRASE)
    assert first.texts == [PHRASE]

    again = await loaded(VoiceTTS())
    cache = SpeechCache(tmp_path)
    assert await PromptAudio(RATE, speech_cache=cache).add(again, PHRASE) == audio
    assert again.texts == [] and cache.hits == 1


async def test_another_voice_text_or_rate_is_synthesized(tmp_path: Path) -> None:
    tts = await loaded(VoiceTTS())
    await PromptAudio(RATE, speech_cache=SpeechCache(tmp_path)).add(tts, PHRASE)
    other = await loaded(VoiceTTS("tone v2"))
    await PromptAudio(RATE, speech_cache=SpeechCache(tmp_path)).add(other, PHRASE)
    await PromptAudio(RATE, speech_cache=SpeechCache(tmp_path)).add(tts, "Goodbye now.")
    await PromptAudio(16000, speech_cache=SpeechCache(tmp_path)).add(tts, PHRASE)
    assert other.texts == [PHRASE]
    assert tts.texts == [PHRASE, "Goodbye now.", PHRASE]
    assert len(stored(tmp_path)) == 4


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty"])
async def test_a_damaged_file_is_synthesized_again(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    tts = await loaded(VoiceTTS())
    audio = await PromptAudio(RATE, speech_cache=SpeechCache(tmp_path)).add(tts, PHRASE)
    path = SpeechCache(tmp_path).path(speech_key("tone v1", PHRASE, RATE))
    raw = path.read_bytes()
    broken = {"truncate": raw[:-10], "flip": raw[:-1] + bytes([raw[-1] ^ 1]), "empty": b""}
    path.write_bytes(broken[damage])

    again = await loaded(VoiceTTS())
    assert await PromptAudio(RATE, speech_cache=SpeechCache(tmp_path)).add(again, PHRASE) == audio
    assert again.texts == [PHRASE]
    assert "speech cache" in caplog.text
    assert path.read_bytes() == raw  # rewritten whole


async def test_a_synthesizer_with_no_cache_key_is_never_cached(tmp_path: Path) -> None:
    for _ in range(2):
        tts = await loaded(VoiceTTS(voice=None))
        await PromptAudio(RATE, speech_cache=SpeechCache(tmp_path)).add(tts, PHRASE)
        assert tts.texts == [PHRASE]
    assert stored(tmp_path) == []


def test_the_folder_is_pruned_to_its_bound_least_recently_used_first(tmp_path: Path) -> None:
    cache = SpeechCache(tmp_path, max_files=3)
    keys = [speech_key("v", f"phrase {i}", RATE) for i in range(5)]
    for age, key in enumerate(keys[:3]):
        cache.write(key, b"\0\1" * 10)
        os.utime(cache.path(key), (1000 + age, 1000 + age))
    assert cache.read(keys[0]) is not None  # used: now the newest
    cache.write(keys[3], b"\0\1")
    cache.write(keys[4], b"\0\1")
    kept = {p.stem for p in stored(tmp_path)}
    assert kept == {keys[0], keys[3], keys[4]}


async def test_intent_answers_and_questions_are_read_back(tmp_path: Path) -> None:
    async def publish() -> VoiceTTS:
        tts = await loaded(VoiceTTS())
        embedder = WordsEmbedder()
        await embedder.load()
        cache = IntentCache(
            MemoryStore(), embedder, tts, voice="tone", speech_cache=SpeechCache(tmp_path)
        )
        await cache.publish(intents(), MATCHING)
        entry = cache.entry("opening_hours")
        assert entry is not None and entry.audio and entry.confirm_audio
        return tts

    first = await publish()
    assert len(first.texts) == 6  # each intent's answer and confirmation question
    assert (await publish()).texts == []


def test_the_folder_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert SpeechCacheSettings().folder(tmp_path) == tmp_path / "speech-cache"
    assert SpeechCacheSettings(enabled=False).folder(tmp_path) is None
    monkeypatch.setenv("SWITCHBOARD_SPEECH_CACHE__DIR", "")
    assert load_settings().speech_cache.folder(tmp_path) is None
    monkeypatch.setenv("SWITCHBOARD_SPEECH_CACHE__DIR", str(tmp_path / "s"))
    assert load_settings().speech_cache.folder(tmp_path) == tmp_path / "s"
