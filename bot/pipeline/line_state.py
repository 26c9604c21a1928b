"""Whether the bot has the line, as the stages after one have told it."""

from __future__ import annotations

from bot.pipeline.frames import LineHeld


class LineState:
    """Who has the line, folded from the ``LineHeld`` frames that come upstream: the bot
    has it (``held``) while any stage that told it holds it, whether speaking, answering, or
    keeping the caller on hold. The stages that wait while the bot talks keep one (the turn
    detector's barge-in, the digit collector's and the keypad menu's type-ahead and
    timeouts, the call timer's quiet) instead of asking the stages after them."""

    def __init__(self) -> None:
        self._holders: set[str] = set()

    @property
    def held(self) -> bool:
        """True while some stage has the line: the call is not quiet."""
        return bool(self._holders)

    def tell(self, frame: LineHeld) -> None:
        """Keep what ``frame`` says of its stage."""
        if frame.held:
            self._holders.add(frame.by)
        else:
            self._holders.discard(frame.by)
