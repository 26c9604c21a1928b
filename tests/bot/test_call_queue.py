"""The call queue: slots and the line (``CallQueue``), and what a waiting caller hears
(``Lobby``) on an in-memory call with a scripted TTS.

The lobby and its calls run on a clock the test moves (``FakeClock``), a 20 ms frame at a
time: the waits in line, the updates, the longest wait and the messages' playout pass
without being waited for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
import pytest

from bot.callflow import TransferTarget
from bot.pipeline.prompts import PromptAudio
from bot.pipeline.stages.call_control import overflow_targets
from bot.profile import DEFAULT_PROFILE, load_profile
from bot.queue.hold import hold_pattern
from bot.queue.line import CallQueue
from bot.queue.lobby import AHEAD_FRAMES, Lobby, TargetLookup
from bot.queue.settings import QueueSettings
from telephony.events import TransferResult
from tests.bot.fakes import RATE, MemoryCall, ToneTTS, silence
from tests.support.clock import FakeClock

DEFAULT = load_profile(DEFAULT_PROFILE)
T = TypeVar("T")

# -- CallQueue ---------------------------------------------------------------------------


def test_callers_get_free_slots_then_wait_in_arrival_order() -> None:
    q = CallQueue(max_active=2, max_waiting=3)
    a, b, c, d = (q.enter(n) for n in "abcd")
    assert a is not None and b is not None and c is not None and d is not None
    assert (a.state, b.state, c.state, d.state) == ("active", "active", "waiting", "waiting")
    assert (q.active, q.waiting) == (2, 2)
    assert (q.position(c), q.position(d), q.position(a)) == (1, 2, 0)
    q.leave(b)  # a conversation ends: the first in line gets its slot
    assert (c.state, d.state) == ("active", "waiting")
    assert q.position(d) == 1 and (q.active, q.waiting) == (2, 1)
    assert c.queued and not a.queued


def test_a_new_caller_never_overtakes_the_line() -> None:
    q = CallQueue(max_active=1, max_waiting=2)
    first, second = q.enter("first"), q.enter("second")
    assert first is not None and second is not None
    q.leave(first)
    third = q.enter("third")  # the slot went to "second"; "third" waits even so
    assert second.state == "active"
    assert third is not None and third.state == "waiting" and q.position(third) == 1


def test_the_line_is_bounded() -> None:
    q = CallQueue(max_active=1, max_waiting=1)
    assert q.enter("talking") is not None
    assert q.enter("waiting") is not None
    assert q.enter("one too many") is None
    assert (q.active, q.waiting) == (1, 1)


def test_no_line_at_all_when_max_waiting_is_zero() -> None:
    q = CallQueue(max_active=1, max_waiting=0)
    assert q.enter("a") is not None and q.enter("b") is None


def test_a_caller_who_hangs_up_leaves_the_line_and_the_others_move_up() -> None:
    q = CallQueue(max_active=1, max_waiting=3)
    talking = q.enter("talking")
    b, c, d = q.enter("b"), q.enter("c"), q.enter("d")
    assert talking is not None and b is not None and c is not None and d is not None
    q.leave(c)
    assert c.state == "left" and q.position(d) == 2 and q.waiting == 2
    q.leave(talking)
    assert b.state == "active" and d.state == "waiting" and q.position(d) == 1
    q.leave(c)  # twice: nothing more happens
    assert (q.active, q.waiting) == (1, 1)


async def test_wait_returns_when_a_slot_frees_or_when_the_time_is_up() -> None:
    q = CallQueue(max_active=1, max_waiting=2)
    talking, waiting = q.enter("talking"), q.enter("waiting")
    assert talking is not None and waiting is not None
    assert not await q.wait(waiting, timeout_s=0.05)  # timed out: still in line
    assert waiting.state == "waiting" and q.position(waiting) == 1
    later = asyncio.ensure_future(q.wait(waiting, timeout_s=5.0))
    await asyncio.sleep(0)
    q.leave(talking)
    assert await later
    assert waiting.admitted_at is not None and waiting.admitted_at >= waiting.arrived_at


async def test_leaving_wakes_a_waiter_with_false() -> None:
    q = CallQueue(max_active=1, max_waiting=1)
    q.enter("talking")
    waiting = q.enter("waiting")
    assert waiting is not None
    pending = asyncio.ensure_future(q.wait(waiting, timeout_s=5.0))
    await asyncio.sleep(0)
    q.leave(waiting)
    assert await pending is False


def test_a_closed_queue_gives_a_freed_slot_to_nobody_in_line() -> None:
    q = CallQueue(max_active=1, max_waiting=2)
    first, second = q.enter("a"), q.enter("b")
    assert first is not None and second is not None and second.state == "waiting"
    q.close()
    q.leave(first)
    assert second.state == "waiting" and q.active == 0
    third = q.enter("c")  # a call still being set up at the stop: in line, not a slot
    assert third is not None and third.state == "waiting"


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="max_active"):
        CallQueue(max_active=0, max_waiting=1)


# -- settings ---------------------------------------------------------------------------


def test_settings_name_the_sip_slots_a_queue_needs() -> None:
    s = QueueSettings(max_active=4, max_waiting=8)
    problem = s.capacity_problem(10)
    assert problem is not None and "SWITCHBOARD_SIP__MAX_CALLS" in problem and "12" in problem
    assert s.capacity_problem(12) is None
    assert QueueSettings().capacity_problem(1) is None  # no queue: nothing to carry


def test_a_message_with_an_unknown_placeholder_is_refused() -> None:
    with pytest.raises(ValueError, match="position"):
        QueueSettings(welcome="You are caller {number}")


# -- hold audio -------------------------------------------------------------------------


def test_hold_audio_is_soft_chimes_over_a_faint_hiss() -> None:
    pcm = np.frombuffer(hold_pattern(RATE, -22.0), "<i2").astype(np.float64)
    assert len(pcm) == 4 * RATE
    peak_dbfs = 20 * np.log10(np.abs(pcm).max() / 32768)
    assert -30 < peak_dbfs < -15
    tail = pcm[int(2.5 * RATE) :]  # after the chime: comfort noise, not silence
    tail_rms = float(np.sqrt(np.mean(tail**2)))
    assert 10 < tail_rms < 80  # about -58 dBFS


# -- Lobby ------------------------------------------------------------------------------


@dataclass
class LogSpy:
    answered: list[str] = field(default_factory=list)
    events: list[tuple[str, str, str | None]] = field(default_factory=list)
    ended: list[tuple[str, str]] = field(default_factory=list)

    def call_answered(self, call_id: str, **_: object) -> None:
        self.answered.append(call_id)

    def event(
        self, call_id: str, kind: str, detail: str | None = None, at: float | None = None
    ) -> None:
        self.events.append((call_id, kind, detail))

    def call_ended(self, call_id: str, reason: str, at: float | None = None) -> None:
        self.ended.append((call_id, reason))

    def kinds(self, call_id: str) -> list[str]:
        return [k for c, k, _ in self.events if c == call_id]


class LineCall(MemoryCall):
    """A ``MemoryCall`` on the line's clock, its playout moved by the line's frames."""

    remote_uri = "sip:caller@127.0.0.1"
    local_uri = "sip:bot@127.0.0.1"

    async def pass_time(self, seconds: float) -> None:
        """Nothing: the line moves the clock, once a frame for all its calls."""


class Line:
    """The test's clock and its calls. Each 20 ms frame plays one frame out to every call
    (the callers silent) and then moves the clock on by 20 ms; time passes only as the test
    runs frames (``run_for``, ``run_until``, ``result``)."""

    def __init__(self) -> None:
        self.clock = FakeClock()
        self.calls: list[LineCall] = []

    def call(self, call_id: str, transfer_result: TransferResult | None = None) -> LineCall:
        call = LineCall(call_id, transfer_result, clock=self.clock)
        self.calls.append(call)
        return call

    async def frame(self) -> None:
        for call in self.calls:
            await call.tick(silence(20))
        await self.clock.advance(0.02)

    async def run_for(self, seconds: float) -> None:
        for _ in range(round(seconds / 0.02)):
            await self.frame()

    async def run_until(self, cond: Callable[[], bool], what: str, within_s: float = 10.0) -> None:
        end = self.clock.now() + within_s
        while not cond():
            if self.clock.now() >= end:
                raise AssertionError(f"not within {within_s} s on the calls' clock: {what}")
            await self.frame()

    async def result(self, work: Awaitable[T], within_s: float = 10.0) -> T:
        """What ``work`` returns, the frames running until it does (``within_s`` at most)."""
        task = asyncio.ensure_future(work)
        try:
            await self.run_until(task.done, "the lobby to return", within_s)
        finally:
            task.cancel()  # nothing once it is done
        return task.result()


class WordTTS(ToneTTS):
    """Speaks 100 ms a word, each word its own pitch: two phrases sound alike only when
    their words do."""

    def _synthesize_impl(self, text: str, sample_rate: int) -> Iterator[bytes]:
        self.texts.append(text)
        t = np.arange(sample_rate // 10) / sample_rate
        for word in text.split():
            hz = 300 + 7 * (sum(map(ord, word)) % 300)
            yield (3000 * np.sin(2 * np.pi * hz * t)).astype("<i2").tobytes()


async def make_lobby(
    settings: QueueSettings,
    log: LogSpy,
    waits: list[tuple[str, float]],
    line: Line,
    targets: TargetLookup | None = None,
) -> tuple[Lobby, WordTTS]:
    tts = WordTTS()
    await tts.load()
    assert settings.max_active is not None
    lobby = Lobby(
        CallQueue(settings.max_active, settings.max_waiting, clock=line.clock.now),
        settings,
        PromptAudio(sample_rate=RATE),
        tts,
        call_log=log,
        on_wait=lambda outcome, s: waits.append((outcome, s)),
        targets=targets,
        clock=line.clock,
    )
    await lobby.prepare()
    return lobby, tts


def heard_hold(call: MemoryCall, lobby: Lobby) -> bool:
    """True when the chime's first 20 ms frame was among what the caller heard."""
    return lobby.hold[320:640] in bytes(call.sent)


