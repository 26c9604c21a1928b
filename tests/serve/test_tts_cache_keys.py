"""Who speaks, for the speech cache (``TTS.cache_key``): read once at load, the same while
loaded, another for another voice.

Piper's voice is a pair of stand-in files (its loader is replaced: the key reads only the
files and piper-tts's version); flite is the real binary, whose output the key promises
repeats byte for byte.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from serve.tts_flite import FliteTTS
from serve.tts_piper import PiperTTS

PHRASE = "Thank you for calling, how can I help?"
no_flite = pytest.mark.skipif(shutil.which("flite") is None, reason="Debian flite is not installed")


def stand_in_voice(folder: Path, name: str, model: bytes) -> Path:
    path = folder / f"{name}.onnx"
    path.write_bytes(model)
    Path(f"{path}.json").write_text("{}", encoding="utf-8")
    return path


def remove_voice(path: Path) -> None:
    path.unlink()
    Path(f"{path}.json").unlink()


@pytest.fixture
def no_piper_model(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("piper")
    monkeypatch.setattr("serve.tts_piper.open_voice", lambda path: object())


@pytest.mark.usefixtures("no_piper_model")
async def test_piper_reads_its_voice_once_at_load(tmp_path: Path) -> None:
    path = stand_in_voice(tmp_path, "en_US-one-medium", b"one")
    tts = PiperTTS(voice_path=str(path))
    assert tts.cache_key is None  # not loaded
    await tts.load()
    key = tts.cache_key
    assert key is not None and key.startswith("piper en_US-one-medium|") and "piper-tts" in key
    assert tts.cache_key == key
    remove_voice(path)  # no longer looked at: the loaded voice is what it was
    assert tts.cache_key == key


@pytest.mark.usefixtures("no_piper_model")
async def test_another_piper_voice_has_another_key(tmp_path: Path) -> None:
    keys = []
    for name, model in (("en_US-one-medium", b"one"), ("en_US-two-medium", b"two!")):
        tts = PiperTTS(voice_path=str(stand_in_voice(tmp_path, name, model)))
        await tts.load()
        keys.append(tts.cache_key)
    assert None not in keys and keys[0] != keys[1]


@no_flite
async def test_flite_speaks_the_same_text_the_same_way_under_one_key() -> None:
    tts = FliteTTS(voice="kal")
    assert tts.cache_key is None  # not loaded
    await tts.load()
    key = tts.cache_key
    assert key is not None and key.startswith("flite kal|") and "version" in key
    assert tts.cache_key == key
    first = b"".join([c async for c in tts.synthesize(PHRASE, sample_rate=8000)])
    again = b"".join([c async for c in tts.synthesize(PHRASE, sample_rate=8000)])
    assert first and first == again


@no_flite
async def test_another_flite_voice_has_another_key() -> None:
    keys = []
    for voice in ("kal", "rms"):
        tts = FliteTTS(voice=voice)
        await tts.load()
        keys.append(tts.cache_key)
    assert None not in keys and keys[0] != keys[1]


@no_flite
async def test_a_flite_voice_file_is_keyed_by_its_size_and_time(tmp_path: Path) -> None:
    keys = []
    for name, data in (("one.flitevox", b"one"), ("two.flitevox", b"two!")):
        voice = tmp_path / name
        voice.write_bytes(data)
        tts = FliteTTS(voice=str(voice))
        await tts.load()  # the voice is read when it speaks
        keys.append(tts.cache_key)
    assert None not in keys and keys[0] != keys[1]
    assert all(f"{tmp_path}/" in str(k) for k in keys)


async def test_a_flite_binary_that_gives_no_version_is_not_cached(tmp_path: Path) -> None:
    silent = tmp_path / "flite"
    silent.write_text("#!/bin/sh\nexit 1\n", encoding="utf-8")
    silent.chmod(0o755)
    tts = FliteTTS(binary=str(silent))
    await tts.load()
    assert tts.cache_key is None
