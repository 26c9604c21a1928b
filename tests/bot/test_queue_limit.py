"""The adaptive limit on conversations: the step as a table, the queue's slots as it moves,
and the keeper reading a real model pool whose work waits."""

from __future__ import annotations

import threading
import time

import pytest

from bot.queue.limit import Interval, LimitKeeper, LimitStep, step
from bot.queue.line import CallQueue
from serve.priority_pool import Priority, PriorityPool, Urgency, priority
from tests.support.clock import FakeClock

BUSY_MS = 150.0


def interval(started: float, mean_wait_ms: float, dropped: float = 0) -> Interval:
    return Interval(started=started, wait_s=started * mean_wait_ms / 1000.0, dropped=dropped)


@pytest.mark.parametrize(
    ("limit", "active", "waiting", "seen", "expected"),
    [
        # No model work at all: as calm as it gets where the limit was reached; else as
        # it is.
        (8, 8, 3, interval(0, 0), LimitStep("idle", 9, 0.0, 0)),
        (8, 8, 0, interval(0, 0), LimitStep("idle", 9, 0.0, 0)),
        (8, 5, 0, interval(0, 0), LimitStep("idle", 8, 0.0, 0)),
        (16, 16, 3, interval(0, 0), LimitStep("idle", 16, 0.0, 0)),
        # Work waited on average as long as the busy mark: a quarter of the conversations
        # held fewer (at least one), never under the floor.
        (16, 16, 0, interval(40, 150), LimitStep("busy", 12, 150.0, 0)),
        (16, 16, 0, interval(40, 900), LimitStep("busy", 12, 900.0, 0)),
        (3, 3, 2, interval(10, 400), LimitStep("busy", 2, 400.0, 0)),
        (2, 2, 5, interval(10, 400), LimitStep("busy", 2, 400.0, 0)),
        # Fewer held than the limit: the cut is from what is held, not from the limit.
        (16, 6, 0, interval(20, 300), LimitStep("busy", 4, 300.0, 0)),
        # A tenth of the work a pause's dropped over its budget is behind too, whatever
        # the mean wait; one now and then is not, but it is not calm either.
        (8, 8, 0, interval(30, 10, dropped=4), LimitStep("busy", 6, 10.0, 4)),
        (8, 8, 0, interval(30, 10, dropped=1), LimitStep("steady", 8, 10.0, 1)),
        # Calm (under a third of the mark, nothing dropped) while callers are kept out by
        # the limit: one more, up to the maximum.
        (6, 6, 3, interval(30, 20), LimitStep("calm", 7, 20.0, 0)),
        (6, 6, 0, interval(30, 20), LimitStep("calm", 7, 20.0, 0)),
        (16, 16, 3, interval(30, 20), LimitStep("steady", 16, 20.0, 0)),
        # Calm with room to spare: the limit is not what holds callers back.
        (8, 4, 0, interval(30, 20), LimitStep("steady", 8, 20.0, 0)),
        # Between a third of the mark and the mark: as it is.
        (6, 6, 3, interval(30, 100), LimitStep("steady", 6, 100.0, 0)),
    ],
)
def test_the_limit_after_one_reading(
    limit: int, active: int, waiting: int, seen: Interval, expected: LimitStep
) -> None:
    got = step(limit, active, waiting, seen, min_active=2, max_active=16, busy_wait_ms=BUSY_MS)
    assert got.load == expected.load and got.limit == expected.limit
    assert got.mean_wait_ms == pytest.approx(expected.mean_wait_ms)
    assert got.dropped == expected.dropped


@pytest.mark.parametrize(
    ("limit", "seen", "expected"),
    [
        # Until the node is first behind, a rise on calm work doubles the limit; on no
        # work at all it is one (nothing says what the conversations cost).
        (2, interval(10, 20), 4),
        (2, interval(0, 0), 3),
        (4, interval(30, 20), 8),
        (13, interval(30, 20), 16),  # never past the maximum
        # A fall is a fall, slow start or not.
        (9, interval(30, 400), 6),
    ],
)
def test_a_slow_start_doubles(limit: int, seen: Interval, expected: int) -> None:
    got = step(
        limit, limit, 5, seen, min_active=2, max_active=16, busy_wait_ms=BUSY_MS, slow_start=True
    )
    assert got.limit == expected, got


