"""One caller turn and the times of its stages, the unit every latency figure is about."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from bot.pipeline.deciding.decision import Route

if TYPE_CHECKING:
    from bot.pipeline.deciding.decision import Decision
    from bot.pipeline.pause_reading import PauseReading
    from bot.pipeline.speculation import Speculation

#: Stages of a turn in the order they normally happen.
STAGES = (
    "speech_end",
    "eot_decided",
    "transcript_ready",
    "route_decided",
    "first_token",
    "first_audio_out",
    "response_done",
)

#: Why the turn ended: enough silence, a speculative pass found a whole request, too long.
EotReason = Literal["silence", "early", "max_turn", ""]

_turn_ids = itertools.count(1)


@dataclass
class Turn:
    """A caller's turn: what they said, how the bot answered and when each stage happened.

    Stage times are seconds on the call's clock (``clock``: ``time.monotonic`` in a call,
    the stage that makes the turn hands it ``ctx.clock.now``); the pipeline marks them as
    it goes and the turn log reports them relative to ``speech_end``.
    """

    call_id: str
    index: int = field(default_factory=lambda: next(_turn_ids))
    audio: bytes = b""
    transcript: str = ""
    answer: str = ""
    route: Route = "none"
    #: The cached intent that answered (routes "exact" and "semantic") and its similarity.
    intent: str | None = None
    intent_score: float | None = None
    barged_in: bool = False
    error: str | None = None
    stages: dict[str, float] = field(default_factory=dict)
    eot_reason: EotReason = ""
    #: The caller's pause that a speculative pass covered (``None``: no pass to reuse).
    pause_id: int | None = None
    #: The speculative pass whose transcript (and lookup) this turn used.
    speculation: Speculation | None = None
    #: What that pass said about the pause: how long the turn waited, and why.
    pause_reading: PauseReading | None = None
    #: The knowledge-base answers retrieved for this turn, best first: what a generated
    #: answer may state (with the caller's words).
    knowledge: tuple[str, ...] = ()
    #: What was decided on the turn's words, and why (``bot.pipeline.deciding.decider``).
    decision: Decision | None = None
    #: Clauses of the generated answer that were not spoken, each as "reason: detail".
    refusals: list[str] = field(default_factory=list)
    #: The caller's turn before, when this one went on with it: they started again within
    #: ``continuation_ms`` of its end, over the bot's answer to it. Its words and these are
    #: one request.
    continues: Turn | None = None
    #: When it did: what its own audio said alone (the pause's pass, if one ran), looked up
    #: when the whole request leads nowhere (a second request tacked on over the bot).
    own_words: str = ""
    #: Time spent inside each model call (``asr``, ``llm_first_token``, ``tts_first_chunk``...).
    model_ms: dict[str, float] = field(default_factory=dict)
    #: The call's clock: a stage marked without a time is marked now on it.
    clock: Callable[[], float] = field(default=time.monotonic, repr=False, compare=False)

    def mark(self, stage: str, at: float | None = None) -> None:
        """Record when ``stage`` happened (first mark wins)."""
        self.stages.setdefault(stage, self.clock() if at is None else at)

    def since_speech_end_ms(self) -> dict[str, float]:
        """Each recorded stage in milliseconds after the caller stopped speaking."""
        origin = self.stages.get("speech_end")
        if origin is None:
            return {}
        return {
            name: round((self.stages[name] - origin) * 1000.0, 1)
            for name in STAGES
            if name in self.stages
        }
