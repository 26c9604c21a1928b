"""Typed events a call surfaces to asyncio, in arrival order, and the frame kinds they are.

The caller's audio and keys are frames of the bot's call pipeline as they come off the line
(``bot.pipeline.frames`` builds its own frames on the same bases): one type from the media
port or the worker link to the turn detector, never re-wrapped. A ``SystemFrame`` is handled
at once, ahead of queued work; a ``DataFrame`` is processed in order and dropped when the
caller interrupts the bot (``bot.pipeline.processor.Processor``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Frame:
    """Base of every frame of a call: the line's events and the pipeline's own."""

    __slots__ = ()


@dataclass(frozen=True)
class SystemFrame(Frame):
    """Handled immediately, never dropped."""

    __slots__ = ()


@dataclass(frozen=True)
class DataFrame(Frame):
    """Processed in order; discarded on interruption."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class AudioIn(DataFrame):
    """One 20 ms frame of caller audio: PCM16 LE mono at the endpoint's sample rate."""

    pcm: bytes
    at: float  # time.monotonic() when the conference bridge handed the frame over


@dataclass(frozen=True, slots=True)
class DtmfIn(SystemFrame):
    """A DTMF digit (RFC 4733 telephone-event, or SIP INFO)."""

    digit: str
    duration_ms: int
    at: float


@dataclass(frozen=True, slots=True)
class CallEnded:
    """Last event of a call; the receive iterator stops after it."""

    reason: str
    by_remote: bool
    at: float


InboundEvent = AudioIn | DtmfIn | CallEnded

#: ``CallEnded.reason`` of a call whose 200 OK the caller never ACKed (within 64*T1).
NO_ACK = "no ACK"
#: ``CallEnded.reason`` of a call a BYE named but did not end (pjsip refused it, e.g. for a
#: wrong tag): the BYE had its stream taken out already (``telephony.stream_release``).
BYE_WITHOUT_END = "BYE without end"

#: How long a blind transfer may take to report its outcome (the target may ring a while).
TRANSFER_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class TransferResult:
    """How a blind transfer (REFER) ended, as far as the transferring leg can tell.

    ``ok``: the caller's side reported the target answered (a 2xx in a NOTIFY's sipfrag,
    or a REFER accepted with ``Refer-Sub: false``). Otherwise the REFER was refused, a
    NOTIFY reported a failure, the call ended, or nothing final came in time. ``status`` is
    the SIP status behind the outcome (0 when there was none).
    """

    ok: bool
    status: int
    reason: str
