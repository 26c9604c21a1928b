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
from collections.abc import Callable

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


# --------------------------------------------------------------------------- strangers
# A pjsip module placed after the dialog layer (which takes every request of a known
# dialog, priority 32) and before pjsua's own modules (64: calls, presence, instant
# messages). It sees only requests outside every dialog: a new INVITE goes on to pjsua
# (whose incoming-call handler checks the front's stamp); anything else (SUBSCRIBE, MESSAGE,
# OPTIONS, NOTIFY, REFER, a BYE of no dialog...) is dropped unanswered: behind a front,
# none of them comes from the front, which answers them all itself. Without this, pjsua
# answers an out-of-dialog SUBSCRIBE with 200 and then sends NOTIFYs to whatever address
# its Contact names, and a MESSAGE with 200.
_PRIORITY_AFTER_DIALOGS = 40
_ON_RX = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)


class _PjStr(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_char_p), ("slen", ctypes.c_ssize_t)]


class _PjsipModule(ctypes.Structure):
    """``pjsip_module`` (pjsip/sip_module.h)."""

    _fields_ = [
        ("prev", ctypes.c_void_p),
        ("next", ctypes.c_void_p),
        ("name", _PjStr),
        ("id", ctypes.c_int),
        ("priority", ctypes.c_int),
        ("load", ctypes.c_void_p),
        ("start", ctypes.c_void_p),
        ("stop", ctypes.c_void_p),
        ("unload", ctypes.c_void_p),
        ("on_rx_request", _ON_RX),
        ("on_rx_response", ctypes.c_void_p),
        ("on_tx_request", ctypes.c_void_p),
        ("on_tx_response", ctypes.c_void_p),
        ("on_tsx_state", ctypes.c_void_p),
    ]


_MODULE_NAME = b"mod-refuse-strangers"
_kept: list[object] = []  # the module and its callback live as long as the library


def refuse_strangers(on_drop: Callable[[], None]) -> None:
    """After ``libInit``: drop every request outside a dialog but a new INVITE."""
    lib = _lib()
    lib.pjsua_get_pjsip_endpt.argtypes = []
    lib.pjsua_get_pjsip_endpt.restype = ctypes.c_void_p
    lib.pjsip_endpt_register_module.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.pjsip_endpt_register_module.restype = ctypes.c_int
    lib.pjsip_rx_data_get_info.argtypes = [ctypes.c_void_p]
    lib.pjsip_rx_data_get_info.restype = ctypes.c_char_p

    def on_rx_request(rdata: int | None) -> int:
        info = lib.pjsip_rx_data_get_info(rdata) or b""
        # "Request msg INVITE/cseq=1 (rdata0x...)"
        if info.startswith(b"Request msg INVITE/"):
            return 0  # pjsua's call handler decides (the stamp)
        on_drop()
        return 1  # taken: nothing answered, nothing made

    callback = _ON_RX(on_rx_request)
    module = _PjsipModule()
    module.name = _PjStr(_MODULE_NAME, len(_MODULE_NAME))
    module.id = -1
    module.priority = _PRIORITY_AFTER_DIALOGS
    module.on_rx_request = callback
    status = lib.pjsip_endpt_register_module(lib.pjsua_get_pjsip_endpt(), ctypes.byref(module))
    if status != 0:
        raise RuntimeError(f"pjsip_endpt_register_module failed: status {status}")
    _kept.extend((module, callback))
