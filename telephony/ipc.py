"""Messages between a ``SipServer`` and its worker processes, as length-prefixed binary frames.

A frame is ``<u32 payload length><u8 type><payload>`` (little endian). Audio travels as fixed
binary structs followed by raw PCM; rare messages (call started/ended, DTMF, stats) carry JSON.
Both directions share one Unix stream socket per worker (a ``socketpair``).

Worker -> parent: ``Ready``, ``CallStarted``, ``AudioFrame`` (one inbound 20 ms frame with the
worker's playout counters piggybacked), ``Dtmf``, ``CallStopped``, ``Stats``,
``TransferStatus`` (the outcome of a ``Transfer``), ``SlotsEnding`` (call slots still held
by calls that are over: the front must not count them free).
Parent -> worker: ``SendAudio``, ``ClearPlayout``, ``Hangup``, ``Transfer`` (blind transfer:
REFER to the caller; or a bridged one: the worker calls the agent and joins the calls),
``Stop``.

Times are offsets (``*_ago``: seconds before the message was written) except ``bridge_at`` /
``sent_at``, which are ``time.monotonic()`` of the sending process; on Linux that clock is
shared by every process, so they are only used to measure how long a hop took.
"""

from __future__ import annotations

import base64
import json
import struct
from collections import deque
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Literal

from telephony.config import EndpointConfig

HEADER = struct.Struct("<IB")  # payload length, message type
MAX_PAYLOAD = 1 << 20  # a larger length prefix means the stream is corrupt
SEND_CHUNK = 32000  # SendAudio splits longer PCM (2 s at 8 kHz) so no frame gets large

_AUDIO = struct.Struct("<IIIIQdd")  # key, queued, played, clears, applied, bridge_at, sent_at
_SEND = struct.Struct("<Id")  # key, sent_at
_KEY = struct.Struct("<I")


class IpcError(ValueError):
    """A frame or message that breaks the protocol: the link is closed."""


class MsgType(IntEnum):
    READY = 1
    CALL_STARTED = 2
    AUDIO = 3
    DTMF = 4
    CALL_STOPPED = 5
    STATS = 6
    TRANSFER_STATUS = 7
    SLOTS_ENDING = 8
    SEND_AUDIO = 16
    CLEAR_PLAYOUT = 17
    HANGUP = 18
    STOP = 19
    TRANSFER = 20


@dataclass(frozen=True, slots=True)
class Ready:
    """The worker's SIP transport is listening on ``sip_port``."""

    pid: int
    sip_port: int


@dataclass(frozen=True, slots=True)
class CallStarted:
    """A call's media came up in the worker; ``key`` names it in later messages."""

    key: int
    call_id: str
    remote_uri: str
    local_uri: str
    codec: str
    sample_rate: int
    answered_ago: float


@dataclass(slots=True)  # not frozen: built 50 times a second per call
class AudioFrame:
    """One inbound PCM frame plus the call's playout state in the worker.

    ``queued``: frames in the worker's playout buffer; ``played``: frames handed to pjsip so
    far; ``clears``: ``ClearPlayout`` messages applied; ``applied``: bytes of ``SendAudio``
    applied so far. The parent derives ``queued_frames`` from these.
    """

    key: int
    queued: int
    played: int
    clears: int
    applied: int
    bridge_at: float
    sent_at: float
    pcm: bytes


@dataclass(frozen=True, slots=True)
class Dtmf:
    key: int
    digit: str
    duration_ms: int
    ago: float


@dataclass(frozen=True, slots=True)
class CallStopped:
    """The call ended in the worker (``telephony.CallEnded`` there)."""

    key: int
    reason: str
    by_remote: bool
    played: int


@dataclass(frozen=True, slots=True)
class SlotsEnding:
    """``count`` call slots of the worker are held by calls already stopped (their BYE not
    over: 64*T1 when the caller has gone). Sent when the count changes, before the
    ``CallStopped`` that it follows."""

    count: int


@dataclass(frozen=True, slots=True)
class Stats:
    counters: dict[str, int]


@dataclass(slots=True)
class SendAudio:
    key: int
    sent_at: float
    pcm: bytes


@dataclass(frozen=True, slots=True)
class ClearPlayout:
    key: int


@dataclass(frozen=True, slots=True)
class Hangup:
    key: int


@dataclass(frozen=True, slots=True)
class Transfer:
    """Transfer the call to ``target``; the worker answers with ``TransferStatus``.

    ``mode`` ``refer``: a REFER to the caller. ``bridge``: the worker calls ``target`` and
    joins the two calls (``telephony.bridge``), the agent first hearing ``summary`` (PCM at
    the call's rate; empty: none). The summary travels base64 in the JSON (20 s at 8 kHz is
    well under ``MAX_PAYLOAD``).
    """

    key: int
    target: str
    timeout_s: float
    mode: Literal["refer", "bridge"] = "refer"
    summary: bytes = b""


