"""What the caller's pause says, read once: one value for how long the turn waits, and why.

The speculative pass over a pause (``bot.pipeline.speculation``) hears the words so far
(once or twice) and looks them up. ``read_pause`` turns that pass into a ``PauseReading``:
what the words say (``thought``: finished, unfinished, open, hold) and, for words that are
finished or may be, the one reason the turn still waits longer than a finished request
would (``wait``), in order of precedence:

- ``unsure``: neither hearing says the caller finished (no end heard, two different
  sentences heard, or only the second hearing's own words end): ``unsure_silence_ms``;
- ``nowhere``: both heard a finished sentence that nothing answers (only "not sure" would be
  said): ``nowhere_silence_ms``;
- ``question``: a finished sentence the bot would only ask about: ``question_silence_ms``;
- ``acts``: words that would act at once and for good (an intent that hangs up, a yes that
  would transfer or hang up): ``hangup_silence_ms``;
- ``greeting``: words that are only a greeting ("Hello?"), as often the start of a request
  as all of it: ``greeting_silence_ms``;
- ``acknowledgement``: only a yes, no or okay with nothing asked ("Okay."), as often the
  start of a request as all of it: ``acknowledgement_silence_ms``.

Where the words read as a finished sentence and the caller's voice fell to the bottom of its
range on them (``fell``: a finished statement, ``bot.pipeline.language.intonation``), the
``nowhere`` and ``question`` waits shorten to ``fallen_silence_ms``: a caller pausing
mid-sentence holds the pitch up. Two cues together, as listeners take a turn on: the fall
alone does not shorten ``unsure`` (no hearing says the words are finished; "It's order
number | five five two ..." fell 3.5 semitones on "number" in one espeak-ng voice).
They shorten to ``long_sentence_silence_ms`` where each recognizer heard the finished
sentence as at least ``long_sentence_words`` words, or as a whole question of five words or
more (``long``): half a request heard as a finished sentence is short ("Can you help
me?").

The turn detector keeps the reading (not five flags), takes both its silence limit and
whether the turn may end early from it, and puts it on the turn, so the call log's turn
record says why the turn waited as long as it did. A pure function: tested as a table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from bot.pipeline.language.end_of_turn import Thought, count_words, heard_alike, whole_question
from bot.pipeline.language.intonation import Intonation
from bot.pipeline.rehear import other_words
from bot.pipeline.speculation import Speculation
from bot.profile import EndpointingConfig

Wait = Literal["unsure", "nowhere", "question", "acts", "greeting", "acknowledgement"]


@dataclass(frozen=True, slots=True)
class PauseReading:
    """What one finished speculative pass says about the pause it covered."""

    thought: Thought
    #: Why a turn whose words read as finished (or may be) waits longer; None: it need not.
    wait: Wait | None = None
    #: The caller's voice fell to the bottom of its range on the last words
    #: (``EndpointingConfig.fall_semitones``): a nowhere or question wait is
    #: ``fallen_silence_ms`` instead.
    fell: bool = False
    #: Where the voice ended against its median, in semitones (None: not read).
    end_st: float | None = None
    #: The finished sentence was heard as at least ``long_sentence_words`` words by each
    #: recognizer: a nowhere or question wait is ``long_sentence_silence_ms`` instead.
    long: bool = False

    @property
    def may_end_early(self) -> bool:
        """Whether the turn may end before ``end_silence_ms``: words heard as a whole
        request, with nothing to wait for."""
        return self.thought not in ("unfinished", "hold") and self.wait is None

    def silence_limit_ms(self, cfg: EndpointingConfig) -> int:
        """The silence that ends the turn after this reading."""
        if self.thought == "unfinished":
            extra = cfg.unfinished_silence_ms
        elif self.thought == "hold":
            extra = cfg.hold_silence_ms
        elif self.wait is not None:
            extra = _WAIT_MS[self.wait](cfg)
            if self.fell:  # decided in ``read_pause``: a wait it shortens, the setting on
                extra = min(extra, cfg.fallen_silence_ms)
            if self.long:
                extra = min(extra, cfg.long_sentence_silence_ms)
        else:
            extra = 0
        return max(cfg.end_silence_ms, extra)

    def record(self) -> dict[str, object]:
        return {
            "thought": self.thought,
            "wait": self.wait,
            "fell": self.fell,
            "end_st": self.end_st,
            "long": self.long,
        }


_WAIT_MS: dict[Wait, Callable[[EndpointingConfig], int]] = {
    "unsure": lambda c: c.unsure_silence_ms,
    "nowhere": lambda c: c.nowhere_silence_ms,
    "question": lambda c: c.question_silence_ms,
    "acts": lambda c: c.hangup_silence_ms,
    "greeting": lambda c: c.greeting_silence_ms,
    "acknowledgement": lambda c: c.acknowledgement_silence_ms,
}

#: The waits a fallen voice shortens: finished sentences the bot would only ask about or
#: say "not sure" to. Not ``unsure`` (no hearing says the words are finished: the fall
#: would be the only cue), a greeting's (as short already), nor a hang-up's (cannot be
#: taken back).
_FALL_SHORTENS: frozenset[Wait] = frozenset({"nowhere", "question"})

#: A pass that failed: the turn is transcribed again when it ends.
FAILED = PauseReading("open")
#: A pass that heard nothing, twice: more of the words is worth waiting for.
NOTHING_HEARD = PauseReading("unfinished")


def read_pause(
    done: Speculation, thought: Callable[[str], Thought], cfg: EndpointingConfig
) -> PauseReading:
    """The reading of a finished pass (``done``) that heard something, or failed."""
    if done.failed:
        return FAILED
    if not done.heard:
        return NOTHING_HEARD
    verdict = thought(done.heard)
    unsure = nowhere = False
    if verdict in ("finished", "open") and done.second is not None:
        # The second recognizer heard the same pause: where it hears a thought still
        # going, the first one made a sentence of a fragment; where it hears no end either
        # (no final punctuation), or another sentence than the first one heard (the words
        # are a guess), or the only end, in other words, the turn waits a little longer; so
        # it does on a finished sentence that leads nowhere (``Speculation.nowhere``):
        # "not sure" can wait for a caller who was only pausing.
        again = thought(done.second) if done.second else "open"
        if again == "finished" and not heard_alike(done.heard, done.second or ""):
            again = "open"
        if (
            again == "finished"
            and verdict == "open"
            and other_words(done.heard, done.second) is not None
        ):
            # Only the second heard an end, and on words of its own ("That's weak I
            # ordered" and "Last week I ordered.", a caller's "Last week I ordered | a lamp
            # ..."): neither hearing says the caller finished.
            again = "open"
        verdict = again
        unsure = again == "open"
        nowhere = again == "finished" and done.nowhere and cfg.nowhere_silence_ms > 0
    # A finished sentence the bot would only ask about: the question can wait for a caller
    # who was only pausing ("Can you send me" heard as "Can you friend me?").
    asks = verdict == "finished" and done.doubtful and cfg.question_silence_ms > 0
    # An intent that hangs up cannot be taken back, so a caller who was only pausing
    # ("Where can I find" heard as "Bye bye.") may go on; so may a yes that would transfer
    # or hang up ("Okay, okay." after the offer of a colleague, from a caller starting
    # "Right, okay, so | what time ...").
    acts = (done.hangs_up or done.acts_on_reply) and cfg.hangup_silence_ms > 0
    # A greeting opens a request as often as it is all of it ("Hello, | can you hear me?",
    # "Hi, | I'm calling about my order"): its reply, which says nothing the caller waits
    # for, can wait for a caller who goes on.
    greets = done.greets and cfg.greeting_silence_ms > 0
    # So does a bare yes, no or okay with nothing asked ("Okay." after an answer, then
    # another request; "Do you | sell gift cards?" heard as "Yes, yes, yes."), as long as
    # a yes that would act.
    acknowledges = done.acknowledges and cfg.acknowledgement_silence_ms > 0
    wait: Wait | None = None
    if verdict in ("unfinished", "hold"):
        wait = None
    elif unsure:
        wait = "unsure"
    elif nowhere:
        wait = "nowhere"
    elif asks:
        wait = "question"
    elif acts:
        wait = "acts"
    elif greets:
        wait = "greeting"
    elif acknowledges:
        wait = "acknowledgement"
    tone: Intonation | None = done.intonation
    end_st = None if tone is None else round(tone.end_st, 1)
    fell = (
        wait in _FALL_SHORTENS
        and tone is not None
        and cfg.fallen_silence_ms > 0
        and tone.fell(cfg.fall_semitones)
    )
    # A long finished sentence: half a request heard as one is short.
    long = (
        wait in _FALL_SHORTENS
        and cfg.long_sentence_silence_ms > 0
        and (_fewest_words(done) >= cfg.long_sentence_words or _asked_whole(done))
    )
    return PauseReading(verdict, wait, fell=fell, end_st=end_st, long=long)


def _hearings(done: Speculation) -> list[str]:
    """The pause's words as each recognizer that heard them heard them."""
    return [done.heard] if done.second is None else [done.heard, done.second]


def _asked_whole(done: Speculation) -> bool:
    """Each recognizer heard a whole question (``whole_question``)."""
    return all(whole_question(h) for h in _hearings(done))


def _fewest_words(done: Speculation) -> int:
    """The words of the pause as the recognizer that heard fewer of them heard them."""
    return min(count_words(h) for h in _hearings(done))
