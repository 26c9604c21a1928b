"""How soon this node decides its callers' finished requests: the turn gap it keeps now.

The shared model pool's waits say when model work queues behind other work; they do not say
when each piece of work runs slowly because the CPU is shared with something the pool does
not see (another process on the host, a neighbour on a shared machine, the GIL held by the
node's own audio). On a day this 2-core machine ran its recognizer at a third of its usual
speed, a node holding 3-9 conversations took 2.5 s (P50) over a turn's first hearing; its
pool's waits read calm between the busy readings, and the limit rose again each time.

The turn gap itself is mix-proof: a turn that ended early (``eot_reason == "early"``: its
words read as a whole request the operator's words answer, once the pause's pass was
ready) was decided as soon as the node could decide it, so the time from the caller's last
word to that decision is the node's speed, whatever the pass did (one hearing or two). That
is the figure a caller hears: a finished request decided within 250-300 ms keeps a human
turn gap; above ~500 ms callers talk over the bot. Turns that waited on purpose
(a question, "not sure", a caller who may go on) wait on their rule's silence, not on the
CPU, and are not counted.

``TurnPace`` counts those turns and their seconds since the node started, as the pool counts
its work; ``bot.queue.limit`` reads the difference over each interval.
"""

from __future__ import annotations

from bot.pipeline.turn import Turn

#: The keys of ``TurnPace.counts``.
PACE_COUNTS = ("early", "eot_seconds")


class TurnPace:
    """Turns that ended early, and the seconds from their caller's last word to their
    decision, in all (fed every turn by the node's turn sink, on the event loop)."""

    def __init__(self) -> None:
        self._early = 0
        self._eot_s = 0.0

    def observe(self, turn: Turn) -> None:
        """Count ``turn`` if it ended early and both its times are known."""
        if turn.eot_reason != "early":
            return
        eot_ms = turn.since_speech_end_ms().get("eot_decided")
        if eot_ms is None or eot_ms < 0:
            return
        self._early += 1
        self._eot_s += eot_ms / 1000.0

    def counts(self) -> dict[str, float]:
        """Since the node started: ``early`` turns and their ``eot_seconds``."""
        return {"early": float(self._early), "eot_seconds": self._eot_s}
