"""Who may send the SIP front how much: per-source and node-wide rate limits, and bans.

The front asks ``FloodGuard.admit`` for every datagram before it reads it: a source over its
rate, a banned source, or any source while the node as a whole is over its rate, is dropped
without an answer (an answer would double a flood) and before anything is made for it (no
route, no relay socket, no worker message). A source whose datagrams keep being dropped,
whose requests keep failing authentication, or whose calls' 200 OKs keep going unACKed (each
holds a call slot for 64*T1 and its BYE another 64*T1: no phone does that) is banned for a
while.

Both tables (sources, bans) are bounded: when one is full, the entry seen least recently
(sources) or ending soonest (bans) makes room, and a warning says so once a minute.
"""

from __future__ import annotations

import ipaddress
import logging
from collections import OrderedDict
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, IPvAnyNetwork

log = logging.getLogger(__name__)

FULL_TABLE_LOG_EVERY_S = 60.0

GUARD_KEYS = (
    "front_dropped_rate",  # a source over its own rate
    "front_dropped_node_rate",  # the node over its rate
    "front_dropped_banned",  # a banned source
    "front_bans",  # bans made
    "front_auth_failures",
    "front_sources_evicted",  # the source table was full
    "front_bans_evicted",  # the ban table was full
    "front_upstream_spared",  # a ban an upstream proxy would have had
)