async def test_a_queued_caller_hears_their_place_then_hold_and_gets_the_next_slot() -> None:
    log, waits, line = LogSpy(), [], Line()
    settings = QueueSettings(
        max_active=1,
        max_waiting=2,
        max_wait_s=30,
        update_every_s=1.5,
        welcome="You are number {position} in line.",
        update="Still number {position}.",
    )
    lobby, _ = await make_lobby(settings, log, waits, line)
    first, second = line.call("first"), line.call("second")
    one = await lobby.admit(first)
    assert one.outcome == "at_once" and one.ticket is not None
    assert log.answered == []  # a caller with a slot is logged by the call session
    queued_at = line.clock.now()
    waiting = asyncio.ensure_future(lobby.admit(second))
    await line.run_until(lambda: heard_hold(second, lobby), "the welcome, then hold audio")
    update = lobby._prompts.get("Still number 1.")
    await line.run_until(lambda: update in bytes(second.sent), "the update at its interval")
    # At its interval: 1.5 s after the caller was queued, and its 0.3 s heard since.
    assert 1.8 <= line.clock.now() - queued_at <= 1.9, line.clock.now() - queued_at
    assert not waiting.done()
    lobby.release(one.ticket)  # the first conversation ends
    two = await line.result(waiting, 5)
    assert two.outcome == "dequeued" and two.ticket is not None and two.ticket.state == "active"
    heard = bytes(second.sent)
    assert lobby._prompts.get("You are number 1 in line.") in heard
    assert heard_hold(second, lobby), "no hold audio between the messages"
    assert second.cleared > 0  # the hold audio stopped for the conversation
    assert second.hangups == 0
    assert log.answered == ["second"]
    kinds = log.kinds("second")
    assert kinds[0] == "queued" and kinds[-1] == "dequeued"
    assert log.events[0][2] == "position 1"
    assert log.ended == []  # the call goes on, with the bot
    assert [o for o, _ in waits] == ["dequeued"] and waits[0][1] >= 1.5
    assert lobby.queue.active == 1 and lobby.queue.waiting == 0


