"""A call's hearing path in-process, on a recorded caller: the VAD and the turn detector
frame by frame, the pause's speculative pass, and the transcriber at the end of each turn,
with the bot "answering" from each turn's end (so a caller who goes on is heard together
with the turn before, as on a call). No intent cache and no second recognizer: the words
the first recognizer gives each turn.

The pause's passes run as if the model were instant (each is awaited before the next
frame), so what is heard does not depend on the machine's load.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bot.pipeline.frames import AudioIn, EndOfTurn, Interrupt, LineHeld, Transcript
from bot.pipeline.line_state import LineState
from bot.pipeline.processor import Collector
from bot.pipeline.speculation import Speculator
from bot.pipeline.stages.transcriber import Transcriber
from bot.pipeline.stages.turn_detector import TurnDetector
from bot.profile import EndpointingConfig
from serve import ASR, VAD

if TYPE_CHECKING:
    from serve.asr import Vocabulary

FRAME_MS = 20
_WORD = re.compile(r"[a-z0-9']+")


@dataclass(frozen=True)
class HeardTurn:
    text: str
    #: The turn went on with the one before (heard together with it).
    joined: bool
    #: Its words were the pause's pass's.
    from_pause: bool


async def hear_call(
    asr: ASR,
    vad: VAD,
    endpointing: EndpointingConfig,
    pcm: bytes,
    *,
    sample_rate: int = 8000,
    vocabulary: Vocabulary | None = None,
) -> list[HeardTurn]:
    """The turns the call hears in ``pcm`` (16-bit mono), each with its transcript."""
    # Heard by a vocabulary only when given one (an earlier commit's stages have none).
    by: dict[str, Any] = {} if vocabulary is None else {"vocabulary": vocabulary}
    speculator = Speculator(asr, sample_rate=sample_rate, **by)
    answering = LineState()  # the bot "answering": told as the speaker would tell it
    detector = TurnDetector(
        vad.create_stream(sample_rate),
        endpointing,
        call_id="hearing",
        speculator=speculator,
        line=answering,
    )
    transcriber = Transcriber(asr, sample_rate=sample_rate, speculator=speculator, **by)
    out = Collector()
    transcriber.link(out)
    sink = Collector()
    detector.link(sink)
    frame = 2 * sample_rate * FRAME_MS // 1000
    turns: list[HeardTurn] = []
    for n, start in enumerate(range(0, len(pcm) - frame + 1, frame)):
        at = 10.0 + n * FRAME_MS / 1000.0
        await detector.process(AudioIn(pcm=pcm[start : start + frame], at=at))
        await speculator.settle()
        while sink.frames:
            got = sink.frames.pop(0)
            if isinstance(got, Interrupt):
                answering.tell(LineHeld(held=False, by="speaker"))
            elif isinstance(got, EndOfTurn):
                # the bot answers the turn, until the caller speaks
                answering.tell(LineHeld(held=True, by="speaker"))
                out.frames.clear()
                await transcriber.process(got)
                said = [f.text for f in out.frames if isinstance(f, Transcript)]
                if said:
                    turn = got.turn
                    joined = turn.continues is not None
                    turns.append(HeardTurn(said[0], joined, turn.speculation is not None))
    await speculator.close()
    return turns


def what_was_heard(turns: list[HeardTurn]) -> str:
    """The words the call went on with: each turn's, but those of a turn the next one went
    on with (they were heard again with it)."""
    kept = [t.text for n, t in enumerate(turns) if n + 1 == len(turns) or not turns[n + 1].joined]
    return " ".join(kept)


def said_twice(reference: str, heard: str) -> bool:
    """``heard`` says some of its words twice where ``reference`` does not: a run of 1-3
    words twice in a row that the reference has not, or 3 words more than it."""
    ref, hyp = _WORD.findall(reference.lower()), _WORD.findall(heard.lower())
    joined = " ".join(ref)
    for n in (1, 2, 3):
        for i in range(len(hyp) - 2 * n + 1):
            twice = hyp[i : i + n] == hyp[i + n : i + 2 * n]
            if twice and " ".join(hyp[i : i + 2 * n]) not in joined:
                return True
    return len(hyp) > len(ref) + 2
