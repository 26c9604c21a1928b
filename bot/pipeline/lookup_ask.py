"""Asks for a lookup's number when the caller's request is what the lookup is for.

A request no intent answered goes to the language model, which has no access to the
operator's systems: asked "has my parcel left the warehouse?", it could only guess. A
lookup may declare its ``purpose`` (phrases such as "parcel left", "order status"); a
request to the model that holds every word of one of them is taken from the model, and
the collector that feeds that lookup asks for the number instead. The lookup then answers
from the service, as it does after a key or an intent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from bot.callflow import CollectorConfig, LookupConfig
from bot.intents.match import normalize
from bot.pipeline.frames import DataFrame, ResponseDone, Transcript
from bot.pipeline.keypad_menu import BeginCollect
from bot.pipeline.processor import Processor

if TYPE_CHECKING:
    from bot.pipeline.context import CallContext

log = logging.getLogger(__name__)

EventSink = Callable[[str, str], None]


def purpose_of(text: str, purposes: Sequence[tuple[str, str]]) -> tuple[str, str] | None:
    """The first ``(lookup, phrase)`` whose phrase's words are all in ``text``, if any."""
    words = set(normalize(text).split())
    for lookup, phrase in purposes:
        needed = normalize(phrase).split()
        if needed and all(w in words for w in needed):
            return lookup, phrase
    return None


class LookupAsk(Processor):
    """Before the model: a request matching a lookup's ``purpose`` starts its collector.

    The turn is logged with route ``ask`` (its answer: the collector's prompt) and a
    ``lookup_asked`` call event (``order_status: "parcel left"``); the model is not asked.
    """

    name = "lookup-ask"

    def __init__(
        self,
        lookups: Sequence[LookupConfig],
        collectors: Sequence[CollectorConfig],
        begin: BeginCollect | None = None,
        on_event: EventSink | None = None,
    ) -> None:
        super().__init__()
        feeding = {c.lookup: c for c in collectors if c.lookup is not None}
        self._collector = {lk.name: feeding[lk.name] for lk in lookups if lk.purpose}
        self._purposes = [(lk.name, p) for lk in lookups for p in lk.purpose]
        #: How a number is asked for (default: upstream, to the digit collector).
        self._begin = begin if begin is not None else self.ask_for_number
        self._on_event = on_event

    @classmethod
    def build(cls, ctx: CallContext) -> LookupAsk | None:
        profile = ctx.profile
        if not any(lk.purpose for lk in profile.lookups):
            return None  # no lookup says what it is for: the model gets every request
        return cls(profile.lookups, profile.collectors, on_event=ctx.event)

    async def process(self, frame: DataFrame) -> None:
        if not isinstance(frame, Transcript):
            await self.push(frame)
            return
        found = purpose_of(frame.text, self._purposes)
        if found is None:
            await self.push(frame)
            return
        lookup, phrase = found
        collector = self._collector[lookup]
        turn = frame.turn
        turn.route = "ask"
        turn.intent = lookup
        turn.answer = collector.prompt
        turn.mark("route_decided")
        log.info(
            "call %s: request for lookup %s, asking for %s", turn.call_id, lookup, collector.name
        )
        if self._on_event is not None:
            self._on_event("lookup_asked", f'{lookup}: "{phrase}"')
        await self.push(ResponseDone(turn=turn))
        await self._begin(collector.name)