class FrontLimits(BaseModel):
    """Rate limits and bans of the SIP front (``SWITCHBOARD_SIP__LIMITS__<FIELD>``).

    The defaults let a trunk start about 50 calls a second (new calls and their CANCELs and
    OPTIONS reach the front; the rest of a call goes to its worker's address).
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    #: Datagrams a second one source address may send the front, sustained...
    per_source_rate: float = Field(50.0, gt=0.0)
    #: ...and at once (a token bucket of this size).
    per_source_burst: int = Field(200, ge=1)
    #: Datagrams a second the front takes from every source together.
    node_rate: float = Field(1000.0, gt=0.0)
    node_burst: int = Field(2000, ge=1)
    #: A source with this many datagrams dropped for its rate within ``ban_window_s``...
    ban_after_drops: int = Field(200, ge=1)
    #: ...or this many failed authentications (wrong digest, not an allowed peer)...
    ban_after_auth_failures: int = Field(10, ge=1)
    ban_window_s: float = Field(10.0, gt=0.0)
    #: ...or this many answered calls whose 200 OK it never ACKed within
    #: ``unacked_window_s`` (an unACKed call is known only 64*T1 after its answer)...
    ban_after_unacked: int = Field(3, ge=1)
    unacked_window_s: float = Field(600.0, gt=0.0)
    #: ...is banned (every datagram dropped) for this long.
    ban_s: float = Field(300.0, ge=0.0)
    #: Proxies and SBCs in front of the node (addresses or networks): every caller behind
    #: one comes from its address, so it is never banned (one caller's flood or unACKed
    #: calls would cut off them all) and not held to ``per_source_rate``; the node-wide rate
    #: still applies. Rate-limit and ban callers on the proxy itself (``docs/proxy.md``).
    upstreams: list[IPvAnyNetwork] = []
    #: Sources tracked at once; the least recently seen is forgotten beyond it.
    max_sources: int = Field(10_000, ge=1)
    #: Bans held at once; the one ending soonest is lifted beyond it.
    max_bans: int = Field(10_000, ge=1)
    #: Call-IDs the front routes at once (calls and INVITE transactions); a new INVITE
    #: beyond it gets 503.
    max_routes: int = Field(4096, ge=1)
    #: New calls one source may have that are not yet confirmed (INVITEs not answered,
    #: and answers not ACKed); its next INVITE gets 503 + Retry-After, so that one source
    #: cannot hold every call slot until its unACKed calls get it banned. Upstreams are
    #: spared (every caller behind them shares their address).
    max_unconfirmed_per_source: int = Field(4, ge=1)


@dataclass(slots=True)
class _Source:
    tokens: float
    last: float
    window_start: float
    drops: int = 0
    auth_failures: int = 0


class _Bucket:
    def __init__(self, rate: float, burst: int, now: float) -> None:
        self.rate, self.burst = rate, burst
        self.tokens, self.last = float(burst), now

    def take(self, now: float) -> bool:
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
        self.last = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class FloodGuard:
    """Per-source token buckets, a node-wide bucket and temporary bans; see the module doc."""

    def __init__(self, limits: FrontLimits, now: float) -> None:
        self.limits = limits
        self.sources: OrderedDict[str, _Source] = OrderedDict()
        self.bans: dict[str, float] = {}  # source -> when the ban ends
        #: source -> (when its first unACKed call in the window was reported, how many);
        #: apart from ``sources``, whose idle entries go after seconds.
        self.unacked_seen: OrderedDict[str, tuple[float, int]] = OrderedDict()
        self.node = _Bucket(limits.node_rate, limits.node_burst, now)
        self.counters = dict.fromkeys(GUARD_KEYS, 0)
        self._full_logged: dict[str, float] = {}

    def upstream(self, source: str) -> bool:
        """Whether ``source`` is a proxy the operator put in front of the node."""
        if not self.limits.upstreams:
            return False
        try:
            addr = ipaddress.ip_address(source)
        except ValueError:
            return False
        return any(addr in net for net in self.limits.upstreams)

    def admit(self, source: str, now: float) -> bool:
        """Whether a datagram from ``source`` may be read now (and counts it)."""
        c = self.counters
        if self.upstream(source):
            if not self.node.take(now):
                c["front_dropped_node_rate"] += 1
                return False
            return True
        if self.bans:
            until = self.bans.get(source)
            if until is not None:
                if now < until:
                    c["front_dropped_banned"] += 1
                    return False
                del self.bans[source]
        st = self._source(source, now)
        lim = self.limits
        st.tokens = min(lim.per_source_burst, st.tokens + (now - st.last) * lim.per_source_rate)
        st.last = now
        if st.tokens < 1.0:
            c["front_dropped_rate"] += 1
            self._window(st, now)
            st.drops += 1
            if st.drops >= lim.ban_after_drops:
                self.ban(source, now, f"{st.drops} datagrams over its rate")
            return False
        st.tokens -= 1.0
        if not self.node.take(now):
            c["front_dropped_node_rate"] += 1
            return False
        return True

    def auth_failed(self, source: str, now: float) -> None:
        """A request from ``source`` failed authentication; enough of them ban it."""
        self.counters["front_auth_failures"] += 1
        st = self._source(source, now)
        self._window(st, now)
        st.auth_failures += 1
        if st.auth_failures >= self.limits.ban_after_auth_failures:
            self.ban(source, now, f"{st.auth_failures} failed authentications")

    def unacked(self, source: str, now: float) -> None:
        """A call from ``source`` was answered and never ACKed; enough of them ban it."""
        lim = self.limits
        start, count = self.unacked_seen.pop(source, (now, 0))
        if now - start > lim.unacked_window_s:
            start, count = now, 0
        count += 1
        if count >= lim.ban_after_unacked:
            self.ban(source, now, f"{count} answered calls never ACKed")
            return
        if len(self.unacked_seen) >= lim.max_sources:
            self.unacked_seen.popitem(last=False)
        self.unacked_seen[source] = (start, count)

    def banned(self, source: str, now: float) -> bool:
        until = self.bans.get(source)
        return until is not None and now < until

    def ban(self, source: str, now: float, why: str) -> None:
        if self.limits.ban_s <= 0 or self.banned(source, now):
            return
        if self.upstream(source):
            self.counters["front_upstream_spared"] += 1
            log.warning("SIP front: upstream %s not banned (%s): limit callers on it", source, why)
            return
        if len(self.bans) >= self.limits.max_bans:
            soonest = min(self.bans, key=self.bans.__getitem__)
            del self.bans[soonest]
            self.counters["front_bans_evicted"] += 1
            self._table_full("bans", "max_bans", now)
        self.bans[source] = now + self.limits.ban_s
        self.counters["front_bans"] += 1
        self.sources.pop(source, None)
        self.unacked_seen.pop(source, None)
        log.warning("SIP front: banned %s for %.0f s (%s)", source, self.limits.ban_s, why)

    def _source(self, source: str, now: float) -> _Source:
        st = self.sources.get(source)
        if st is not None:
            self.sources.move_to_end(source)
            return st
        if len(self.sources) >= self.limits.max_sources:
            self.sources.popitem(last=False)
            self.counters["front_sources_evicted"] += 1
            self._table_full("sources", "max_sources", now)
        st = _Source(tokens=float(self.limits.per_source_burst), last=now, window_start=now)
        self.sources[source] = st
        return st

    def _window(self, st: _Source, now: float) -> None:
        if now - st.window_start > self.limits.ban_window_s:
            st.window_start, st.drops, st.auth_failures = now, 0, 0

    def _table_full(self, table: str, setting: str, now: float) -> None:
        last = self._full_logged.get(table)
        if last is None or now - last >= FULL_TABLE_LOG_EVERY_S:
            self._full_logged[table] = now
            log.warning(
                "SIP front: the %s table is full (%d, SWITCHBOARD_SIP__LIMITS__%s): "
                "dropping the oldest entries",
                table,
                getattr(self.limits, setting),
                setting.upper(),
            )

    def sweep(self, now: float) -> None:
        """Lift ended bans and forget sources idle long enough to have a full bucket again."""
        for source in [s for s, until in self.bans.items() if now >= until]:
            del self.bans[source]
        lim = self.limits
        while self.unacked_seen:  # oldest first: reinserted at each report
            source, (start, _) = next(iter(self.unacked_seen.items()))
            if now - start <= lim.unacked_window_s:
                break
            del self.unacked_seen[source]
        idle = max(lim.ban_window_s, lim.per_source_burst / lim.per_source_rate)
        while self.sources:
            source, st = next(iter(self.sources.items()))
            if now - st.last <= idle:
                break
            del self.sources[source]
