"""SRTP settings as pjsua2 takes them: SDES keying (RFC 4568) only, no secure-signalling check.

pjsua2 2.15 has libsrtp compiled in. DTLS-SRTP keying is left out: the wheel's OpenSSL is
1.0.2k. ``srtpSecureSignaling`` is 0 because the signalling here is plain UDP: pjsua would
otherwise refuse a=crypto that did not come over sips:/TLS (the keys are then only as private
as the network the SIP runs on; see docs/design.md, "Transports").
"""

from __future__ import annotations

from typing import Any

import pjsua2 as pj

from telephony.config import SrtpUse

#: ``SrtpUse`` -> pjmedia's SRTP use.
SRTP_USE: dict[SrtpUse, int] = {
    "optional": pj.PJMEDIA_SRTP_OPTIONAL,
    "mandatory": pj.PJMEDIA_SRTP_MANDATORY,
    "off": pj.PJMEDIA_SRTP_DISABLED,
}


def configure(media_config: Any, use: SrtpUse) -> None:
    """Set an ``AccountConfig.mediaConfig`` to ``use`` SRTP, keyed by SDES only.

    ``off`` sets the SRTP use alone (pjsua's other SRTP settings keep their defaults).
    """
    media_config.srtpUse = SRTP_USE[use]
    if use == "off":
        return
    media_config.srtpSecureSignaling = 0
    keyings = media_config.srtpOpt.keyings
    keyings.clear()
    keyings.append(pj.PJMEDIA_SRTP_KEYING_SDES)
