"""Collects a number the caller keys in or says: an order number, an account, a PIN."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from bot.callflow import CollectorConfig
from bot.pipeline.clock import MONOTONIC, Clock
from bot.pipeline.frames import (
    CallFinished,
    Collected,
    Collecting,
    CollectNumber,
    DataFrame,
    DtmfIn,
    Frame,
    Interrupt,
    ResponseDone,
    SystemFrame,
    Transcript,
    UserStartedSpeaking,
    UserStoppedSpeaking,
)
from bot.pipeline.language.spoken_digits import digits_and_others, spoken_digits
from bot.pipeline.line_state import LineState
from bot.pipeline.processor import Processor
from bot.pipeline.turn import Turn
from bot.tasks import cancel_and_wait

if TYPE_CHECKING:
    from bot.pipeline.context import CallContext
    from bot.profile import BotProfile

log = logging.getLogger(__name__)

#: What a sensitive number's digits become wherever they would be written.
MASK = "[masked]"

#: Makes the frame that says ``text`` for ``turn`` (ready audio when there is some).
Say = Callable[[Turn | None, str], DataFrame]
#: Told of what the collector did: the event's kind and detail (a key the caller pressed,
#: masked while a sensitive number is collected; never a collected number's digits).
EventSink = Callable[[str, str], None]

_POLL_S = 0.1


class DigitCollector(Processor):
    """Takes the caller's keys (``DtmfIn``) or spoken digits while a number is asked for.

    ``begin`` starts a collector of the profile: its prompt is said, then each key is
    taken until ``max_length`` digits or the ``terminator``; a turn whose words hold digits
    ("one two three four", "1234") gives the whole number at once. A key pressed while the
    bot speaks cuts it off (type-ahead). ``timeout_s`` of quiet after the prompt (neither
    the bot nor the caller speaking: a number read out slowly, and the wait for its turn's
    end, are not quiet), or a number of the wrong length, is re-prompted, up to
    ``attempts`` times, then ``give_up`` is said. Words that hold no digit, or a short
    digit run among more other words ("the parcel 1 left"), end the collection and go on
    to be answered as usual.

    The complete number goes on as one ``Collected`` frame (for a lookup), followed by a
    ``ResponseDone`` when there is no lookup to answer it. A sensitive number's spoken
    words are masked in the turn before anything else can keep them. While no number is
    asked for, every frame passes on untouched.

    Time is read from ``clock`` and waited with ``sleep`` (the monotonic clock and
    ``asyncio.sleep`` in a call), so that a test can run the timeout on a clock it advances
    itself.
    """

    name = "digit-collector"

    def __init__(
        self,
        call_id: str,
        collectors: Sequence[CollectorConfig],
        *,
        say: Say,
        line: LineState | None = None,
        on_event: EventSink | None = None,
        clock: Clock = MONOTONIC,
    ) -> None:
        super().__init__()
        self._call_id = call_id
        #: The call's clock: the last key or activity, and the waits between checks.
        self._clock = clock
        self._collectors = {c.name: c for c in collectors}
        self._say = say
        #: Whether the bot has the line, as the stages after this one tell (``LineHeld``).
        self.line: LineState = line if line is not None else LineState()
        self._on_event = on_event
        self._active: CollectorConfig | None = None
        self._digits: list[str] = []
        self._attempt = 0
        #: When the caller last keyed or stopped speaking: the quiet is counted from it.
        self._last_activity = 0.0
        #: True from the caller's first word to the end of their turn: not quiet.
        self._caller_speaking = False
        self._watch: asyncio.Task[None] | None = None
        #: Keys that are neither digits nor the terminator while collecting.
        self.ignored_keys = 0

    @classmethod
    def build(cls, ctx: CallContext) -> DigitCollector:
        return cls(
            ctx.call_id,
            ctx.profile.collectors,
            say=ctx.say,
            on_event=ctx.event,
            clock=ctx.clock,
        )

    @classmethod
    def phrases(cls, profile: BotProfile) -> list[str]:
        return [t for c in profile.collectors for t in (c.prompt, c.reprompt, c.give_up)]

    @property
    def collecting(self) -> str | None:
        """The collector under way, or None."""
        return None if self._active is None else self._active.name

    @property
    def masking(self) -> bool:
        """True while what the caller keys or says is a sensitive number."""
        return self._active is not None and self._active.sensitive

    async def begin(self, name: str) -> None:
        """Ask for the number of collector ``name`` (replacing one under way)."""
        cfg = self._collectors[name]
        self._stop_watch()
        self._active, self._digits, self._attempt = cfg, [], 1
        await self.push_upstream(Collecting(name))
        self._event("collect_started", name)
        await self.push(self._say(None, cfg.prompt))
        self._start_watch()

    async def process_upstream(self, frame: Frame) -> None:
        """A later stage asks for a number (``CollectNumber``): asked here."""
        if isinstance(frame, CollectNumber):
            await self.begin(frame.name)
            return
        await super().process_upstream(frame)

    async def process_system(self, frame: SystemFrame) -> None:
        if isinstance(frame, DtmfIn):
            # Every key the conversation gets is a call event here, where it is known
            # whether it is part of a sensitive number (a PIN, a card): masked then, and
            # the digit itself only at DEBUG in the log.
            digit = MASK if self.masking else frame.digit
            log.info("call %s: dtmf received", self._call_id)
            log.debug("call %s: dtmf %s", self._call_id, digit)
            if self._on_event is not None:
                self._on_event("dtmf", digit)
            if self._active is not None:
                await self._key(self._active, frame)
                return
        if isinstance(frame, UserStartedSpeaking):
            self._caller_speaking = True
        elif isinstance(frame, UserStoppedSpeaking):
            # Their words (a number read out) come next, after the turn's end: its
            # transcript, or nothing when it held no words; the quiet starts now.
            self._caller_speaking = False
            self._last_activity = self._clock.now()
        if isinstance(frame, CallFinished):
            self._stop_watch()
        await super().process_system(frame)

    async def process(self, frame: DataFrame) -> None:
        cfg = self._active
        if cfg is None or not isinstance(frame, Transcript):
            await self.push(frame)
            return
        digits = spoken_digits(frame.text)
        if digits is not None and len(digits) < cfg.min_length:
            said, others = digits_and_others(frame.text)
            if others >= 2 and others > said:
                digits = None  # a short digit run inside a request: "the parcel 1 left"
        if digits is None:
            # Not a number: the caller moved on; their words are answered as usual.
            await self._finish()
            self._event("collect_abandoned", cfg.name)
            await self.push(frame)
            return
        if cfg.sensitive:
            frame.turn.transcript = MASK  # the turn log, the call log and the model's history
        self._last_activity = self._clock.now()
        if cfg.min_length <= len(digits) <= cfg.max_length:
            await self._complete(cfg, frame.turn, digits)
        else:
            await self._retry(cfg, frame.turn)

    async def _key(self, cfg: CollectorConfig, frame: DtmfIn) -> None:
        if self.line.held:
            await self.push(Interrupt(at=frame.at))  # the caller knows the number already
        self._last_activity = self._clock.now()
        if frame.digit == cfg.terminator:
            if len(self._digits) >= cfg.min_length:
                await self._complete(cfg, self._keyed_turn(frame.at), "".join(self._digits))
            else:
                await self._retry(cfg, None)
        elif frame.digit.isdigit() and len(frame.digit) == 1:
            self._digits.append(frame.digit)
            if len(self._digits) >= cfg.max_length:
                await self._complete(cfg, self._keyed_turn(frame.at), "".join(self._digits))
        else:
            self.ignored_keys += 1
            self._event("dtmf_ignored", "key outside the number")

    def _keyed_turn(self, at: float) -> Turn:
        turn = Turn(call_id=self._call_id, route="keypad", clock=self._clock.now)
        turn.mark("speech_end", at)
        turn.mark("eot_decided", at)
        return turn

    async def _complete(self, cfg: CollectorConfig, turn: Turn, value: str) -> None:
        await self._finish()
        self._event("collected", f"{cfg.name}: {len(value)} digits")
        turn.route = "keypad"
        turn.intent = cfg.name
        turn.mark("route_decided")
        if cfg.confirm is not None:
            text = cfg.confirm.format(value=" ".join(value))
            turn.answer = text
            await self.push(self._say(turn, text))
        await self.push(
            Collected(
                turn=turn,
                collector=cfg.name,
                value=value,
                sensitive=cfg.sensitive,
                lookup=cfg.lookup,
                param=cfg.lookup_param,
            )
        )
        if cfg.lookup is None:
            await self.push(ResponseDone(turn=turn))

    async def _retry(self, cfg: CollectorConfig, turn: Turn | None) -> None:
        """The number was not usable (too short, too long, nothing in time): ask again."""
        self._digits = []
        self._attempt += 1
        if self._attempt > cfg.attempts:
            await self._finish()
            self._event("collect_failed", cfg.name)
            await self.push(self._say(turn, cfg.give_up))
        else:
            self._event("collect_retry", f"{cfg.name}: attempt {self._attempt}")
            await self.push(self._say(turn, cfg.reprompt))
            await self.push(self._say(turn, cfg.prompt))
            self._last_activity = self._clock.now()
        if turn is not None:
            turn.route = "keypad"
            turn.mark("route_decided")
            await self.push(ResponseDone(turn=turn))

    async def _finish(self) -> None:
        self._active, self._digits = None, []
        self._stop_watch()
        await self.push_upstream(Collecting(None))

    def _event(self, kind: str, detail: str) -> None:
        log.info("call %s: %s (%s)", self._call_id, kind, detail)
        if self._on_event is not None:
            self._on_event(kind, detail)

    # -- the timeout: quiet for timeout_s once the bot has stopped talking, neither -----
    # -- party speaking nor a key pressed ----------------------------------------------

    def _start_watch(self) -> None:
        self._last_activity = self._clock.now()
        self._watch = asyncio.create_task(self._watch_quiet(), name="digit-timeout")

    def _stop_watch(self) -> None:
        task, self._watch = self._watch, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    async def stop(self) -> None:
        task, self._watch = self._watch, None
        await cancel_and_wait(task)
        await super().stop()

    async def _watch_quiet(self) -> None:
        quiet_since: float | None = None
        while self._active is not None:
            await self._clock.sleep(_POLL_S)
            now = self._clock.now()
            if self.line.held or self._caller_speaking:
                quiet_since = None
                continue
            quiet_since = quiet_since or now
            cfg = self._active
            if cfg is None or now - max(quiet_since, self._last_activity) < cfg.timeout_s:
                continue
            quiet_since = None
            if len(self._digits) >= cfg.min_length:
                at = self._last_activity
                await self._complete(cfg, self._keyed_turn(at), "".join(self._digits))
            else:
                await self._retry(cfg, None)
