"""Frames that go upstream: what a later stage asks of an earlier one, along the pipeline."""

from __future__ import annotations

from bot.pipeline.frames import Bridged, CollectNumber, Frame, Speak
from bot.pipeline.pipeline import Pipeline
from bot.pipeline.processor import Processor


class Recorder(Processor):
    """Records the upstream frames it sees and whether it left the call; answers one kind."""

    def __init__(self, takes: type[Frame] | None = None) -> None:
        super().__init__()
        self.takes = takes
        self.seen: list[Frame] = []
        self.left = False

    async def process_upstream(self, frame: Frame) -> None:
        self.seen.append(frame)
        if self.takes is not None and isinstance(frame, self.takes):
            return
        await super().process_upstream(frame)

    async def on_bridged(self) -> None:
        self.left = True


async def test_an_upstream_frame_goes_back_to_the_first_stage_that_takes_it() -> None:
    first, taker, middle, last = Recorder(), Recorder(CollectNumber), Recorder(), Recorder()
    Pipeline([first, taker, middle, last])
    await last.ask_for_number("order_number")
    assert middle.seen == [CollectNumber("order_number")]
    assert taker.seen == [CollectNumber("order_number")]
    assert first.seen == []  # taken: it goes no further
    assert last.seen == []  # upstream starts at the one before


async def test_bridged_reaches_every_stage_before_and_each_leaves_the_call() -> None:
    stages = [Recorder(), Recorder(), Recorder()]
    Pipeline(stages)
    await stages[-1].push_upstream(Bridged())
    assert [s.left for s in stages] == [True, True, False]
    speak = Speak(turn=None, text="Please hold.")
    await stages[-1].push_upstream(speak)  # nobody takes it here: it goes to the head
    assert stages[0].seen[-1] == speak
