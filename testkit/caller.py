"""``switchboard dial``: call a bot, say something, record what it says back."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from telephony.dialer import dial
from testkit.voices import RATE, read_wav, speak, write_wav


def utterance(say: str) -> bytes:
    """``say`` is a WAV file to play, or text to speak in a synthetic voice."""
    path = Path(say)
    if path.suffix.lower() == ".wav":
        if not path.exists():
            raise FileNotFoundError(f"no such WAV file: {path}")
        return read_wav(path)
    return speak(say)


async def dial_and_record(
    uri: str,
    *,
    say: str | None,
    record: Path | None,
    record_both: Path | None,
    duration_s: float,
    say_at_s: float,
) -> int:
    """Place the call; returns a process exit code (0 answered, 1 not answered)."""
    play = utterance(say) if say else None
    result = await dial(uri, play=play, play_at_s=say_at_s, record_seconds=duration_s)
    if result.sip_final_status != 200:
        print(f"not answered: SIP {result.sip_final_status} {result.error}", file=sys.stderr)
        return 1
    if record is not None:
        write_wav(record, result.received.astype("<i2").tobytes(), RATE)
    if record_both is not None:
        n = min(len(result.sent), len(result.received))
        stereo = np.stack([result.sent[:n], result.received[:n]], axis=1).astype("<i2")
        write_wav(record_both, stereo.tobytes(), RATE, channels=2)
    print(
        f"answered in {result.invite_to_answer_ms:.0f} ms ({result.codec}); "
        f"{len(result.received) / RATE:.1f}s recorded; ended by "
        f"{'the bot' if result.ended_by_remote else 'us'}",
        file=sys.stderr,
    )
    for target in result.transfer_requests:
        print(f"the bot asked to transfer the call to {target} (declined)", file=sys.stderr)
    return 0
