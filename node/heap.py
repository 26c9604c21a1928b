"""The collector after start: what the node built before its first call is left out of
Python's cyclic garbage collection, so that a call's garbage is collected soon after the
call.

A call's objects are reference cycles (its pipeline's stages link both ways, tasks and
their frames refer back to their owners), so they are freed by the cyclic collector, not
when the call ends. CPython collects the oldest generation only once the objects that
reached it since the last full collection number a quarter of those that were there
then; a node starts with some 570,000 tracked objects (models, libraries, the profile's
indexes), so a full collection waited until some 143,000 more had reached the oldest
generation. Until then every ended call's objects stayed in memory, with what they hold,
and each full collection, when it came, walked every object of the node on the event
loop. ``gc.freeze()`` moves the objects alive at start to a permanent generation that
collections skip: full collections then come as often as the oldest generation's
threshold allows (every eleventh collection of the middle one), and walk only what was
made since the start.
"""

from __future__ import annotations

import gc


def freeze_startup_objects() -> int:
    """Collect, then move every object alive now out of the collector's generations, and
    collect again (an empty oldest generation: its count, against which the next full
    collection is weighed, starts from nothing). Returns how many objects were frozen.

    Objects frozen are never collected as cycles: called once, when the node has loaded
    what it keeps for its lifetime and before its first call."""
    gc.collect()
    gc.freeze()
    gc.collect()
    return gc.get_freeze_count()
