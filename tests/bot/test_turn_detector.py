from bot.pipeline.frames import (
    AudioIn,
    EndOfTurn,
    Interrupt,
    LineHeld,
    UserStartedSpeaking,
    UserStoppedSpeaking,
)
from bot.pipeline.processor import Collector
from bot.pipeline.stages.turn_detector import TurnDetector
from bot.profile import EndpointingConfig
from tests.bot.fakes import FRAME_BYTES, EnergyStream, silence, tone


def frames(pcm: bytes, start: float) -> list[AudioIn]:
    return [
        AudioIn(pcm=pcm[i : i + FRAME_BYTES], at=start + 0.02 * (i // FRAME_BYTES))
        for i in range(0, len(pcm), FRAME_BYTES)
    ]


async def run(
    pcm: bytes, *, bot_speaking: bool = False, cfg: EndpointingConfig | None = None
) -> list[object]:
    config = cfg or EndpointingConfig(min_speech_ms=100, end_silence_ms=300, barge_in_ms=200)
    ep = TurnDetector(EnergyStream(), config, call_id="c", clock=lambda: 99.0)
    sink = Collector()
    ep.link(sink)
    # told as the speaker after it tells it (upstream)
    await ep.put_upstream(LineHeld(held=bot_speaking, by="speaker"))
    for frame in frames(pcm, 10.0):
        await ep.process(frame)
    return sink.frames


async def test_a_turn_is_speech_then_enough_silence() -> None:
    out = await run(silence(200) + tone(600) + silence(400))
    kinds = [type(f) for f in out]
    assert kinds == [UserStartedSpeaking, UserStoppedSpeaking, EndOfTurn]
    turn = next(f for f in out if isinstance(f, EndOfTurn)).turn
    # speech ran from 0.2 s to 0.8 s: the last voiced frame arrived at 10.78
    assert abs(turn.stages["speech_end"] - 10.78) < 1e-6
    assert turn.stages["eot_decided"] == 99.0
    # audio keeps the preroll (200 ms) before the detected start
    assert len(turn.audio) >= 2 * 8000 * 0.6


async def test_a_short_pause_does_not_end_the_turn() -> None:
    out = await run(tone(300) + silence(200) + tone(300) + silence(400))
    assert sum(isinstance(f, EndOfTurn) for f in out) == 1


async def test_clicks_shorter_than_min_speech_are_ignored() -> None:
    out = await run(silence(100) + tone(60) + silence(600))
    assert out == []


async def test_speech_over_the_bot_interrupts_first() -> None:
    out = await run(tone(400) + silence(400), bot_speaking=True)
    assert isinstance(out[0], Interrupt)
    assert isinstance(out[1], UserStartedSpeaking)


async def test_barge_in_needs_longer_speech_than_a_turn_start() -> None:
    out = await run(tone(140) + silence(600), bot_speaking=True)
    assert out == []


async def test_an_endless_turn_is_cut_at_max_turn() -> None:
    cfg = EndpointingConfig(min_speech_ms=100, end_silence_ms=300, max_turn_s=2.0)
    out = await run(tone(5000), cfg=cfg)
    assert sum(isinstance(f, EndOfTurn) for f in out) == 2


class LaggingVad:
    """A VAD whose speech probability stays high long after the audio went quiet."""

    def push(self, frame: bytes) -> float:
        return 0.9

    def reset(self) -> None:
        pass


async def test_quiet_frames_end_a_turn_the_vad_still_calls_speech() -> None:
    cfg = EndpointingConfig(min_speech_ms=100, end_silence_ms=300, energy_floor_dbfs=-50.0)
    ep = TurnDetector(LaggingVad(), cfg, call_id="c")
    sink = Collector()
    ep.link(sink)
    for frame in frames(tone(400) + silence(400), 10.0):
        await ep.process(frame)
    assert sum(isinstance(f, EndOfTurn) for f in sink.frames) == 1
    # without the floor the VAD alone never lets the turn end
    ep = TurnDetector(
        LaggingVad(),
        cfg.model_copy(update={"energy_floor_dbfs": None}),
        call_id="c",
    )
    sink = Collector()
    ep.link(sink)
    for frame in frames(tone(400) + silence(400), 10.0):
        await ep.process(frame)
    assert not any(isinstance(f, EndOfTurn) for f in sink.frames)


async def test_a_barge_in_keeps_the_first_sounds_of_the_caller_s_words() -> None:
    # The turn starts only after 200 ms of speech over the bot; its audio must still hold
    # the whole voiced run and the preroll before it, or the first word loses its onset.
    cfg = EndpointingConfig(min_speech_ms=100, end_silence_ms=300, barge_in_ms=200)
    out = await run(silence(400) + tone(600) + silence(400), bot_speaking=True, cfg=cfg)
    turn = next(f for f in out if isinstance(f, EndOfTurn)).turn
    voiced_and_tail = 2 * 8 * (600 + 300)
    preroll = 2 * 8 * cfg.preroll_ms
    assert len(turn.audio) == voiced_and_tail + preroll


async def test_the_line_is_held_while_any_stage_after_holds_it() -> None:
    # The responder lets go once its answer is made; the speaker still plays it: the
    # caller's words over it are a barge-in until the speaker lets go too.
    ep = TurnDetector(EnergyStream(), EndpointingConfig(), call_id="c")
    assert ep.line.held is False
    await ep.put_upstream(LineHeld(held=True, by="responder"))
    await ep.put_upstream(LineHeld(held=True, by="speaker"))
    await ep.put_upstream(LineHeld(held=False, by="responder"))
    assert ep.line.held is True
    await ep.put_upstream(LineHeld(held=False, by="speaker"))
    assert ep.line.held is False
