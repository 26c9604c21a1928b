"""The profile's words for the recognizer (``bot.vocabulary``), and the call hearing every
turn by them: in the caller's pause and at the end of the turn."""

from __future__ import annotations

from bot.pipeline.frames import EndOfTurn, Transcript
from bot.pipeline.processor import Collector
from bot.pipeline.speculation import Speculator
from bot.pipeline.stages.transcriber import Transcriber
from bot.pipeline.turn import Turn
from bot.profile import DEFAULT_PROFILE, load_profile
from bot.vocabulary import vocabulary, vocabulary_of
from serve.asr import NO_VOCABULARY, Transcription, Vocabulary
from tests.bot.fakes import ScriptedASR, silence, tone

PROFILE = load_profile(DEFAULT_PROFILE)


def test_names_and_keywords_come_first_and_function_words_never() -> None:
    words = vocabulary(PROFILE)
    top = words.hotwords[:25]
    for name in ("PayPal", "Germany", "Visa", "Hong Kong"):
        assert name in top, top
    assert "gift" in words.hotwords[:30]
    for plain in ("you", "the", "please", "want", "can", "my"):
        assert plain not in words.hotwords
    assert len(set(words.hotwords)) == len(words.hotwords)


def test_phrases_are_the_operator_s_own_and_cover_every_topic_early() -> None:
    words = vocabulary(PROFILE)
    written = {t for i in PROFILE.intents for t in i.examples}
    written |= {q for e in PROFILE.knowledge for q in e.questions}
    assert set(words.phrases) <= written
    assert len(set(words.phrases)) == len(words.phrases)
    # Within the first phrases (about what Whisper's prompt holds), one of each intent
    # and of most knowledge entries: the greedy cover takes the words no phrase has yet.
    first = set(words.phrases[:30])
    for intent in PROFILE.intents:
        assert first & set(intent.examples), intent.name
    entries = sum(bool(first & set(e.questions)) for e in PROFILE.knowledge)
    assert entries >= len(PROFILE.knowledge) - 2


def test_a_profile_without_intents_or_knowledge_has_no_vocabulary() -> None:
    bare = PROFILE.model_copy(update={"intents": [], "knowledge": []})
    assert not vocabulary(bare)


def test_a_new_configuration_is_heard_by_its_own_words() -> None:
    first = vocabulary_of(PROFILE)
    assert vocabulary_of(PROFILE) is first  # built once per configuration
    dental = PROFILE.model_copy(
        update={
            "intents": [
                PROFILE.intents[0].model_copy(
                    update={"examples": ["Can I book a check-up with Dr Patel?"]}
                )
            ],
            "knowledge": [],
        }
    )
    changed = vocabulary_of(dental)
    assert changed != first
    assert "Dr Patel" in changed.hotwords
    assert changed.phrases == ("Can I book a check-up with Dr Patel?",)


class HeardByASR(ScriptedASR):
    """Says which vocabulary each request came with."""

    def __init__(self) -> None:
        super().__init__("Do you ship to Germany?")
        self.vocabularies: list[Vocabulary] = []

    def _transcribe_impl(self, pcm: bytes, sample_rate: int) -> Transcription:
        return self._transcribe_with_impl(pcm, sample_rate, NO_VOCABULARY, 0)

    def _transcribe_with_impl(
        self, pcm: bytes, sample_rate: int, vocabulary: Vocabulary, alternatives: int
    ) -> Transcription:
        self.vocabularies.append(vocabulary)
        return super()._transcribe_impl(pcm, sample_rate)


async def test_the_pause_s_pass_and_the_turn_are_heard_by_the_profile_s_words() -> None:
    words = vocabulary_of(PROFILE)
    asr = HeardByASR()
    await asr.load()
    spec = Speculator(asr, sample_rate=8000, vocabulary=words)
    audio = tone(600) + silence(200)
    assert spec.start(1, audio)
    await spec.settle()
    transcriber = Transcriber(asr, sample_rate=8000, speculator=spec, vocabulary=words)
    sink = Collector()
    transcriber.link(sink)
    # A turn the pass covered, then one it did not (heard at the end of the turn).
    covered = Turn(call_id="c", audio=audio, pause_id=1)
    await transcriber.process(EndOfTurn(turn=covered))
    await transcriber.process(EndOfTurn(turn=Turn(call_id="c", audio=audio + tone(400))))
    assert asr.vocabularies == [words, words]
    said = [f.text for f in sink.frames if isinstance(f, Transcript)]
    assert said == ["Do you ship to Germany?", "Do you ship to Germany?"]
