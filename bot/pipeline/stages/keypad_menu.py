"""Keypad menus: "press 1 for your order, 2 for returns, 0 for a person"."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from bot.callflow import KEYS, MenuConfig, MenuOption
from bot.intents.choice import KEY_CHOICES
from bot.intents.confirm import KEY_ANSWERS
from bot.pipeline.frames import (
    CallAction,
    DataFrame,
    DtmfIn,
    Frame,
    Interrupt,
    QuestionWaiting,
    ResponseDone,
    SystemFrame,
)
from bot.pipeline.line_state import LineState
from bot.pipeline.processor import Processor
from bot.pipeline.stages.digit_collector import EventSink, Say
from bot.pipeline.turn import Turn
from bot.profile import BotProfile, IntentConfig

if TYPE_CHECKING:
    from bot.pipeline.context import CallContext

log = logging.getLogger(__name__)

#: Starts a collector of the profile by name (``DigitCollector.begin``).
BeginCollect = Callable[[str], Awaitable[None]]


class KeypadMenu(Processor):
    """Carries out the menu option of each key the caller presses.

    The first menu is the main one, live from the start of the call; keys reach it only
    while no number is being collected (the ``DigitCollector`` before it takes those). An
    option says its words, plays an intent's answer (and carries out the intent's action),
    speaks a knowledge entry, transfers the caller, starts a collector or opens another
    menu; then the caller is back in the main menu. A key the menu does not know is
    answered with ``invalid`` and the prompt; a malformed event is ignored and counted.
    A key pressed while the bot speaks cuts it off.
    """

    name = "keypad-menu"

    def __init__(
        self,
        call_id: str,
        menus: Sequence[MenuConfig],
        *,
        intents: Mapping[str, IntentConfig],
        knowledge: Mapping[str, str],
        say: Say,
        line: LineState | None = None,
        begin_collect: BeginCollect | None = None,
        on_event: EventSink | None = None,
        confirming: Callable[[], bool] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self._call_id = call_id
        #: The call's clock: when a key's turn was decided.
        self._clock = clock
        self._menus = {m.name: m for m in menus}
        self._main = menus[0] if menus else None
        self._current = self._main
        self._intents = intents
        self._knowledge = knowledge
        self._say = say
        #: How a number is asked for (default: upstream, to the digit collector).
        self._begin_collect = begin_collect if begin_collect is not None else self.ask_for_number
        #: Whether the bot has the line, as the stages after this one tell (``LineHeld``).
        self.line: LineState = line if line is not None else LineState()
        self._on_event = on_event
        #: Whether the router's question waits for its answer: asked of ``confirming``
        #: when given, else as the router last said (``QuestionWaiting``, upstream).
        self._confirming = confirming if confirming is not None else self._question_waits
        self._question_waiting = False
        #: Events that were no keypad key at all (out of range, malformed).
        self.malformed_keys = 0

    @classmethod
    def build(cls, ctx: CallContext) -> KeypadMenu:
        profile = ctx.profile
        return cls(
            ctx.call_id,
            profile.menus,
            intents={i.name: i for i in profile.intents},
            knowledge={k.topic: k.answer for k in profile.knowledge},
            say=ctx.say,
            on_event=ctx.event,
            clock=ctx.clock.now,
        )

    @classmethod
    def phrases(cls, profile: BotProfile) -> list[str]:
        """Prompts, the invalid-key phrase, and what the options say (an intent's answer
        too): a key press is then answered as fast as a cached intent."""
        intents = {i.name: i.answer for i in profile.intents}
        out: list[str] = []
        for menu in profile.menus:
            out += [menu.prompt, menu.invalid]
            for opt in menu.options:
                out += [opt.say] if opt.say else []
                out += [intents[opt.intent]] if opt.intent else []
        return out

    def _question_waits(self) -> bool:
        return self._question_waiting

    async def process_upstream(self, frame: Frame) -> None:
        if isinstance(frame, QuestionWaiting):
            # A key while the router's question waits answers it (1 yes / the first, 2 no /
            # the second).
            self._question_waiting = frame.waiting
            return
        await super().process_upstream(frame)

    async def process_system(self, frame: SystemFrame) -> None:
        if isinstance(frame, DtmfIn):
            await self._key(frame)
            return
        await super().process_system(frame)

    async def _key(self, frame: DtmfIn) -> None:
        if len(frame.digit) != 1 or frame.digit not in KEYS:
            self.malformed_keys += 1
            self._event("dtmf_ignored", "not a keypad key")
            return
        answers = frame.digit in KEY_ANSWERS or frame.digit in KEY_CHOICES
        if self._confirming is not None and self._confirming() and answers:
            # The answer to the question just asked (1 yes, 2 no; or 1 the first, 2 the
            # second of a two-choice question), not a menu option: the Router after this
            # takes it.
            if self.line.held:
                await self.push(Interrupt(at=frame.at))
            self._event("confirm_key", frame.digit)
            await self.push(frame)
            return
        menu = self._current
        if menu is None:
            return  # no menus: keys are only recorded
        if self.line.held:
            await self.push(Interrupt(at=frame.at))
        option = menu.option(frame.digit)
        if option is None:
            self._event("menu_invalid", f"{menu.name}: {frame.digit}")
            await self.push(self._say(None, menu.invalid))
            await self.push(self._say(None, menu.prompt))
            return
        self._event("menu", f"{menu.name}: {frame.digit}")
        self._current = self._main
        await self._carry_out(option, frame.at)

    async def _carry_out(self, option: MenuOption, at: float) -> None:
        turn = Turn(call_id=self._call_id, route="keypad", clock=self._clock)
        turn.mark("speech_end", at)
        turn.mark("eot_decided", at)
        turn.mark("route_decided")
        said: list[DataFrame] = []
        if option.say is not None:
            said.append(self._say(turn, option.say))
        action: CallAction | None = None
        if option.intent is not None:
            intent = self._intents[option.intent]
            turn.intent = intent.name
            said.append(self._say(turn, intent.answer))
            if intent.action == "hangup":
                action = CallAction(turn=turn, action="hangup")
            elif intent.action == "transfer" and intent.transfer_to is not None:
                action = CallAction(turn=turn, action="transfer", target=intent.transfer_to)
        elif option.knowledge is not None:
            turn.intent = option.knowledge
            said.append(self._say(turn, self._knowledge[option.knowledge]))
        elif option.transfer_to is not None:
            action = CallAction(turn=turn, action="transfer", target=option.transfer_to)
        elif option.menu is not None:
            self._current = self._menus[option.menu]
            said.append(self._say(turn, self._current.prompt))
        turn.answer = " ".join(getattr(f, "text", "") for f in said).strip()
        for frame in said:
            await self.push(frame)
        await self.push(ResponseDone(turn=turn))
        if action is not None:
            await self.push(action)
        if option.collect is not None:
            await self._begin_collect(option.collect)

    def _event(self, kind: str, detail: str) -> None:
        log.info("call %s: %s (%s)", self._call_id, kind, detail)
        if self._on_event is not None:
            self._on_event(kind, detail)