@pytest.mark.parametrize(
    ("seen", "since_change", "expected"),
    [
        # A calm reading rises only when the work since the limit last moved was calm too.
        (interval(10, 20), interval(40, 20), LimitStep("calm", 8, 20.0, 0)),
        (interval(10, 20), interval(40, 100), LimitStep("steady", 4, 20.0, 0)),
        (interval(10, 20), interval(40, 10, dropped=1), LimitStep("steady", 4, 20.0, 0)),
        # A reading with no work between two callers' turns: the same.
        (interval(0, 0), interval(40, 20), LimitStep("idle", 8, 0.0, 0)),
        (interval(0, 0), interval(40, 100), LimitStep("idle", 4, 0.0, 0)),
        # A fall is read off the last reading alone.
        (interval(10, 300), interval(40, 20), LimitStep("busy", 3, 300.0, 0)),
    ],
)
def test_a_rise_is_judged_on_the_work_since_the_limit_last_moved(
    seen: Interval, since_change: Interval, expected: LimitStep
) -> None:
    got = step(
        4,
        4,
        5,
        seen,
        min_active=2,
        max_active=16,
        busy_wait_ms=BUSY_MS,
        slow_start=True,
        since_change=since_change,
    )
    assert (got.load, got.limit) == (expected.load, expected.limit), got


def test_an_interval_is_the_pool_counters_difference_over_turns_and_pauses() -> None:
    before = {
        "now": {"started": 10, "wait_seconds": 1.0, "dropped": 0},
        "ahead": {"started": 5, "wait_seconds": 0.5, "dropped": 1},
        "spare": {"started": 100, "wait_seconds": 50.0, "dropped": 40},
    }
    after = {
        "now": {"started": 14, "wait_seconds": 1.8, "dropped": 0},
        "ahead": {"started": 9, "wait_seconds": 0.9, "dropped": 3},
        "spare": {"started": 200, "wait_seconds": 99.0, "dropped": 90},
    }
    got = Interval.between(before, after)
    # Spare work (may not be needed) says nothing of whether a caller waits.
    assert (got.started, got.dropped) == (8, 2)
    assert got.mean_wait_ms == pytest.approx(150.0)


def test_a_lower_limit_takes_no_slot_away_and_a_higher_one_lets_the_line_in() -> None:
    q = CallQueue(max_active=4, max_waiting=4)
    held = [q.enter(f"c{i}") for i in range(4)]
    assert all(t is not None and t.state == "active" for t in held)
    q.set_limit(2)
    assert q.active == 4  # nobody is cut off
    late = q.enter("late")
    assert late is not None and late.state == "waiting"
    first = held[0]
    assert first is not None
    q.leave(first)  # 3 held, over the limit of 2: the line waits on
    assert late.state == "waiting" and q.active == 3
    for t in held[1:3]:
        assert t is not None
        q.leave(t)  # 1 held: a slot under the limit
    assert late.state == "active" and q.active == 2
    other, third = q.enter("other"), q.enter("third")
    assert other is not None and third is not None and other.state == "waiting"
    q.set_limit(4)  # the node caught up: the line gets the slots at once
    assert (other.state, third.state) == ("active", "active")
    with pytest.raises(ValueError, match="1 to 4"):
        q.set_limit(5)
    with pytest.raises(ValueError, match="1 to 4"):
        q.set_limit(0)


def test_the_keeper_starts_low_lowers_the_limit_when_work_waits_and_raises_it_when_calm() -> None:
    pool = PriorityPool(1, thread_name_prefix="limit-test")
    try:
        q = CallQueue(max_active=8, max_waiting=8)
        keeper = LimitKeeper(q, pool.counts, min_active=2, busy_wait_ms=BUSY_MS, interval_s=2.0)
        assert q.limit == 2 and keeper.slow_start  # the fewest, before any reading
        tickets = [q.enter(f"c{i}") for i in range(8)]
        assert [t.state for t in tickets if t is not None] == ["active"] * 2 + ["waiting"] * 6
        # Callers in line and no model work: one more, the line moves up.
        assert keeper.read().load == "idle" and q.limit == 3 and q.active == 3
        # A turn's work behind another for 400 ms on the one worker: the node is behind.
        release = threading.Event()
        with priority(Priority(Urgency.NOW)):
            blocker = pool.submit(release.wait)
            waited = pool.submit(lambda: None)
        time.sleep(0.4)
        release.set()
        waited.result(timeout=5)
        blocker.result(timeout=5)
        busy = keeper.read()
        assert busy.load == "busy" and busy.mean_wait_ms >= BUSY_MS, busy
        assert q.limit == 2 and q.active == 3  # a quarter fewer (one); nobody cut off
        assert not keeper.slow_start
        # Calm work while callers wait: one more at a time now, once the held fall under.
        held = [t for t in tickets if t is not None and t.state == "active"]
        q.leave(held[0])
        assert q.active == 2 and q.waiting == 5
        with priority(Priority(Urgency.NOW)):
            for _ in range(3):
                pool.submit(lambda: None).result(timeout=5)
        calm = keeper.read()
        assert calm.load == "calm" and q.limit == 3 and q.active == 3, calm
    finally:
        pool.shutdown()


