"""Move PCM between Python bytes and pjsua2 ``ByteVector`` cheaply.

SWIG iterates a ``ByteVector`` element by element: ``bytes(frame.buf)`` costs ~250-500 us
for a 320-byte frame. A ``std::vector<unsigned char>`` (libstdc++) starts with its data
pointer and its end pointer, so ctypes can copy the payload in ~2 us. The layout is
checked once against known bytes at import; if it does not match, the slow SWIG path is
used instead.
"""

from __future__ import annotations

import ctypes
from typing import Any

import pjsua2 as pj

_ptr_at = ctypes.c_void_p.from_address
_string_at = ctypes.string_at
_memmove = ctypes.memmove


def _read_fast(vec: Any) -> bytes:
    addr = int(vec.this)
    start = _ptr_at(addr).value
    if not start:
        return b""
    end = _ptr_at(addr + ctypes.sizeof(ctypes.c_void_p)).value or start
    return _string_at(start, end - start)


def _write_fast(vec: Any, data: bytes) -> None:
    vec.resize(len(data))
    start = _ptr_at(int(vec.this)).value
    if start:
        _memmove(start, data, len(data))


def _read_slow(vec: Any) -> bytes:
    return bytes(vec)


def _layout_ok() -> bool:
    probe = bytes(range(256)) + b"\x00\x7f\x80\xff" * 16
    try:
        vec = pj.ByteVector(probe)
        if _read_fast(vec) != probe:
            return False
        target = pj.ByteVector()
        _write_fast(target, probe[::-1])
        return bytes(target) == probe[::-1] and int(target.size()) == len(probe)
    except (TypeError, ValueError, OSError, AttributeError):
        return False


FAST_PATH = _layout_ok()


def read_frame(frame: Any) -> bytes:
    """Copy the payload of a pjsua2 ``MediaFrame`` into ``bytes``."""
    vec = frame.buf
    return _read_fast(vec) if FAST_PATH else _read_slow(vec)


def write_frame(frame: Any, data: bytes) -> None:
    """Fill a pjsua2 ``MediaFrame`` with ``data`` (an audio frame)."""
    if FAST_PATH:
        _write_fast(frame.buf, data)
    else:
        frame.buf = pj.ByteVector(data)
    frame.size = len(data)
    frame.type = pj.PJMEDIA_FRAME_TYPE_AUDIO


def pcm_port_format(sample_rate: int) -> Any:
    """A media port's format: mono 16-bit PCM at ``sample_rate``, 20 ms frames."""
    fmt = pj.MediaFormatAudio()
    fmt.type = pj.PJMEDIA_TYPE_AUDIO
    fmt.clockRate = sample_rate
    fmt.channelCount = 1
    fmt.bitsPerSample = 16
    fmt.frameTimeUsec = 20000
    return fmt
