"""After ``freeze_startup_objects`` a call's cyclic garbage is collected soon after the
call, however many objects the node made at start; without it, not for a long while.

Each case runs in a Python of its own: frozen objects stay frozen for a process's life."""

import subprocess
import sys
import textwrap

from testkit.botproc import ROOT

SCRIPT = textwrap.dedent(
    """
    import gc, sys, weakref
    from node.heap import freeze_startup_objects

    # The node at start: many long-lived tracked objects (models, libraries, indexes).
    kept = [[i] for i in range(600_000)]
    gc.collect()
    if sys.argv[1] == "freeze":
        freeze_startup_objects()

    class CallObjects:  # a call's objects: a cycle, with what the call made
        def __init__(self):
            self.me = self
            self.parts = [[i] for i in range(1000)]

    collected = []
    for n in range(40):
        call = CallObjects()
        weakref.finalize(call, collected.append, n)
        gc.collect(1)  # the call lasted: it went through the young generations
        del call
    print(len(collected))
    """
)


def ended_calls_collected(mode: str) -> int:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return int(out.stdout.split()[-1])


def test_ended_calls_are_collected_once_the_start_is_frozen() -> None:
    # a full collection after every 11 young ones (the oldest generation's threshold)
    assert ended_calls_collected("freeze") >= 30


def test_without_it_ended_calls_wait_for_a_full_collection() -> None:
    assert ended_calls_collected("plain") == 0