async def test_after_the_longest_wait_the_caller_hears_the_apology_and_is_hung_up() -> None:
    log, waits, line = LogSpy(), [], Line()
    settings = QueueSettings(max_active=1, max_waiting=2, max_wait_s=0.6, update_every_s=30)
    lobby, _ = await make_lobby(settings, log, waits, line)
    first, second = line.call("first"), line.call("second")
    assert (await lobby.admit(first)).outcome == "at_once"
    out = await line.result(lobby.admit(second))
    assert out.outcome == "timeout" and out.ticket is None and 0.6 <= out.waited_s < 0.7
    assert second.hangups == 1
    goodbye = lobby._prompts.get(settings.timeout)
    assert goodbye in bytes(second.sent), "the apology was not played to its end"
    assert log.kinds("second") == ["queued", "queue_timeout"]
    assert log.ended == [("second", "queue_timeout")]
    assert lobby.queue.waiting == 0 and [o for o, _ in waits] == ["timeout"]


async def test_a_caller_who_hangs_up_in_line_leaves_it() -> None:
    log, waits, line = LogSpy(), [], Line()
    settings = QueueSettings(max_active=1, max_waiting=2, max_wait_s=30)
    lobby, _ = await make_lobby(settings, log, waits, line)
    first, second, third = line.call("first"), line.call("second"), line.call("third")
    one = await lobby.admit(first)
    assert one.ticket is not None
    two = asyncio.ensure_future(lobby.admit(second))
    three = asyncio.ensure_future(lobby.admit(third))
    await line.run_for(0.3)
    assert lobby.queue.waiting == 2
    await second.end()  # the caller gives up
    gone = await line.result(two, 5)
    assert gone.outcome == "abandoned" and lobby.queue.waiting == 1
    lobby.release(one.ticket)
    moved_up = await line.result(three, 5)
    assert moved_up.outcome == "dequeued"
    assert log.kinds("second") == ["queued", "queue_abandoned"]
    assert log.ended == [("second", "bye")]
    assert second.hangups == 0
    assert sorted(o for o, _ in waits) == ["abandoned", "dequeued"]


