"""What a user typed wrong gets one line naming it, and nothing is started or dialled."""

from __future__ import annotations

import struct
import subprocess
import sys
import wave
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# An address nothing listens on: a test that dialled would wait for its answer timeout.
NOWHERE = "sip:bot@127.0.0.1:9"


def dial(say: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "node.cli", "dial", NOWHERE, "--say", say, "--duration", "1"],
        cwd=ROOT,
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )


def float_wav(path: Path) -> None:
    """A 32-bit float WAV (format 3), which Python's wave module refuses."""
    data = struct.pack("<4f", 0.0, 0.1, -0.1, 0.0)
    fmt = struct.pack("<HHIIHH", 3, 1, 8000, 32000, 4, 32)
    riff = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt
    riff += b"data" + struct.pack("<I", len(data)) + data
    path.write_bytes(b"RIFF" + struct.pack("<I", len(riff)) + riff)


def pcm8_wav(path: Path) -> None:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(1)
        w.setframerate(8000)
        w.writeframes(b"\x80" * 800)


def empty_wav(path: Path) -> None:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)


@pytest.mark.parametrize(
    ("make", "name", "expected"),
    [
        (None, "missing.wav", "no such file"),
        (None, "missing.mp3", "no such file"),
        (lambda p: p.write_text("not audio at all"), "notes.wav", "not a WAV file"),
        (lambda p: p.write_bytes(b"ID3\x03\x00" + bytes(200)), "song.mp3", "not a WAV file"),
        (float_wav, "float.wav", "unsupported WAV (unknown format: 3)"),
        (pcm8_wav, "eight.wav", "unsupported WAV (8-bit samples)"),
        (empty_wav, "empty.wav", "holds no audio"),
        (lambda p: p.mkdir(), "folder.wav", "is a folder"),
    ],
    ids=["missing", "missing-mp3", "text", "mp3", "float", "8-bit", "empty", "folder"],
)
def test_dial_say_with_a_bad_file_says_so_in_one_line(
    tmp_path: Path, make: object, name: str, expected: str
) -> None:
    path = tmp_path / name
    if callable(make):
        make(path)
    done = dial(str(path))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines == [lines[0]] and lines[0].startswith(f"switchboard: --say {path}: "), lines
    assert expected in lines[0], lines[0]
    assert "Traceback" not in done.stderr