@dataclass(frozen=True, slots=True)
class TransferStatus:
    """How the call's ``Transfer`` ended (``telephony.events.TransferResult``)."""

    key: int
    ok: bool
    status: int
    reason: str


@dataclass(frozen=True, slots=True)
class Stop:
    pass


Message = (
    Ready
    | CallStarted
    | AudioFrame
    | Dtmf
    | CallStopped
    | Stats
    | SendAudio
    | ClearPlayout
    | Hangup
    | Transfer
    | TransferStatus
    | SlotsEnding
    | Stop
)


def config_to_json(config: EndpointConfig) -> str:
    """A worker's ``EndpointConfig`` for its command line."""
    return config.model_dump_json()


def config_from_json(text: str) -> EndpointConfig:
    """The ``EndpointConfig`` a worker was started with."""
    return EndpointConfig.model_validate_json(text)


def _frame(kind: MsgType, payload: bytes) -> bytes:
    return HEADER.pack(len(payload), kind) + payload


def _json_frame(kind: MsgType, obj: dict[str, Any]) -> bytes:
    return _frame(kind, json.dumps(obj, separators=(",", ":")).encode())


def encode_audio(
    key: int,
    pcm: bytes,
    *,
    queued: int,
    played: int,
    clears: int,
    applied: int,
    bridge_at: float,
    sent_at: float,
) -> bytes:
    """``AudioFrame`` without building the dataclass (the worker's hot path)."""
    payload_len = _AUDIO.size + len(pcm)
    head = HEADER.pack(payload_len, MsgType.AUDIO)
    return head + _AUDIO.pack(key, queued, played, clears, applied, bridge_at, sent_at) + pcm


def encode_send(key: int, sent_at: float, pcm: bytes) -> bytes:
    """One or more ``SendAudio`` frames (PCM longer than ``SEND_CHUNK`` is split)."""
    if len(pcm) <= SEND_CHUNK:
        return _frame(MsgType.SEND_AUDIO, _SEND.pack(key, sent_at) + pcm)
    head = _SEND.pack(key, sent_at)
    return b"".join(
        _frame(MsgType.SEND_AUDIO, head + pcm[i : i + SEND_CHUNK])
        for i in range(0, len(pcm), SEND_CHUNK)
    )


def encode(msg: Message) -> bytes:
    """Serialise any message to its frame(s)."""
    if isinstance(msg, AudioFrame):
        return encode_audio(
            msg.key,
            msg.pcm,
            queued=msg.queued,
            played=msg.played,
            clears=msg.clears,
            applied=msg.applied,
            bridge_at=msg.bridge_at,
            sent_at=msg.sent_at,
        )
    if isinstance(msg, SendAudio):
        return encode_send(msg.key, msg.sent_at, msg.pcm)
    if isinstance(msg, ClearPlayout):
        return _frame(MsgType.CLEAR_PLAYOUT, _KEY.pack(msg.key))
    if isinstance(msg, Hangup):
        return _frame(MsgType.HANGUP, _KEY.pack(msg.key))
    if isinstance(msg, Stop):
        return _frame(MsgType.STOP, b"")
    if isinstance(msg, Transfer):
        return _json_frame(
            MsgType.TRANSFER,
            {
                "key": msg.key,
                "target": msg.target,
                "timeout_s": msg.timeout_s,
                "mode": msg.mode,
                "summary": base64.b64encode(msg.summary).decode("ascii"),
            },
        )
    if isinstance(msg, TransferStatus):
        return _json_frame(
            MsgType.TRANSFER_STATUS,
            {"key": msg.key, "ok": msg.ok, "status": msg.status, "reason": msg.reason},
        )
    if isinstance(msg, SlotsEnding):
        return _json_frame(MsgType.SLOTS_ENDING, {"count": msg.count})
    if isinstance(msg, Ready):
        return _json_frame(MsgType.READY, {"pid": msg.pid, "sip_port": msg.sip_port})
    if isinstance(msg, CallStarted):
        return _json_frame(
            MsgType.CALL_STARTED,
            {
                "key": msg.key,
                "call_id": msg.call_id,
                "remote_uri": msg.remote_uri,
                "local_uri": msg.local_uri,
                "codec": msg.codec,
                "sample_rate": msg.sample_rate,
                "answered_ago": msg.answered_ago,
            },
        )
    if isinstance(msg, Dtmf):
        return _json_frame(
            MsgType.DTMF,
            {"key": msg.key, "digit": msg.digit, "duration_ms": msg.duration_ms, "ago": msg.ago},
        )
    if isinstance(msg, CallStopped):
        return _json_frame(
            MsgType.CALL_STOPPED,
            {
                "key": msg.key,
                "reason": msg.reason,
                "by_remote": msg.by_remote,
                "played": msg.played,
            },
        )
    return _json_frame(MsgType.STATS, dict(msg.counters))


