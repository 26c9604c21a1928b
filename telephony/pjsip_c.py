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
- ``refuse_strangers`` and ``watch_byes``: pjsip modules that see requests before pjsua
  does (``pjsip_endpt_register_module``).
- ``remove_call_stream``: a call's stream out of the conference bridge
  (``pjsua_conf_remove_port``, see ``telephony.stream_release``).
"""

from __future__ import annotations

import ctypes
import functools
import importlib
import re
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
    lib.pjsua_get_pjsip_endpt.argtypes = []
    lib.pjsua_get_pjsip_endpt.restype = ctypes.c_void_p
    lib.pjsip_endpt_register_module.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.pjsip_endpt_register_module.restype = ctypes.c_int
    lib.pjsip_rx_data_get_info.argtypes = [ctypes.c_void_p]
    lib.pjsip_rx_data_get_info.restype = ctypes.c_char_p
    lib.pjsua_call_get_conf_port.argtypes = [ctypes.c_int]
    lib.pjsua_call_get_conf_port.restype = ctypes.c_int
    lib.pjsua_conf_remove_port.argtypes = [ctypes.c_int]
    lib.pjsua_conf_remove_port.restype = ctypes.c_int
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


def _register_module(name: bytes, priority: int, on_rx: Callable[[int | None], int]) -> None:
    """A pjsip module of ``priority`` whose ``on_rx(rdata)`` sees each request it is
    reached by; 1 takes the request, 0 lets it go on. Kept for the library's life."""
    lib = _lib()
    callback = _ON_RX(on_rx)
    module = _PjsipModule()
    module.name = _PjStr(name, len(name))
    module.id = -1
    module.priority = priority
    module.on_rx_request = callback
    status = lib.pjsip_endpt_register_module(lib.pjsua_get_pjsip_endpt(), ctypes.byref(module))
    if status != 0:
        raise RuntimeError(f"pjsip_endpt_register_module failed: status {status}")
    _kept.extend((module, callback))


def _rx_info(rdata: int | None) -> bytes:
    """pjsip's one-line summary of a received message ("Request msg INVITE/cseq=1 ...")."""
    return bytes(_lib().pjsip_rx_data_get_info(rdata) or b"")


def refuse_strangers(on_drop: Callable[[], None]) -> None:
    """After ``libInit``: drop every request outside a dialog but a new INVITE."""

    def on_rx_request(rdata: int | None) -> int:
        if _rx_info(rdata).startswith(b"Request msg INVITE/"):
            return 0  # pjsua's call handler decides (the stamp)
        on_drop()
        return 1  # taken: nothing answered, nothing made

    _register_module(_MODULE_NAME, _PRIORITY_AFTER_DIALOGS, on_rx_request)


# --------------------------------------------------------------------------- streams
def remove_call_stream(call_index: int) -> bool:
    """Take call ``call_index``'s audio stream out of the conference bridge now.

    pjsua does the same when it tears the call's media down; its second removal finds the
    slot empty and only logs it. True if a stream was there to remove. The bridge removes
    the port at its next tick (``telephony.stream_release``).
    """
    lib = _lib()
    slot = int(lib.pjsua_call_get_conf_port(call_index))
    if slot <= 0:  # PJSUA_INVALID_ID, or no stream; 0 is the sound device, never a call's
        return False
    return int(lib.pjsua_conf_remove_port(slot)) == 0


# A BYE is seen after the transaction layer (16: a retransmission is answered there and
# never reaches here) and before the dialog layer (32), which hands it to the INVITE session
# that ends the call and tears its media down in the same step.
_PRIORITY_BEFORE_DIALOGS = 24
_BYE_MODULE_NAME = b"mod-bye-first"
#: pjsip_rx_data begins with its transport info (three pointers and an op key of 35) and
#: the receive time: 320 bytes on a 64-bit build; the packet's text follows
#: (``pkt_info.packet``, PJSIP_MAX_PKT_LEN = 4000 bytes). The text is looked for in the
#: first bytes, not trusted to an offset, and nothing past the packet buffer is read.
_PACKET_SEARCH_SPAN = 512
_RDATA_READ = 320 + 4000
_CALL_ID_RE = re.compile(rb"^(?:call-id|i)[ \t]*:[ \t]*([^\r\n]+?)[ \t]*\r?$", re.I | re.M)


def bye_call_id(raw: bytes) -> str | None:
    """The Call-ID of the BYE whose text begins somewhere in ``raw`` (None if none)."""
    start = raw.find(b"BYE ", 0, _PACKET_SEARCH_SPAN)
    if start < 0:
        return None
    head = raw[start:].split(b"\r\n\r\n", 1)[0].split(b"\0", 1)[0]
    m = _CALL_ID_RE.search(head)
    return m.group(1).decode("ascii", "replace") if m else None


def watch_byes(on_bye: Callable[[str | None], None]) -> None:
    """After ``libInit``: ``on_bye(call_id)`` for each BYE received, on the endpoint thread,
    before pjsip acts on it (the callback may block briefly; the BYE then goes on).
    ``call_id`` is None when pjsip took the message for a BYE but its Call-ID could not be
    read here: ``pjsip_rx_data`` no longer has the layout of the pjproject this was written
    for (its packet text is not where ``_RDATA_READ`` looks), which the caller makes seen."""

    def on_rx_request(rdata: int | None) -> int:
        if rdata and _rx_info(rdata).startswith(b"Request msg BYE/"):
            on_bye(bye_call_id(ctypes.string_at(rdata, _RDATA_READ)) or None)
        return 0  # never taken: pjsip goes on with it

    _register_module(_BYE_MODULE_NAME, _PRIORITY_BEFORE_DIALOGS, on_rx_request)
