"""Whether the bot has the line, told upstream by the stages that hold it (``LineHeld``):
the speaker until what it said has played out, the call control while the caller is on
hold or with an agent. A probe before them keeps what it is told, as the turn detector,
the digit collector, the keypad menu and the call timer do.

On a clock of the test's (``FakeClock``): the call plays one frame of the bot's per frame
of the caller's (``MemoryCall.play``).
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.callflow import TransferTarget
from bot.pipeline.frames import AnswerPending, CallAction, Frame, LineHeld, PlayAudio
from bot.pipeline.line_state import LineState
from bot.pipeline.processor import Collector, Processor
from bot.pipeline.stages.call_control import CallControl
from bot.pipeline.stages.speaker import Speaker
from bot.pipeline.turn import Turn
from telephony.events import TransferResult
from tests.bot.fakes import MemoryCall, ToneTTS, silence, tone
from tests.support.clock import FakeClock, settle


class Probe(Processor):
    """A stage before the ones that hold the line: keeps what it is told."""

    name = "probe"

    def __init__(self) -> None:
        super().__init__()
        self.line = LineState()
        self.told: list[tuple[str, bool]] = []

    async def process_upstream(self, frame: Frame) -> None:
        if isinstance(frame, LineHeld):
            self.told.append((frame.by, frame.held))
        await super().process_upstream(frame)


def speaker_on(
    call: MemoryCall, clock: FakeClock, fillers: Sequence[tuple[str, bytes]] = ()
) -> tuple[Probe, Speaker]:
    speaker = Speaker(
        ToneTTS(),
        call,
        sample_rate=8000,
        apology_pcm=b"",
        on_turn=lambda turn: None,
        fillers=fillers,
        filler_after_s=0.5,
        clock=clock,
    )
    probe = Probe()
    probe.link(speaker)
    speaker.link(Collector())
    speaker.start()
    return probe, speaker


async def test_the_speaker_has_the_line_until_what_it_said_has_played_out() -> None:
    # Audio with no ResponseDone after it (the greeting, queued straight into the
    # speaker): the speaker lets go once the call's playout has drained.
    clock = FakeClock()
    call = MemoryCall(clock=clock)
    probe, speaker = speaker_on(call, clock)
    assert probe.line.held is False
    await speaker.put(PlayAudio(turn=None, pcm=tone(60), text="Hello"))
    await settle()
    assert speaker.busy is False and call.queued_frames == 3
    assert probe.line.held is True  # said, not yet heard
    await call.play(silence(40))
    assert probe.line.held is True
    await call.play(silence(20))  # the last frame played
    assert call.queued_frames == 0
    assert probe.line.held is False
    assert probe.told == [("speaker", True), ("speaker", False)]
    await speaker.stop()


async def test_a_filler_holds_the_line_until_it_has_played_out() -> None:
    clock = FakeClock()
    call = MemoryCall(clock=clock)
    probe, speaker = speaker_on(call, clock, fillers=[("One moment", tone(60))])
    turn = Turn(call_id="c", route="llm", clock=clock)
    turn.mark("eot_decided")
    await speaker.put(AnswerPending(turn=turn))  # the model is on it: silent so far
    await clock.advance(0.4)
    assert probe.line.held is False and call.queued_frames == 0
    await clock.advance(0.2)  # the filler
    assert call.queued_frames == 3
    assert probe.line.held is True
    await call.play(silence(60))
    assert probe.line.held is False
    assert probe.told == [("speaker", True), ("speaker", False)]
    await speaker.stop()


def control_on(call: MemoryCall, clock: FakeClock) -> tuple[Probe, CallControl]:
    control = CallControl(
        call,
        failed=PlayAudio(turn=None, pcm=tone(60), text="Sorry"),
        transfer_timeout_s=5.0,
        targets=lambda uri: TransferTarget(uri=uri, mode="bridge"),
        clock=clock,
    )
    probe = Probe()
    probe.link(control)
    control.start()
    return probe, control


async def test_the_call_control_has_the_line_while_the_caller_is_with_an_agent() -> None:
    clock = FakeClock()
    call = MemoryCall(clock=clock)
    probe, control = control_on(call, clock)
    turn = Turn(call_id="c", clock=clock)
    await control.put(CallAction(turn=turn, action="transfer", target="sip:agents@pbx"))
    await clock.advance(1.0)
    assert control.bridged is True
    assert probe.line.held is True
    assert probe.told == [("call-control", True)]
    await control.stop()


async def test_a_failed_bridge_lets_go_of_the_line() -> None:
    clock = FakeClock()
    call = MemoryCall(clock=clock, bridge_result=TransferResult(False, 486, "busy"))
    probe, control = control_on(call, clock)
    turn = Turn(call_id="c", clock=clock)
    await control.put(CallAction(turn=turn, action="transfer", target="sip:agents@pbx"))
    await clock.advance(1.0)
    assert control.bridged is False
    assert probe.line.held is False
    assert probe.told == [("call-control", True), ("call-control", False)]
    await control.stop()
