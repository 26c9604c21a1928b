"""``Lobby``: what a caller beyond the node's conversation capacity hears while in line.

A caller the ``CallQueue`` puts in line hears the welcome with their position, then hold
audio, and every ``update_every_s`` their position again; the moment a slot frees the hold
audio stops and the conversation starts (the node runs the call session). After
``max_wait_s`` the caller is transferred to the overflow target, or hears the apology and
is hung up; a caller who finds the line full goes to the overflow target too, or hears the
busy message. A caller who hangs up leaves the line. When the node stops (``close``: the
drain's limit, a second SIGTERM), every caller still in line is dismissed the same way:
the overflow target, or the apology and a hang-up. Every step is a call-log event
(``queued``, ``dequeued``, ``queue_timeout``, ``queue_abandoned``, ``queue_full``,
``queue_transfer``, ``queue_closed``) and a wait time for the node's metrics.

The lobby's time and its waits (the wait in line, the updates, the longest wait, the hold
audio's pace, a message's playout, ``close``'s limit) are on the ``Clock`` it is given
(``bot.pipeline.clock``; ``MONOTONIC`` in production), the same clock as its queue's
(``CallQueue(clock=clock.now)``), so that a test can move it instead of waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from bot.callflow import TransferTarget
from bot.pipeline.call_port import CallPort
from bot.pipeline.clock import MONOTONIC, Clock, wait_for
from bot.pipeline.prompts import PromptAudio
from bot.queue.hold import hold_pattern
from bot.queue.line import CallQueue, Ticket
from bot.queue.settings import QueueSettings
from bot.tasks import cancel_and_wait
from serve import TTS
from telephony.events import CallEnded

log = logging.getLogger(__name__)

Outcome = Literal["at_once", "dequeued", "abandoned", "timeout", "transferred", "full", "closed"]
#: Hold audio kept queued ahead of the playout (20 ms frames): enough to ride out a busy
#: event loop, little enough that a message or the greeting cuts in at once.
AHEAD_FRAMES = 25
FEED_EVERY_S = 0.1
#: How long a phrase may take to synthesize before the caller hears hold audio instead.
SYNTH_TIMEOUT_S = 5.0
#: Beyond a goodbye's own length, how long to wait for it to play out before hanging up.
PLAYOUT_GRACE_S = 3.0
#: Positions whose welcome and update are synthesized at the node's start.
PREPARED_POSITIONS = 5
#: How long the overflow transfer may take to be answered (REFER's NOTIFY, or the bridge).
OVERFLOW_TIMEOUT_S = 30.0
#: At the node's stop, the longest ``close`` waits for the callers in line to be dismissed.
CLOSE_MAX_S = 15.0


@dataclass(frozen=True)
class Admission:
    """How a call left the lobby: with a slot (``ticket``), or ended here."""

    outcome: Outcome
    ticket: Ticket | None
    waited_s: float = 0.0


WaitSink = Callable[[str, float], None]
#: Where a caller may be transferred, and how (``configured_targets``); None: refused.
TargetLookup = Callable[[str], TransferTarget | None]


class QueueLog(Protocol):
    """What the lobby writes to the call log (``bot.calllog.CallLog`` has it)."""

    def call_answered(
        self,
        call_id: str,
        *,
        caller: str,
        callee: str,
        answered_at: float | None = None,
        arrived_at: float | None = None,
        recording: str | None = None,
    ) -> None: ...

    def event(
        self, call_id: str, kind: str, detail: str | None = None, at: float | None = None
    ) -> None: ...

    def call_ended(self, call_id: str, reason: str, at: float | None = None) -> None: ...


class Lobby:
    """Admits calls to the conversation slots of one node, holding the rest in line."""

    def __init__(
        self,
        queue: CallQueue,
        settings: QueueSettings,
        prompts: PromptAudio,
        tts: TTS,
        *,
        call_log: QueueLog | None = None,
        on_wait: WaitSink | None = None,
        targets: TargetLookup | None = None,
        transfer_timeout_s: float = OVERFLOW_TIMEOUT_S,
        clock: Clock = MONOTONIC,
    ) -> None:
        """``on_wait(outcome, seconds)``: each queued caller's wait, as it ends.
        ``targets``: how the overflow target is reached (its mode), and whether it may be
        at all; unset: a REFER to it. ``clock``: the lobby's time and waits, the one
        ``queue`` reads its time from (``clock.now``)."""
        self.queue = queue
        self.settings = settings
        self._prompts = prompts
        self._tts = tts
        self._call_log = call_log
        self._on_wait = on_wait
        self._targets = targets
        self._transfer_timeout_s = transfer_timeout_s
        self._clock = clock
        self._rate = prompts.sample_rate
        self.hold = hold_pattern(self._rate, settings.hold_level_db)
        #: Set by ``close``: the callers in line are dismissed.
        self._closing = asyncio.Event()
        #: Callers in the lobby now (in line, or being dismissed: a message, a transfer).
        self._here = 0
        self._empty = asyncio.Event()
        self._empty.set()

    @property
    def closing(self) -> bool:
        return self._closing.is_set()

    async def close(self, max_s: float = CLOSE_MAX_S) -> int:
        """The node stops: no caller in line gets a slot any more; each is sent to the
        overflow target or hears the apology and is hung up. Returns once all are gone
        (``max_s`` at most) with how many were still in the lobby at the call."""
        self.queue.close()
        self._closing.set()
        here = self._here
        if here:
            log.info("closing the call queue: dismissing %d callers in line", here)
            with contextlib.suppress(TimeoutError):
                await wait_for(self._clock, self._empty.wait(), max_s)
        return here

    async def prepare(self) -> None:
        """Synthesize the fixed messages ahead of any call."""
        s = self.settings
        texts = [s.timeout, s.full] + ([s.overflow] if s.overflow_target else [])
        for n in range(1, min(s.max_waiting, PREPARED_POSITIONS) + 1):
            texts += [s.welcome.format(position=n), s.update.format(position=n)]
        for text in texts:
            await self._prompts.add(self._tts, text)

    async def admit(self, call: CallPort, *, recording: str | None = None) -> Admission:
        """A slot for ``call`` (release it with ``release`` when the call ends), at once or
        after a wait in line; or the call ended here (timeout, transfer, full, hang-up).

        ``recording``: the file the call is recorded in, for its call-log row.
        """
        ticket = self.queue.enter(call.call_id)
        if ticket is not None and ticket.state == "active":
            return Admission("at_once", ticket)
        self._answered(call, recording)
        self._here += 1
        self._empty.clear()
        try:
            if ticket is None:
                return await self._full(call)
            return await self._wait_in_line(call, ticket)
        finally:
            self._here -= 1
            if not self._here:
                self._empty.set()

    async def _full(self, call: CallPort) -> Admission:
        """No place in line: the overflow target, or the busy message and a hang-up."""
        self._event(call, "queue_full", f"{self.queue.waiting} waiting")
        target = self.settings.overflow_target
        if target is not None and await self._overflow(call, target):
            self._event(call, "queue_transfer", "line full")
            self._ended(call, "transferred")
            self._waited("transferred", 0.0)
            return Admission("transferred", None)
        log.warning("call %s: the call queue is full; busy message", call.call_id)
        await self._goodbye(call, self.settings.full)
        self._ended(call, "queue_full")
        self._waited("full", 0.0)
        return Admission("full", None)

    def release(self, ticket: Ticket) -> None:
        """The conversation is over: its slot goes to the next caller in line."""
        self.queue.leave(ticket)

    async def _wait_in_line(self, call: CallPort, ticket: Ticket) -> Admission:
        s = self.settings
        position = self.queue.position(ticket)
        self._event(call, "queued", f"position {position}")
        log.info("call %s: queued at position %d", call.call_id, position)
        hung_up = asyncio.Event()
        ended_reason: list[str] = []
        reader = asyncio.create_task(self._watch(call, hung_up, ended_reason))
        player = asyncio.create_task(self._play(call, s.welcome.format(position=position)))
        granted = asyncio.ensure_future(self.queue.wait(ticket))
        gone = asyncio.ensure_future(hung_up.wait())
        closing = asyncio.ensure_future(self._closing.wait())
        deadline = ticket.arrived_at + s.max_wait_s
        next_update = self._clock.now() + s.update_every_s
        try:
            while True:
                now = self._clock.now()
                waiting = ticket.state != "active" and not hung_up.is_set()
                if waiting and (now >= deadline or self._closing.is_set()):
                    break
                # Until a slot, a hang-up or the stop, or the next update or the deadline.
                timer = asyncio.ensure_future(
                    self._clock.sleep(max(0.0, min(next_update, deadline) - now))
                )
                try:
                    await asyncio.wait(
                        {granted, gone, closing, timer}, return_when=asyncio.FIRST_COMPLETED
                    )
                finally:
                    timer.cancel()
                now = self._clock.now()
                waited = now - ticket.arrived_at
                if hung_up.is_set():
                    self.queue.leave(ticket)  # out of line, or the slot just given back
                    reason = ended_reason[0] if ended_reason else "caller_hangup"
                    self._event(call, "queue_abandoned", f"waited {waited:.1f} s")
                    log.info("call %s: left the queue after %.1f s", call.call_id, waited)
                    self._ended(call, reason)
                    self._waited("abandoned", waited)
                    return Admission("abandoned", None, waited)
                if ticket.state == "active":
                    player.cancel()
                    call.clear_playout()
                    self._event(call, "dequeued", f"waited {waited:.1f} s")
                    log.info("call %s: dequeued after %.1f s", call.call_id, waited)
                    self._waited("dequeued", waited)
                    return Admission("dequeued", ticket, waited)
                if next_update <= now < deadline:
                    next_update += s.update_every_s
                    await cancel_and_wait(player)
                    call.clear_playout()
                    text = s.update.format(position=self.queue.position(ticket))
                    player = asyncio.create_task(self._play(call, text))
        finally:
            await cancel_and_wait(granted, gone, closing, player, reader)
        # Waited the longest allowed, or the node stops: the overflow target, or an apology
        # and a hang-up.
        self.queue.leave(ticket)
        waited = self._clock.now() - ticket.arrived_at
        stopping = self._closing.is_set() and waited < s.max_wait_s
        why = f"node stopping, waited {waited:.1f} s" if stopping else f"waited {waited:.1f} s"
        call.clear_playout()
        if s.overflow_target is not None and await self._overflow(call, s.overflow_target):
            self._event(call, "queue_transfer", why)
            self._ended(call, "transferred")
            self._waited("transferred", waited)
            return Admission("transferred", None, waited)
        outcome: Outcome = "closed" if stopping else "timeout"
        kind = f"queue_{outcome}"
        self._event(call, kind, why)
        log.info("call %s: %s after %.1f s in line", call.call_id, kind, waited)
        await self._goodbye(call, s.timeout)
        self._ended(call, kind)
        self._waited(outcome, waited)
        return Admission(outcome, None, waited)

    def _target(self, uri: str) -> TransferTarget | None:
        return TransferTarget(uri=uri) if self._targets is None else self._targets(uri)

    async def _overflow(self, call: CallPort, target: str) -> bool:
        """Put the caller through to ``target`` in its mode (hold audio meanwhile): a REFER
        (the bot's leg ends), or a bridge (the leg stays up until either side hangs up;
        this returns then). True when it took; a refused or failed one is a call event."""
        spec = self._target(target)
        if spec is None:
            log.warning("call %s: overflow target not configured, refused", call.call_id)
            self._event(call, "transfer_refused", target)
            return False
        self._event(call, "transfer", target)
        # The words to their end first (a bridge may be answered within a second), then
        # hold audio until the transfer's outcome.
        await self._say(call, self.settings.overflow)
        player = asyncio.create_task(self._play(call, None))
        try:
            if spec.mode == "refer":
                result = await call.transfer(target, timeout_s=self._transfer_timeout_s)
                if result.ok:
                    log.info("call %s: transferred to the overflow target", call.call_id)
                    await call.hangup()
                    return True
                if not spec.bridge_on_refer_failure or result.reason == "call ended":
                    return self._failed(call, result.status, result.reason)
                self._event(call, "transfer_failed", f"{result.status} {result.reason}; bridging")
            result = await call.bridge(target, timeout_s=self._transfer_timeout_s)
        finally:
            await cancel_and_wait(player)
        if not result.ok:
            return self._failed(call, result.status, result.reason)
        call.clear_playout()  # the hold audio still queued: the agent takes over
        log.info("call %s: bridged to the overflow target", call.call_id)
        self._event(call, "bridged", f"bridge {target}")
        reason = "caller hung up"
        async for event in call.receive():  # the caller is with the agent until one hangs up
            if isinstance(event, CallEnded):
                reason = event.reason
                break
        who = "agent" if reason == "agent hung up" else "caller"
        self._event(call, "bridge_ended", f"{who} hung up")
        return True

    def _failed(self, call: CallPort, status: int, reason: str) -> bool:
        log.warning("call %s: overflow transfer failed: %d %s", call.call_id, status, reason)
        self._event(call, "transfer_failed", f"{status} {reason}")
        call.clear_playout()
        return False

    async def _phrase(self, text: str) -> bytes | None:
        """``text``'s audio (synthesized once); None when the TTS fails or is too slow."""
        found = self._prompts.find(text)
        if found is not None:
            return found
        try:  # in real time, not on the clock: it bounds the TTS's own work
            return await asyncio.wait_for(self._prompts.add(self._tts, text), SYNTH_TIMEOUT_S)
        except Exception as exc:  # the caller hears hold audio instead of the message
            log.warning("queue message not synthesized (%s): %r", exc, text[:60])
            return None

    async def _play(self, call: CallPort, text: str | None) -> None:
        """Say ``text`` (if any), then hold audio in a loop, kept ``AHEAD_FRAMES`` ahead."""
        pcm = None if text is None else await self._phrase(text)
        if pcm:
            call.send(pcm)
        piece = self._rate // 50 * 2 * AHEAD_FRAMES  # bytes in AHEAD_FRAMES frames
        at = 0
        while True:
            if call.queued_frames < AHEAD_FRAMES:
                chunk = self.hold[at : at + piece]
                if len(chunk) < piece:
                    chunk += self.hold[: piece - len(chunk)]
                at = (at + piece) % len(self.hold)
                call.send(chunk)
            await self._clock.sleep(FEED_EVERY_S)

    async def _say(self, call: CallPort, text: str) -> None:
        """Say ``text`` and return once it has played out (bounded by its length)."""
        pcm = await self._phrase(text)
        if pcm:
            call.send(pcm)
            seconds = len(pcm) / 2 / self._rate
            with contextlib.suppress(TimeoutError):
                await wait_for(self._clock, call.wait_playout_drained(), seconds + PLAYOUT_GRACE_S)

    async def _goodbye(self, call: CallPort, text: str) -> None:
        """Say ``text`` to its end (bounded), then hang up."""
        await self._say(call, text)
        await call.hangup()

    @staticmethod
    async def _watch(call: CallPort, hung_up: asyncio.Event, reason: list[str]) -> None:
        """Read the caller's side while they wait: their audio is dropped, a hang-up noted."""
        async for event in call.receive():
            if isinstance(event, CallEnded):
                reason.append(event.reason)
                hung_up.set()
                return

    def _answered(self, call: CallPort, recording: str | None) -> None:
        if self._call_log is not None:
            self._call_log.call_answered(
                call.call_id,
                caller=call.remote_uri,
                callee=call.local_uri,
                answered_at=call.answered_at,
                recording=recording,
            )

    def _event(self, call: CallPort, kind: str, detail: str) -> None:
        if self._call_log is not None:
            self._call_log.event(call.call_id, kind, detail, self._clock.now())

    def _ended(self, call: CallPort, reason: str) -> None:
        if self._call_log is not None:
            self._call_log.call_ended(call.call_id, reason, self._clock.now())

    def _waited(self, outcome: str, seconds: float) -> None:
        if self._on_wait is not None:
            self._on_wait(outcome, seconds)
