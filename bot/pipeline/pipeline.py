"""A call's stages in order: linked, started and stopped together."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Sequence
from typing import TypeVar

from bot.pipeline.context import CallContext
from bot.pipeline.frames import Frame
from bot.pipeline.processor import Processor
from bot.profile import BotProfile

#: A stage of the pipeline: a ``Processor`` subclass with its ``build`` and ``phrases``.
Stage = type[Processor]
S = TypeVar("S", bound=Processor)


class Pipeline:
    """Processors, each passing its output to the next, from the caller's audio to the
    call's actions. Frames enter at the first (``put``)."""

    def __init__(self, stages: Sequence[Processor]) -> None:
        if not stages:
            raise ValueError("a pipeline needs at least one stage")
        self.stages = list(stages)
        for before, after in itertools.pairwise(self.stages):
            before.link(after)

    @classmethod
    def build(cls, ctx: CallContext, kinds: Sequence[Stage]) -> Pipeline:
        """Each of ``kinds`` built for the call of ``ctx``, in order, leaving out those whose
        ``build`` says the call has them off."""
        stages = []
        for kind in kinds:
            stage = kind.build(ctx)
            if stage is not None:
                stages.append(stage)
        return cls(stages)

    @staticmethod
    def phrases(kinds: Sequence[Stage], profile: BotProfile) -> list[str]:
        """What the stages of ``kinds`` may say with ``profile``, each phrase once."""
        return list(dict.fromkeys(text for kind in kinds for text in kind.phrases(profile)))

    def start(self) -> None:
        """Start every stage's worker, first to last."""
        for stage in self.stages:
            stage.start()

    async def stop(self) -> None:
        """Stop every stage, first to last; one that fails to stop does not keep the rest
        running."""
        for stage in self.stages:
            with contextlib.suppress(Exception):
                await stage.stop()

    def stage(self, kind: type[S]) -> S:
        """The stage of type ``kind`` (for the call session that assembled the pipeline and
        its tests; a stage reaches another only by frames); LookupError when there is none."""
        for stage in self.stages:
            if isinstance(stage, kind):
                return stage
        raise LookupError(f"no {kind.__name__} stage in this pipeline")

    async def put(self, frame: Frame) -> None:
        """Hand ``frame`` to the first stage."""
        await self.stages[0].put(frame)
