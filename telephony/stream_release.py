"""A call's audio stream leaves the conference bridge before its media is torn down.

pjproject 2.15.1 (the pjsua2 wheel's) has a race between the bridge's clock thread and
the thread that ends a call: the clock thread sends the stream's RTP through the call's
UDP media transport, and pjsua closes that transport when the call ends, on the endpoint
thread. A send that checked the transport was running just before the close then passes
a null socket key to ``pj_ioqueue_sendto``, whose assertion aborts the whole process: a
worker and every call on it. (Seen once in the test dialer, after a few thousand calls;
fixed upstream in pjproject #5016, in no released wheel yet.)

So the stream goes first: ``release`` asks the bridge to remove the call's stream port,
and waits until the clock has ticked twice. The bridge applies a removal at the start
of a tick, so after that no tick calls the stream's ``put_frame`` again, and no RTP or
RTCP is sent from the clock thread; the teardown that follows (pjsua's own removal finds
the slot empty) races with nothing. Every ending goes this way: a hangup of ours before
its BYE, a caller's BYE before pjsip acts on it (``pjsip_c.watch_byes``).

The ticks are counted by a ``Metronome``: a port connected to nothing, which the bridge
still calls at every tick, late in the tick (its "heartbeat" frame; two ticks counted that
way are one whole tick after the removal). It costs nothing while no call is up: the bridge's
clock stops then. (Connected to the sound-device slot instead, it kept the clock running on
an idle node: 3% of a core more.)
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pjsua2 as pj

from telephony import pjsip_c
from telephony.framebuf import pcm_port_format

#: Heartbeats to wait for after the removal. The first may be the tick in progress (which
#: may still send the stream's RTP after the metronome's heartbeat); the second is the next
#: tick's, which began by applying the removal.
TICKS = 2
#: Longest wait: ten ticks. A clock that has stopped (the endpoint shutting down) sends
#: nothing either.
WAIT_CAP_S = 0.2


class Metronome(pj.AudioMediaPort):  # type: ignore[misc]
    """Counts the bridge's ticks. Made once per endpoint; freed after the clock stops."""

    def __init__(self, sample_rate: int) -> None:
        super().__init__()
        self.ticks = 0
        self._ticked = threading.Condition()
        self.createPort("metronome", pcm_port_format(sample_rate))

    def onFrameReceived(self, frame: Any) -> None:
        with self._ticked:
            self.ticks += 1
            self._ticked.notify_all()

    def wait_ticks(self, count: int = TICKS, cap_s: float = WAIT_CAP_S) -> bool:
        """Block until ``count`` more ticks have passed; False if ``cap_s`` ran out first."""
        deadline = time.monotonic() + cap_s
        with self._ticked:
            goal = self.ticks + count
            while self.ticks < goal:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._ticked.wait(left)
        return True


def release(call_index: int, metronome: Metronome | None) -> bool:
    """Endpoint thread: the call's stream out of the bridge, and the clock past it.

    True if a stream was removed and the clock was seen to tick past it (or there is no
    metronome to watch it); False if the call had no stream in the bridge, or the clock
    did not tick twice within ``WAIT_CAP_S`` (the stream was removed all the same).
    """
    if not pjsip_c.remove_call_stream(call_index):
        return False
    return metronome.wait_ticks() if metronome is not None else True
