"""The node's one count of calls, SIP and browser: its call limit and its drain.

A node takes at most ``SWITCHBOARD_SIP__MAX_CALLS`` calls, whichever transport brings them.
A new SIP call is decided in the SIP front (``telephony.sip_dispatch``): an INVITE goes to
a worker slot with a place free while the node's places are not all taken, else it is
answered 503. A browser call holds one of those places (``SipServer.hold_place``) from its
offer to its end (``CallPlaces.take_browser``, the ``take_place`` of ``WebRtcCalls``): the
front counts it with its own calls, and a browser offer finds no place when phone calls
have taken them all. The place is the node's, not a worker's: a worker that dies and comes
back does not take it. The drain waits for both kinds of call.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from bot.tasks import cancel_and_wait
from telephony.server import SipServer
from telephony.webrtc import CallRefused, WebRtcCalls


class CallPlaces:
    """Places for calls on one node: the SIP front's, which browser calls take too."""

    def __init__(self) -> None:
        #: The node's SIP server, once started: until then no browser call is taken.
        self.sip: SipServer | None = None
        self.browser: WebRtcCalls | None = None

    @property
    def limit(self) -> int:
        return 0 if self.sip is None else self.sip.call_limit

    @property
    def taken(self) -> int:
        """Places taken: SIP calls up or being set up, and browser calls."""
        if self.sip is None:
            return 0
        return self.sip.places_taken

    @property
    def live(self) -> tuple[int, int]:
        """Calls in progress: SIP (media up) and browser (offers being connected too)."""
        sip = 0 if self.sip is None else self.sip.active_calls
        return sip, 0 if self.browser is None else self.browser.in_progress

    def take_browser(self) -> Callable[[], None]:
        """Hold a place for a browser call; returns what frees it. ``CallRefused`` (503)
        before the node answers calls, and when every place is taken."""
        sip = self.sip
        if sip is None:
            raise CallRefused(
                "the node is starting: it takes calls once its models are loaded",
                node_full=True,
            )
        give_back = sip.hold_place()
        if give_back is None:
            raise CallRefused(
                f"the node is at its call limit ({self.taken} of {self.limit} calls, phone "
                "and browser, in progress or being set up)",
                node_full=True,
            )
        return give_back

    async def drain(self, max_s: float, *, give_up: asyncio.Event) -> bool:
        """Take no new call (SIP: 503 from the front; browser: 503 to the offer) and wait up
        to ``max_s`` for the calls in progress, of both kinds, to end. True once none is
        left; False after ``max_s``, or when ``give_up`` is set first."""
        deadline = time.monotonic() + max_s
        browser = self.browser
        if browser is not None:
            browser.draining = True
        if self.sip is not None and not await self.sip.drain(max_s, give_up=give_up):
            return False
        if browser is None or browser.in_progress == 0:
            return True
        waits = [asyncio.ensure_future(browser.wait_idle()), asyncio.ensure_future(give_up.wait())]
        try:
            await asyncio.wait(
                waits,
                timeout=max(0.0, deadline - time.monotonic()),
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            await cancel_and_wait(*waits)
        return browser.in_progress == 0