async def test_a_full_line_answers_with_the_busy_message_and_hangs_up() -> None:
    log, waits, line = LogSpy(), [], Line()
    settings = QueueSettings(max_active=1, max_waiting=0)
    lobby, _ = await make_lobby(settings, log, waits, line)
    first, second = line.call("first"), line.call("second")
    assert (await lobby.admit(first)).outcome == "at_once"
    out = await line.result(lobby.admit(second))
    assert out.outcome == "full" and second.hangups == 1
    assert lobby._prompts.get(settings.full) in bytes(second.sent)
    assert log.kinds("second") == ["queue_full"] and log.ended == [("second", "queue_full")]


async def test_the_overflow_target_takes_a_caller_who_waited_too_long() -> None:
    log, waits, line = LogSpy(), [], Line()
    settings = QueueSettings(
        max_active=1, max_waiting=1, max_wait_s=0.3, overflow_target="sip:desk@127.0.0.1"
    )
    lobby, _ = await make_lobby(settings, log, waits, line)
    first, second = line.call("first"), line.call("second")
    await lobby.admit(first)
    out = await line.result(lobby.admit(second))
    assert out.outcome == "transferred"
    assert [t for t, _, _ in second.transfers] == ["sip:desk@127.0.0.1"]
    # The overflow message played to its end before the REFER (hold audio after it).
    assert lobby._prompts.get(settings.overflow) in bytes(second.sent)
    assert second.transfers[0][2] <= AHEAD_FRAMES
    assert log.kinds("second") == ["queued", "transfer", "queue_transfer"]
    assert log.ended == [("second", "transferred")] and second.hangups == 1


async def test_a_failed_overflow_transfer_ends_with_the_apology() -> None:
    log, waits, line = LogSpy(), [], Line()
    settings = QueueSettings(
        max_active=1, max_waiting=1, max_wait_s=0.3, overflow_target="sip:desk@127.0.0.1"
    )
    lobby, _ = await make_lobby(settings, log, waits, line)
    first = line.call("first")
    second = line.call("second", transfer_result=TransferResult(False, 486, "Busy Here"))
    await lobby.admit(first)
    out = await line.result(lobby.admit(second))
    assert out.outcome == "timeout" and second.hangups == 1
    assert log.kinds("second") == ["queued", "transfer", "transfer_failed", "queue_timeout"]
    assert lobby._prompts.get(settings.timeout) in bytes(second.sent)


async def test_closing_dismisses_each_caller_in_line_with_the_apology() -> None:
    log, waits, line = LogSpy(), [], Line()
    settings = QueueSettings(max_active=1, max_waiting=2, max_wait_s=60)
    lobby, _ = await make_lobby(settings, log, waits, line)
    first, second, third = line.call("first"), line.call("second"), line.call("third")
    one = await lobby.admit(first)
    assert one.ticket is not None
    two = asyncio.ensure_future(lobby.admit(second))
    three = asyncio.ensure_future(lobby.admit(third))
    await line.run_until(lambda: lobby.queue.waiting == 2, "both in line")
    assert await line.result(lobby.close(), 20) == 2  # returns once both heard the apology
    assert two.done() and three.done()
    lobby.release(one.ticket)  # the conversation ends after: its slot goes to nobody
    outcomes = [two.result().outcome, three.result().outcome]
    assert outcomes == ["closed", "closed"]
    goodbye = lobby._prompts.get(settings.timeout)
    for call in (second, third):
        assert goodbye in bytes(call.sent) and call.hangups == 1
        assert log.kinds(call.call_id) == ["queued", "queue_closed"]
    assert sorted(log.ended) == [("second", "queue_closed"), ("third", "queue_closed")]
    detail = next(d for _, k, d in log.events if k == "queue_closed")
    assert detail is not None and detail.startswith("node stopping, waited ")
    assert lobby.queue.waiting == 0 and lobby.queue.active == 0
    assert sorted(o for o, _ in waits) == ["closed", "closed"]
    assert await lobby.close() == 0  # nobody left: at once


