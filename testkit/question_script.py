"""What a scripted caller says: questions chosen for a route, spoken into one 8 kHz track.

The benchmarks ask the bot two kinds of questions: held-out paraphrases of the default
profile's intents, which the intent cache answers, and open questions no intent covers,
which go to the LLM. A ``Script`` is a caller's whole call as audio (silence for the
greeting, each question, silence for its answer) and where each question lies in it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from testkit.voices import RATE, speak
from testkit.wire import FRAME_MS, voiced_frames

#: Open questions no intent covers (from bench/intent_eval/test/negatives.txt): the LLM answers.
OPEN_QUESTIONS = (
    "Do you have this jacket in blue?",
    "Can I pay with PayPal?",
    "I forgot my password.",
    "Do you sell gift cards?",
    "Can you recommend a good winter coat?",
    "What size should I get?",
)
#: Held-out paraphrases of the default profile's intents: the intent cache answers.
CACHE_QUESTIONS = (
    "Can you check where my parcel is?",
    "What time does your customer service open in the morning?",
    "Can you connect me to a live agent?",
    "How can I return something I ordered?",
    "Can you send my parcel to another address?",
    "Do you deliver to France?",
    "What do you charge for shipping?",
    "My package was damaged in the post.",
)


@dataclass(frozen=True)
class ScriptTurn:
    """One question in a caller's script; times are seconds from the start of the script."""

    text: str
    planned: str  # "cache" or "llm": the route the question was chosen for
    start_s: float  # first voiced frame
    end_s: float  # end of the last voiced frame


@dataclass(frozen=True)
class Script:
    """What one caller says, as 8 kHz audio, and where each question is in it."""

    voice: str
    turns: tuple[ScriptTurn, ...]
    pcm: bytes

    @property
    def seconds(self) -> float:
        return len(self.pcm) / 2 / RATE


def voiced_bounds(pcm: bytes) -> tuple[float, float]:
    """(first, end of last) voiced 20 ms frame of 8 kHz PCM, in seconds."""
    voiced = np.flatnonzero(voiced_frames(np.frombuffer(pcm, "<i2")))
    if not len(voiced):
        raise ValueError("no voiced audio in utterance")
    return float(voiced[0] * FRAME_MS / 1000), float((voiced[-1] + 1) * FRAME_MS / 1000)


def build_script(
    questions: Sequence[tuple[str, str]],
    voice: str,
    *,
    lead_s: float,
    answer_window_s: float,
    say: Callable[[str, str], bytes] = lambda text, voice: speak(text, voice=voice),
    think_s: Callable[[], float] = lambda: 0.0,
) -> Script:
    """Silence for the greeting, then each (text, planned route) and silence for its answer
    (``answer_window_s``, plus ``think_s()`` more: callers who take their time)."""
    parts = [bytes(int(lead_s * RATE) * 2)]
    at = int(lead_s * RATE) / RATE
    turns = []
    for text, planned in questions:
        pcm = say(text, voice)
        first, last = voiced_bounds(pcm)
        turns.append(ScriptTurn(text, planned, at + first, at + last))
        gap = int((answer_window_s + think_s()) * RATE)
        parts += [pcm, bytes(gap * 2)]
        at += len(pcm) / 2 / RATE + gap / RATE
    return Script(voice=voice, turns=tuple(turns), pcm=b"".join(parts))


def plan_questions(route: str, turns: int, caller: int) -> list[tuple[str, str]]:
    """A caller's questions: intent paraphrases (cache), open questions (llm) or alternating."""
    out = []
    for j in range(turns):
        planned = route if route != "both" else ("cache" if (caller + j) % 2 == 0 else "llm")
        pool = CACHE_QUESTIONS if planned == "cache" else OPEN_QUESTIONS
        out.append((pool[(caller * turns + j) % len(pool)], planned))
    return out
