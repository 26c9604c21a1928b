"""``switchboard dial``: call a bot, say something, record what it says back.

The product's own caller, for an operator checking a node by hand: what it says is a WAV
file or text in a flite voice. The test tools (``testkit.voices``) use these same helpers;
nothing here imports them.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import wave
from pathlib import Path

import numpy as np
import soxr

from telephony.config import SAMPLE_RATE

RATE = SAMPLE_RATE
#: Suffixes of audio files: a ``--say`` value ending so is a file, never text to speak.
AUDIO_SUFFIXES = frozenset({".wav", ".wave", ".mp3", ".ogg", ".oga", ".opus", ".flac", ".au"})


class SayError(ValueError):
    """``--say`` names a file that cannot be played; the message is one line for the user."""


def read_wav(path: Path, rate: int = RATE) -> bytes:
    """A WAV file as 16-bit mono PCM at ``rate`` (mixed down and resampled as needed)."""
    with wave.open(str(path), "rb") as wav:
        if wav.getsampwidth() != 2:
            raise ValueError(f"{path}: only 16-bit PCM WAV is supported")
        channels, src_rate = wav.getnchannels(), wav.getframerate()
        samples = np.frombuffer(wav.readframes(wav.getnframes()), "<i2")
    mono = samples.reshape(-1, channels).mean(axis=1).astype(np.float32) / 32768.0
    if src_rate != rate:
        mono = soxr.resample(mono, src_rate, rate)
    pcm: bytes = (np.clip(mono, -1.0, 1.0) * 32767).astype("<i2").tobytes()
    return pcm


def write_wav(path: Path, pcm: bytes, rate: int = RATE, channels: int = 1) -> None:
    """Write 16-bit PCM (interleaved when ``channels`` > 1) to a WAV file."""
    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(channels)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        wav.writeframes(pcm)


def speak(text: str, voice: str = "slt", rate: int = RATE) -> bytes:
    """Say ``text`` in a flite voice; 16-bit mono PCM at ``rate``."""
    flite = shutil.which("flite")
    if flite is None:
        raise RuntimeError("flite is not installed (apt-get install flite)")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "say.wav"
        subprocess.run([flite, "-voice", voice, "-t", text, "-o", str(out)], check=True)
        return read_wav(out, rate)


def utterance(say: str) -> bytes:
    """``say`` is a WAV file to play, or text to speak in a synthetic voice.

    A value that names an existing file, or ends in an audio suffix, is a file: a missing
    one, one that is not a WAV, or a WAV that is not PCM is a ``SayError``.
    """
    path = Path(say)
    if not path.is_file() and path.suffix.lower() not in AUDIO_SUFFIXES:
        return speak(say)
    if path.is_dir():
        raise SayError(f"--say {say}: is a folder, not a WAV file")
    if not path.exists():
        raise SayError(f"--say {say}: no such file")
    try:
        with wave.open(str(path), "rb") as wav:
            width, frames = wav.getsampwidth(), wav.getnframes()
    except wave.Error as exc:
        if "RIFF" in str(exc) or "WAVE" in str(exc):
            raise SayError(f"--say {say}: not a WAV file (16-bit PCM WAV needed)") from None
        raise SayError(f"--say {say}: unsupported WAV ({exc}); 16-bit PCM WAV needed") from None
    except (EOFError, OSError) as exc:
        raise SayError(f"--say {say}: cannot be read as a WAV file ({exc})") from None
    if width != 2:
        raise SayError(
            f"--say {say}: unsupported WAV ({8 * width}-bit samples); 16-bit PCM WAV needed"
        )
    if frames == 0:
        raise SayError(f"--say {say}: the WAV file holds no audio")
    return read_wav(path)


async def dial_and_record(
    uri: str,
    *,
    play: bytes | None,
    record: Path | None,
    record_both: Path | None,
    duration_s: float,
    say_at_s: float,
    srtp: bool = False,
) -> int:
    """Place the call; returns a process exit code (0 answered, 1 not answered)."""
    # The SIP stack loads only when a call is placed: the helpers above need none.
    from telephony.dialer import dial  # noqa: PLC0415

    result = await dial(uri, play=play, play_at_s=say_at_s, record_seconds=duration_s, srtp=srtp)
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
        f"answered in {result.invite_to_answer_ms:.0f} ms ({result.codec}"
        f"{', SRTP' if srtp else ''}); "
        f"{len(result.received) / RATE:.1f}s recorded; ended by "
        f"{'the bot' if result.ended_by_remote else 'us'}",
        file=sys.stderr,
    )
    for target in result.transfer_requests:
        print(f"the bot asked to transfer the call to {target} (declined)", file=sys.stderr)
    return 0