async def test_closing_sends_the_callers_in_line_to_the_overflow_target() -> None:
    log, waits, line = LogSpy(), [], Line()
    target = "sip:desk@127.0.0.1"
    settings = QueueSettings(max_active=1, max_waiting=1, max_wait_s=60, overflow_target=target)
    lobby, _ = await make_lobby(settings, log, waits, line)
    first, second = line.call("first"), line.call("second")
    await lobby.admit(first)
    waiting = asyncio.ensure_future(lobby.admit(second))
    await line.run_until(lambda: lobby.queue.waiting == 1, "in line")
    await line.result(lobby.close(), 20)
    out = waiting.result()
    assert out.outcome == "transferred" and [t for t, _, _ in second.transfers] == [target]
    assert log.kinds("second") == ["queued", "transfer", "queue_transfer"]
    assert log.ended == [("second", "transferred")]
    detail = next(d for _, k, d in log.events if k == "queue_transfer")
    assert detail is not None and detail.startswith("node stopping")


async def test_a_full_line_goes_to_the_overflow_target_when_one_is_set() -> None:
    log, waits, line = LogSpy(), [], Line()
    target = "sip:desk@127.0.0.1"
    settings = QueueSettings(max_active=1, max_waiting=0, overflow_target=target)
    lobby, _ = await make_lobby(settings, log, waits, line)
    first, second = line.call("first"), line.call("second")
    await lobby.admit(first)
    out = await line.result(lobby.admit(second))
    assert out.outcome == "transferred" and second.hangups == 1
    assert log.kinds("second") == ["queue_full", "transfer", "queue_transfer"]
    assert lobby._prompts.get(settings.full) not in bytes(second.sent)
    assert [o for o, _ in waits] == ["transferred"]


async def test_an_overflow_target_in_bridge_mode_is_bridged_until_a_side_hangs_up() -> None:
    log, waits, line = LogSpy(), [], Line()
    target = "sip:desk@127.0.0.1"
    settings = QueueSettings(max_active=1, max_waiting=1, max_wait_s=0.3, overflow_target=target)

    def bridge(uri: str) -> TransferTarget:
        return TransferTarget(uri=uri, mode="bridge")

    lobby, _ = await make_lobby(settings, log, waits, line, targets=bridge)
    first, second = line.call("first"), line.call("second")
    await lobby.admit(first)
    waiting = asyncio.ensure_future(lobby.admit(second))
    await line.run_until(lambda: bool(second.bridges), "the bridge to the overflow target")
    await line.run_for(0.3)
    assert not waiting.done()  # the caller is with the agent
    await second.end()
    out = await line.result(waiting, 5)
    assert out.outcome == "transferred" and second.transfers == [] and second.hangups == 0
    assert log.kinds("second") == [
        "queued",
        "transfer",
        "bridged",
        "bridge_ended",
        "queue_transfer",
    ]
    assert ("second", "bridge_ended", "caller hung up") in log.events


async def test_an_overflow_target_off_the_operators_list_is_refused() -> None:
    log, waits, line = LogSpy(), [], Line()
    settings = QueueSettings(
        max_active=1, max_waiting=1, max_wait_s=0.3, overflow_target="sip:desk@127.0.0.1"
    )
    lookup = overflow_targets(lambda: DEFAULT, frozenset({"sip:other@127.0.0.1"}))
    lobby, _ = await make_lobby(settings, log, waits, line, targets=lookup)
    first, second = line.call("first"), line.call("second")
    await lobby.admit(first)
    out = await line.result(lobby.admit(second))
    assert out.outcome == "timeout" and second.transfers == [] and second.bridges == []
    assert log.kinds("second") == ["queued", "transfer_refused", "queue_timeout"]


def test_the_overflow_targets_mode_is_the_profiles_entry_else_a_refer() -> None:
    listed = DEFAULT.model_copy(
        update={"transfer_targets": [TransferTarget(uri="sip:a@127.0.0.1", mode="bridge")]}
    )
    lookup = overflow_targets(lambda: listed, None)
    assert lookup("sip:a@127.0.0.1") == TransferTarget(uri="sip:a@127.0.0.1", mode="bridge")
    assert lookup("sip:b@127.0.0.1") == TransferTarget(uri="sip:b@127.0.0.1", mode="refer")
    narrowed = overflow_targets(lambda: listed, frozenset({"sip:a@127.0.0.1"}))
    assert narrowed("sip:b@127.0.0.1") is None
