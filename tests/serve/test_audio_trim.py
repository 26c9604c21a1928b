from collections.abc import Iterator

import numpy as np

from serve.audio import trim_leading_silence, trim_trailing_silence

RATE = 8000


def pcm(*parts: tuple[int, int]) -> bytes:
    """(milliseconds, amplitude) parts of a square wave, 0 amplitude being silence."""
    out = [np.tile(np.array([a, -a], dtype="<i2"), RATE * ms // 1000 // 2) for ms, a in parts]
    return np.concatenate(out).tobytes()


def test_leading_silence_is_cut_to_ten_ms_across_chunks() -> None:
    chunks = [pcm((30, 0)), pcm((20, 0), (20, 3000)), pcm((40, 3000))]
    out = b"".join(trim_leading_silence(iter(chunks), RATE))
    # 10 ms of silence kept before the first sound, then everything after it
    assert out == pcm((10, 0), (20, 3000), (40, 3000))


def test_sound_at_the_start_passes_whole() -> None:
    chunks = [pcm((20, 3000), (20, 0)), pcm((20, 0))]
    assert list(trim_leading_silence(iter(chunks), RATE)) == chunks


def test_all_silence_yields_nothing_and_the_source_is_closed() -> None:
    closed = []

    def source() -> Iterator[bytes]:
        try:
            yield pcm((20, 0))
            yield pcm((20, 10))  # below the sound level
        finally:
            closed.append(True)

    assert list(trim_leading_silence(source(), RATE)) == []
    assert closed == [True]


def test_closing_the_trim_closes_the_source() -> None:
    closed = []

    def source() -> Iterator[bytes]:
        try:
            while True:
                yield pcm((20, 3000))
        finally:
            closed.append(True)

    trimmed = trim_leading_silence(source(), RATE)
    next(trimmed)
    trimmed.close()
    assert closed == [True]


def test_trailing_silence_is_cut_to_ten_ms() -> None:
    audio = pcm((20, 0), (40, 3000), (30, 100), (200, 0))
    # the leading silence stays; 10 ms kept after the last sound above the level
    assert trim_trailing_silence(audio, RATE) == pcm((20, 0), (40, 3000), (10, 100))


def test_sound_at_the_end_passes_whole_and_silence_gives_nothing() -> None:
    audio = pcm((20, 0), (40, 3000))
    assert trim_trailing_silence(audio, RATE) == audio
    assert trim_trailing_silence(pcm((50, 0), (20, 10)), RATE) == b""
