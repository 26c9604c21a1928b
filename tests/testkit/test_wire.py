import numpy as np

from testkit.wire import greeting_delay_ms, segments, turn_latencies, voiced_frames

RATE = 8000


def track(parts: list[tuple[str, int]]) -> np.ndarray:
    """Concatenate ("tone"|"quiet", ms) parts into an int16 signal."""
    out = []
    for kind, ms in parts:
        n = RATE * ms // 1000
        if kind == "tone":
            out.append((6000 * np.sin(2 * np.pi * 300 * np.arange(n) / RATE)).astype(np.int16))
        else:
            out.append(np.zeros(n, dtype=np.int16))
    return np.concatenate(out)


def test_voiced_frames_and_segments() -> None:
    sig = track([("quiet", 100), ("tone", 200), ("quiet", 200), ("tone", 100), ("quiet", 1000)])
    voiced = voiced_frames(sig)
    assert voiced.sum() == 15
    assert segments(voiced, max_gap_ms=400) == [(5, 29)]
    assert segments(voiced, max_gap_ms=100) == [(5, 14), (25, 29)]


def test_greeting_delay() -> None:
    assert greeting_delay_ms(track([("quiet", 240), ("tone", 500)])) == 240
    assert greeting_delay_ms(track([("quiet", 500)])) is None


def test_turn_latency_is_caller_end_to_bot_start() -> None:
    sent = track([("quiet", 1000), ("tone", 800), ("quiet", 3000)])
    received = track([("quiet", 1800), ("quiet", 340), ("tone", 1000), ("quiet", 1660)])
    [turn] = turn_latencies(sent, received)
    assert turn.caller_end_ms == 1800
    assert turn.voice_to_voice_ms == 340


def test_overlapping_turns_are_not_measured() -> None:
    sent = track([("quiet", 1000), ("tone", 800), ("quiet", 1000)])
    received = track([("quiet", 1500), ("tone", 1300)])
    [turn] = turn_latencies(sent, received)
    assert turn.overlapped and turn.voice_to_voice_ms is None


def test_no_answer_is_none() -> None:
    sent = track([("tone", 500), ("quiet", 1000)])
    [turn] = turn_latencies(sent, track([("quiet", 1500)]))
    assert turn.bot_start_ms is None and turn.voice_to_voice_ms is None