async def test_the_keeper_reads_every_interval_on_its_clock() -> None:
    clock = FakeClock()
    readings = iter(
        [
            {"now": {"started": 0, "wait_seconds": 0.0, "dropped": 0}},
            {"now": {"started": 10, "wait_seconds": 0.1, "dropped": 0}},  # 10 ms each
            {"now": {"started": 20, "wait_seconds": 5.1, "dropped": 0}},  # 500 ms each
        ]
    )
    q = CallQueue(max_active=12, max_waiting=12, clock=clock.now)
    keeper = LimitKeeper(
        q, lambda: next(readings), min_active=4, busy_wait_ms=BUSY_MS, interval_s=2.0, clock=clock
    )
    for i in range(12):
        q.enter(f"c{i}")
    assert (q.limit, q.active, q.waiting) == (4, 4, 8)
    keeper.start()
    await clock.advance(1.9)
    assert keeper.last is None and q.limit == 4
    await clock.advance(0.2)
    assert keeper.last is not None and keeper.last.load == "calm" and q.limit == 8
    assert q.active == 8
    await clock.advance(2.0)
    assert keeper.last.load == "busy" and q.limit == 6  # a quarter of the 8 held, at least 1
    await keeper.stop()


async def test_a_rise_waits_for_the_conversations_held_to_be_heard() -> None:
    # A conversation let in shows its load only once its caller speaks: a burst at the
    # start, on calm work, is let in as the conversations held are heard, or a settling
    # time apart where they are not.
    clock = FakeClock()
    q = CallQueue(max_active=16, max_waiting=16, clock=clock.now)
    calm: dict[str, dict[str, float]] = {"now": {"started": 0, "wait_seconds": 0.0}}

    def counts() -> dict[str, dict[str, float]]:
        calm["now"]["started"] += 5  # five jobs a reading, 10 ms waits each
        calm["now"]["wait_seconds"] += 0.05
        return {"now": dict(calm["now"])}

    keeper = LimitKeeper(
        q,
        counts,
        min_active=2,
        busy_wait_ms=BUSY_MS,
        interval_s=2.0,
        settle_s=8.0,
        clock=clock,
    )
    tickets = [q.enter(f"c{i}") for i in range(16)]
    keeper.start()

    def hear_all_held() -> None:
        for t in tickets:
            if t is not None and t.state == "active":
                q.heard(t)

    limits = []
    for second in range(2, 26, 2):
        await clock.advance(2.0)
        limits.append(q.limit)
        if second == 4:
            hear_all_held()  # the first four have each had a turn
    await keeper.stop()
    # 2 -> 4 at the first reading (no rise yet to wait on); 4 -> 8 at the reading after the
    # four were heard (6 s), not the settling time after the last rise (10 s); 8 -> 16 only
    # the settling time after that (14 s), the four let in at 6 s not heard.
    assert limits == [4, 4, 8, 8, 8, 8, 16, 16, 16, 16, 16, 16], limits
    assert q.unheard == 12


async def test_a_caller_who_says_nothing_holds_a_rise_back_no_longer_than_the_settling_time() -> (
    None
):
    clock = FakeClock()
    q = CallQueue(max_active=16, max_waiting=16, clock=clock.now)
    idle = {"now": {"started": 0, "wait_seconds": 0.0, "dropped": 0}}
    keeper = LimitKeeper(
        q,
        lambda: idle,
        min_active=2,
        busy_wait_ms=BUSY_MS,
        interval_s=2.0,
        settle_s=8.0,
        clock=clock,
    )
    for i in range(16):
        q.enter(f"c{i}")
    keeper.start()
    limits = []
    for _ in range(6):
        await clock.advance(2.0)
        limits.append(q.limit)
    await keeper.stop()
    # No model work at all: one more a settling time apart.
    assert limits == [3, 3, 3, 3, 4, 4], limits


def test_the_line_counts_conversations_held_and_not_yet_heard() -> None:
    q = CallQueue(max_active=2, max_waiting=2)
    a, b, c = q.enter("a"), q.enter("b"), q.enter("c")
    assert a is not None and b is not None and c is not None
    assert q.unheard == 2  # c waits in line: not held
    q.heard(a)
    assert q.unheard == 1
    q.leave(b)  # c takes b's slot, unheard
    assert c.state == "active" and q.unheard == 1
    q.heard(c)
    assert q.unheard == 0
