"""How soon this node decides its callers' finished requests: the turn gap it keeps now.

The shared model pool's waits say when model work queues behind other work; they do not say
when each piece of work runs slowly because the CPU is shared with something the pool does
not see (another process on the host, a neighbour on a shared machine, the GIL held by the
node's own audio). On a day this 2-core machine ran its recognizer at a third of its usual
speed, a node holding 3-9 conversations took 2.5 s (P50) over a turn's first hearing; its
pool's waits read calm between the busy readings, and the limit rose again each time.

The turn gap itself is mix-proof: a turn whose words the operator's own words answer (a
cached intent, a knowledge entry: ``PACED_ROUTES``) and whose pause gave no reason to wait
(a hang-up to be sure of, a greeting that often opens a request) was decided as soon as the
node could decide it: early, on the pause's pass, on a node with room to spare; at the end
of the silence, or later, on one behind (its pass not ready in time). So the time from the
caller's last word to that turn's route is the node's speed, whatever the pass did (one
hearing or two). That is the figure a caller hears: a finished request decided within
250-300 ms keeps a human turn gap; above ~500 ms callers talk over the bot. Turns that
waited on purpose (a question, "not sure", a caller who may go on) wait on their rule's
silence, not on the CPU, and are not counted.

``TurnPace`` counts those turns and their seconds since the node started, as the pool counts
its work; ``bot.queue.limit`` reads the difference over each interval.
"""

from __future__ import annotations

from bot.pipeline.turn import Turn

#: The routes of an answer in the operator's own words: decided as soon as the node can.
PACED_ROUTES = frozenset({"exact", "semantic", "knowledge"})


class TurnPace:
    """Finished requests (``PACED_ROUTES``, no reason to wait) and the seconds from their
    caller's last word to their route, in all (fed every turn by the node's turn sink, on
    the event loop)."""

    def __init__(self) -> None:
        self._turns = 0
        self._seconds = 0.0

    def observe(self, turn: Turn) -> None:
        """Count ``turn`` if it is such a request and its times are known."""
        if turn.route not in PACED_ROUTES or turn.eot_reason == "max_turn":
            return
        reading = turn.pause_reading
        if reading is not None and reading.wait is not None:
            return  # it waited on purpose
        since = turn.since_speech_end_ms()
        decided_ms = since.get("route_decided", since.get("eot_decided"))
        if decided_ms is None or decided_ms < 0:
            return
        self._turns += 1
        self._seconds += decided_ms / 1000.0

    def counts(self) -> dict[str, float]:
        """Since the node started: such ``finished`` requests and their ``decided_seconds``."""
        return {"finished": float(self._turns), "decided_seconds": self._seconds}
