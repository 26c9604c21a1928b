"""The few pjsip and pjsua C functions the node needs that pjsua2 does not wrap.

The pjsua2 library exports them, so they are called by ctypes on the loaded library (the
same handle as pjsua2's own). Endpoint thread only, like every other pjsua call.

- ``set_timers``: RFC 3261's transaction timers, scaled from T1 (``pjsip_tsx_set_timers``).
  Everything a worker retransmits and gives up on follows: a 200 OK unACKed for 64*T1 gets
  pjsip's BYE, and a BYE unanswered for 64*T1 ends its transaction. The defaults are
  RFC 3261's (T1 500 ms); a test sets a short T1 to see in seconds what takes a minute.
- ``calls_held``: the call slots pjsua holds (``pjsua_call_get_count``). A call pjsua has
  reported ended still holds its slot while its BYE lasts (64*T1 when the caller has gone),
  and a call beyond the slots pjsua has gets 486 from pjsua itself.
"""

from __future__ import annotations

import ctypes
import functools
import importlib

#: RFC 3261's ratios to T1: T2 (the longest retransmit interval) 4 s, T4 (how long a
#: message may stay in the network) 5 s, Timer D (a UAC's wait for retransmitted final
#: responses) 32 s, at T1 = 500 ms.
T2_PER_T1 = 8
T4_PER_T1 = 10
TD_PER_T1 = 64


@functools.cache
def _lib() -> ctypes.CDLL:
    binding = importlib.import_module("pjsua2._pjsua2")
    lib = ctypes.CDLL(binding.__file__)  # already loaded: the same handle
    lib.pjsip_tsx_set_timers.argtypes = [ctypes.c_uint] * 4
    lib.pjsip_tsx_set_timers.restype = None
    lib.pjsua_call_get_count.argtypes = []
    lib.pjsua_call_get_count.restype = ctypes.c_uint
    return lib


def set_timers(t1_ms: int) -> None:
    """After ``libInit`` and before the first transaction."""
    _lib().pjsip_tsx_set_timers(t1_ms, T2_PER_T1 * t1_ms, T4_PER_T1 * t1_ms, TD_PER_T1 * t1_ms)


def calls_held() -> int:
    """Call slots pjsua holds now: live calls, calls being set up, and ended calls whose
    BYE is not over."""
    return int(_lib().pjsua_call_get_count())


def transaction_s(t1_ms: int) -> float:
    """64*T1: the longest a transaction lives, and an answered INVITE waits for its ACK."""
    return 64 * t1_ms / 1000