def _json(payload: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(payload)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise IpcError(f"bad JSON payload: {exc}") from None
    if not isinstance(obj, dict):
        raise IpcError("JSON payload is not an object")
    return obj


def decode(kind: int, payload: bytes) -> Message:
    """Parse one frame's payload. Raises ``IpcError`` on anything malformed."""
    try:
        if kind == MsgType.AUDIO:
            if len(payload) < _AUDIO.size:
                raise IpcError("truncated audio frame")
            key, queued, played, clears, applied, bridge_at, sent_at = _AUDIO.unpack_from(payload)
            pcm = payload[_AUDIO.size :]
            return AudioFrame(key, queued, played, clears, applied, bridge_at, sent_at, pcm)
        if kind == MsgType.SEND_AUDIO:
            if len(payload) < _SEND.size:
                raise IpcError("truncated send-audio frame")
            key, sent_at = _SEND.unpack_from(payload)
            return SendAudio(key, sent_at, payload[_SEND.size :])
        if kind in (MsgType.CLEAR_PLAYOUT, MsgType.HANGUP):
            if len(payload) != _KEY.size:
                raise IpcError("bad call-key frame")
            (key,) = _KEY.unpack(payload)
            return ClearPlayout(key) if kind == MsgType.CLEAR_PLAYOUT else Hangup(key)
        if kind == MsgType.STOP:
            return Stop()
        if kind == MsgType.READY:
            d = _json(payload)
            return Ready(int(d["pid"]), int(d["sip_port"]))
        if kind == MsgType.CALL_STARTED:
            d = _json(payload)
            return CallStarted(
                key=int(d["key"]),
                call_id=str(d["call_id"]),
                remote_uri=str(d["remote_uri"]),
                local_uri=str(d["local_uri"]),
                codec=str(d["codec"]),
                sample_rate=int(d["sample_rate"]),
                answered_ago=float(d["answered_ago"]),
            )
        if kind == MsgType.DTMF:
            d = _json(payload)
            return Dtmf(int(d["key"]), str(d["digit"]), int(d["duration_ms"]), float(d["ago"]))
        if kind == MsgType.CALL_STOPPED:
            d = _json(payload)
            return CallStopped(
                int(d["key"]), str(d["reason"]), bool(d["by_remote"]), int(d["played"])
            )
        if kind == MsgType.STATS:
            return Stats({str(k): int(v) for k, v in _json(payload).items()})
        if kind == MsgType.TRANSFER:
            d = _json(payload)
            mode = d.get("mode", "refer")
            if mode not in ("refer", "bridge"):
                raise ValueError(f"unknown transfer mode {mode!r}")
            summary = base64.b64decode(str(d.get("summary", "")), validate=True)
            return Transfer(int(d["key"]), str(d["target"]), float(d["timeout_s"]), mode, summary)
        if kind == MsgType.SLOTS_ENDING:
            return SlotsEnding(int(_json(payload)["count"]))
        if kind == MsgType.TRANSFER_STATUS:
            d = _json(payload)
            return TransferStatus(int(d["key"]), bool(d["ok"]), int(d["status"]), str(d["reason"]))
    except (KeyError, TypeError, ValueError, OverflowError) as exc:  # e.g. int(Infinity)
        if isinstance(exc, IpcError):
            raise
        raise IpcError(f"bad message of type {kind}: {exc!r}") from None
    raise IpcError(f"unknown message type {kind}")


class FrameDecoder:
    """Reassembles frames from a byte stream cut anywhere."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[Message]:
        """Add bytes; return every message completed by them, in order."""
        buf = self._buf
        buf += data
        out: list[Message] = []
        pos = 0
        end = len(buf)
        while end - pos >= HEADER.size:
            length, kind = HEADER.unpack_from(buf, pos)
            if length > MAX_PAYLOAD:
                raise IpcError(f"frame of {length} bytes exceeds {MAX_PAYLOAD}")
            stop = pos + HEADER.size + length
            if stop > end:
                break
            out.append(decode(kind, bytes(buf[pos + HEADER.size : stop])))
            pos = stop
        if pos:
            del buf[:pos]
        return out

    @property
    def pending(self) -> int:
        """Bytes of an incomplete frame held back."""
        return len(self._buf)


class HopTimes:
    """Recent one-way hop times (seconds) and their percentiles in whole microseconds."""

    def __init__(self, keep: int = 4096) -> None:
        self._samples: deque[float] = deque(maxlen=keep)
        self.count = 0

    def add(self, seconds: float) -> None:
        self._samples.append(seconds)
        self.count += 1

    def summary(self, prefix: str) -> dict[str, int]:
        """``{prefix}_p50_us``, ``_p99_us``, ``_max_us`` over the kept samples (0 if none)."""
        ordered = sorted(self._samples)
        if not ordered:
            return {f"{prefix}_p50_us": 0, f"{prefix}_p99_us": 0, f"{prefix}_max_us": 0}
        last = len(ordered) - 1
        return {
            f"{prefix}_p50_us": round(ordered[last // 2] * 1e6),
            f"{prefix}_p99_us": round(ordered[min(last, round(last * 0.99))] * 1e6),
            f"{prefix}_max_us": round(ordered[last] * 1e6),
        }
