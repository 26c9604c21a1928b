"""Just enough SDP offer parsing to decide, before answering, whether a codec matches."""

from __future__ import annotations

from dataclasses import dataclass, field

# RFC 3551 static payload types for the codecs pjsua2 can carry here.
STATIC_PT: dict[int, str] = {0: "PCMU", 3: "GSM", 8: "PCMA", 9: "G722"}


@dataclass(frozen=True)
class AudioOffer:
    """The audio formats an offer lists, as upper-case encoding names."""

    port: int
    formats: tuple[str, ...] = field(default_factory=tuple)


def sip_body(message: str) -> str:
    """Body of a SIP message (after the first empty line), or ``""``."""
    for sep in ("\r\n\r\n", "\n\n"):
        _head, found, body = message.partition(sep)
        if found:
            return body
    return ""


def parse_audio_offers(sdp: str) -> list[AudioOffer]:
    """Audio ``m=`` sections of an SDP body with their encoding names.

    Raises ``ValueError`` on an ``m=audio`` line that is not ``m=audio <port> <proto> <fmt>...``.
    """
    offers: list[AudioOffer] = []
    current: tuple[int, list[int]] | None = None
    rtpmap: dict[int, str] = {}

    def flush() -> None:
        if current is not None:
            port, pts = current
            names = tuple(rtpmap.get(pt) or STATIC_PT.get(pt, f"PT{pt}") for pt in pts)
            offers.append(AudioOffer(port, names))

    for raw in sdp.splitlines():
        line = raw.strip()
        if line.startswith("m="):
            flush()
            current, rtpmap = None, {}
            parts = line[2:].split()
            if parts and parts[0] == "audio":
                if len(parts) < 4 or not parts[1].split("/")[0].isdigit():
                    raise ValueError(f"malformed audio media line: {line!r}")
                pts = [int(p) for p in parts[3:] if p.isdigit()]
                current = (int(parts[1].split("/")[0]), pts)
        elif line.startswith("a=rtpmap:") and current is not None:
            pt_text, _, enc = line[len("a=rtpmap:") :].partition(" ")
            if pt_text.isdigit() and enc:
                rtpmap[int(pt_text)] = enc.split("/")[0].upper()
    flush()
    return offers


def has_common_codec(sdp: str, codecs: tuple[str, ...]) -> bool:
    """True if some audio section (port != 0) offers one of ``codecs``.

    An INVITE without SDP (offer in the 200 OK) is accepted: we make the offer then.
    """
    if not sdp.strip():
        return True
    wanted = {c.upper() for c in codecs}
    return any(
        offer.port != 0 and wanted.intersection(offer.formats) for offer in parse_audio_offers(sdp)
    )
