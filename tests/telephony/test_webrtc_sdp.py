"""The browser offer's check (telephony/webrtc_sdp.py): browsers' offers pass, each malformed
or unconnectable one is refused with a reason naming its line, and no input makes it raise
anything but ``SdpError``, nor pass an offer aiortc's own parser cannot read."""

from __future__ import annotations

import pytest
from aiortc.sdp import SessionDescription
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from telephony.webrtc_sdp import MAX_SDP_CHARS, SdpError, check_offer

FP256 = ":".join(f"{i:02X}" for i in range(32))

#: What Chrome sends for a microphone-only call (mDNS host candidate, trickle ICE); the
#: addresses here, and in Firefox's, are documentation addresses (RFC 5737): no one's.
CHROME = (
    "v=0\r\n"
    "o=- 4611731400430051336 2 IN IP4 127.0.0.1\r\n"
    "s=-\r\n"
    "t=0 0\r\n"
    "a=group:BUNDLE 0\r\n"
    "a=extmap-allow-mixed\r\n"
    "a=msid-semantic: WMS 5f1e3c1e-7ac4-4d1c-9d56-0a6b2f1f3e11\r\n"
    "m=audio 9 UDP/TLS/RTP/SAVPF 111 63 9 0 8 13 110 126\r\n"
    "c=IN IP4 0.0.0.0\r\n"
    "a=rtcp:9 IN IP4 0.0.0.0\r\n"
    "a=candidate:1467250027 1 udp 2122260223 192.0.2.10 46243 typ host generation 0 "
    "network-id 1\r\n"
    "a=candidate:3141592653 1 udp 2122194687 6f0c2a9e-3b1d-4e2f-8a7b-1c2d3e4f5a6b.local "
    "50000 typ host generation 0 network-id 2 network-cost 10\r\n"
    "a=ice-ufrag:6xwu\r\n"
    "a=ice-pwd:y8cHblT4P8M4XhXpqkAeeVXz\r\n"
    "a=ice-options:trickle\r\n"
    f"a=fingerprint:sha-256 {FP256}\r\n"
    "a=setup:actpass\r\n"
    "a=mid:0\r\n"
    "a=extmap:1 urn:ietf:params:rtp-hdrext:ssrc-audio-level\r\n"
    "a=extmap:2 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time\r\n"
    "a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01\r\n"
    "a=extmap:4 urn:ietf:params:rtp-hdrext:sdes:mid\r\n"
    "a=sendrecv\r\n"
    "a=msid:5f1e3c1e-7ac4-4d1c-9d56-0a6b2f1f3e11 8d2f0b7e-1a2b-4c3d-9e8f-7a6b5c4d3e2f\r\n"
    "a=rtcp-mux\r\n"
    "a=rtcp-rsize\r\n"
    "a=rtpmap:111 opus/48000/2\r\n"
    "a=rtcp-fb:111 transport-cc\r\n"
    "a=fmtp:111 minptime=10;useinbandfec=1\r\n"
    "a=rtpmap:63 red/48000/2\r\n"
    "a=fmtp:63 111/111\r\n"
    "a=rtpmap:9 G722/8000\r\n"
    "a=rtpmap:0 PCMU/8000\r\n"
    "a=rtpmap:8 PCMA/8000\r\n"
    "a=rtpmap:13 CN/8000\r\n"
    "a=rtpmap:110 telephone-event/48000\r\n"
    "a=rtpmap:126 telephone-event/8000\r\n"
    "a=ssrc:3541250196 cname:q3Dx0Wn+bJnfcozz\r\n"
    "a=ssrc:3541250196 msid:5f1e3c1e-7ac4-4d1c-9d56-0a6b2f1f3e11 "
    "8d2f0b7e-1a2b-4c3d-9e8f-7a6b5c4d3e2f\r\n"
)

#: What Firefox sends: fingerprint and ICE options in the session part, braces in ids.
FIREFOX = (
    "v=0\r\n"
    "o=mozilla...THIS_IS_SDPARTA-99.0 7010297003217000567 0 IN IP4 0.0.0.0\r\n"
    "s=-\r\n"
    "t=0 0\r\n"
    f"a=fingerprint:sha-256 {FP256}\r\n"
    "a=group:BUNDLE 0\r\n"
    "a=ice-options:trickle\r\n"
    "a=msid-semantic:WMS *\r\n"
    "m=audio 9 UDP/TLS/RTP/SAVPF 109 9 0 8 101\r\n"
    "c=IN IP4 0.0.0.0\r\n"
    "a=candidate:0 1 UDP 2122252543 192.0.2.11 50795 typ host\r\n"
    "a=candidate:1 1 TCP 2105524479 192.0.2.11 9 typ host tcptype active\r\n"
    "a=sendrecv\r\n"
    "a=end-of-candidates\r\n"
    "a=extmap:1 urn:ietf:params:rtp-hdrext:ssrc-audio-level\r\n"
    "a=extmap:2/recvonly urn:ietf:params:rtp-hdrext:csrc-audio-level\r\n"
    "a=extmap:3 urn:ietf:params:rtp-hdrext:sdes:mid\r\n"
    "a=fmtp:109 maxplaybackrate=48000;stereo=1;useinbandfec=1\r\n"
    "a=fmtp:101 0-15\r\n"
    "a=ice-pwd:4b5e2c1a9f8d7e6b5a4c3d2e1f0a9b8c\r\n"
    "a=ice-ufrag:1a2b3c4d\r\n"
    "a=mid:0\r\n"
    "a=msid:{7d6c5b4a-3e2f-1a0b-9c8d-7e6f5a4b3c2d} {1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d}\r\n"
    "a=rtcp-mux\r\n"
    "a=rtpmap:109 opus/48000/2\r\n"
    "a=rtpmap:9 G722/8000/1\r\n"
    "a=rtpmap:0 PCMU/8000\r\n"
    "a=rtpmap:8 PCMA/8000\r\n"
    "a=rtpmap:101 telephone-event/8000/1\r\n"
    "a=setup:actpass\r\n"
    "a=ssrc:2655508255 cname:{735484ea-4f6c-f74a-bd66-7425f8476c2e}\r\n"
)


def _edit(sdp: str, old: str, new: str) -> str:
    assert old in sdp, old
    return sdp.replace(old, new)


def _without(sdp: str, prefix: str) -> str:
    kept = [line for line in sdp.split("\r\n") if not line.startswith(prefix)]
    assert len(kept) < len(sdp.split("\r\n")), prefix
    return "\r\n".join(kept)


@pytest.mark.parametrize("sdp", [CHROME, FIREFOX], ids=["chrome", "firefox"])
def test_browsers_offers_pass_unchanged(sdp: str) -> None:
    assert check_offer(sdp) == sdp


def test_bare_lf_line_ends_are_taken_and_passed_on_as_crlf() -> None:
    """RFC 8866 section 5: a parser should accept a record ended by a newline alone."""
    assert check_offer(CHROME.replace("\r\n", "\n")) == CHROME
    mixed = CHROME.replace("a=rtcp-mux\r\n", "a=rtcp-mux\n")
    assert check_offer(mixed) == CHROME
    assert check_offer(CHROME.removesuffix("\r\n")) == CHROME


#: (offer, words the reason must have): each refused offer names its line and the fault.
REFUSED = {
    "port not a number": (
        _edit(CHROME, "m=audio 9 ", "m=audio x "),
        "line 8 (m=audio): the port is not a number",
    ),
    "video only": (
        _edit(CHROME, "m=audio 9 ", "m=video 9 "),
        "line 8: m=video, and no m=audio line",
    ),
    "600 extra m= lines": (
        CHROME + "m=audio 9 RTP/AVP 0\r\n" * 600,
        "the offer has 639 lines, more than 300",
    ),
    "twenty m= lines": (
        CHROME + "m=video 9 UDP/TLS/RTP/SAVPF 96\r\n" * 19,
        "the offer has 20 media sections (m=audio x1, m=video x19)",
    ),
    "no fingerprint": (
        _without(CHROME, "a=fingerprint:"),
        "no a=fingerprint of sha-256, sha-384 or sha-512",
    ),
    "an unknown fingerprint only": (
        _edit(CHROME, "a=fingerprint:sha-256 ", "a=fingerprint:md5 "),
        "no a=fingerprint of sha-256",
    ),
    "a short sha-256": (
        _edit(CHROME, f"sha-256 {FP256}", "sha-256 AB:CD"),
        "line 16 (a=fingerprint): a sha-256 digest has 32 bytes, this one 2",
    ),
    "no ice-ufrag": (_without(CHROME, "a=ice-ufrag:"), "no a=ice-ufrag"),
    "no ice-pwd": (_without(FIREFOX, "a=ice-pwd:"), "no a=ice-pwd"),
    "a short ice-pwd": (
        _edit(CHROME, "a=ice-pwd:y8cHblT4P8M4XhXpqkAeeVXz", "a=ice-pwd:short"),
        "line 14 (a=ice-pwd): must be 22 to 256",
    ),
    "no setup": (_without(CHROME, "a=setup:"), "no a=setup"),
    "setup holdconn": (
        _edit(CHROME, "a=setup:actpass", "a=setup:holdconn"),
        "line 17 (a=setup): must be actpass, active or passive",
    ),
    "no audio at all": (CHROME.split("m=audio", maxsplit=1)[0], "no m=audio line"),
    "no direction": (_without(CHROME, "a=sendrecv"), "no direction (a=sendrecv)"),
    "recvonly": (
        _edit(CHROME, "a=sendrecv", "a=recvonly"),
        "a=recvonly: the browser sends no audio",
    ),
    "no rtcp-mux": (_without(CHROME, "a=rtcp-mux"), "no a=rtcp-mux"),
    "no mid": (_without(CHROME, "a=mid:"), "no a=mid"),
    "a BUNDLE of another mid": (
        _edit(CHROME, "a=group:BUNDLE 0", "a=group:BUNDLE 0 1"),
        "line 5 (a=group:BUNDLE): names a mid no m= line has",
    ),
    "plain RTP": (
        _edit(CHROME, "UDP/TLS/RTP/SAVPF", "RTP/AVP"),
        "the transport must be DTLS-SRTP",
    ),
    "port 0": (_edit(CHROME, "m=audio 9 ", "m=audio 0 "), "port 0 declines the audio"),
    "a payload type over 127": (
        _edit(CHROME, " 111 63 ", " 300 63 "),
        "each format must be an RTP payload type",
    ),
    "no codec decoded here": (
        _edit(
            _edit(
                _edit(_edit(FIREFOX, "opus/48000/2", "speex/16000"), "G722/8000/1", "iLBC/8000"),
                "PCMU/8000",
                "GSM/8000",
            ),
            "PCMA/8000",
            "L16/8000",
        ),
        "no codec this node decodes",
    ),
    "an rtpmap of an unlisted format": (
        _edit(CHROME, "a=rtpmap:13 CN/8000", "a=rtpmap:14 CN/8000"),
        "its format is not one the m=audio line lists",
    ),
    "an fmtp of no rtpmap": (
        _edit(CHROME, "a=fmtp:63 111/111", "a=fmtp:64 111/111"),
        "line 31 (a=fmtp): its format has no a=rtpmap",
    ),
    "an fmtp number that is not one": (
        _edit(CHROME, "minptime=10", "minptime=ten"),
        "line 29 (a=fmtp): minptime must be a number",
    ),
    "a candidate cut short": (
        _edit(CHROME, "192.0.2.10 46243 typ host generation 0 network-id 1", "192.0.2.10"),
        "line 11 (a=candidate): must be <foundation>",
    ),
    "a candidate's transport": (
        _edit(CHROME, "a=candidate:1467250027 1 udp", "a=candidate:1467250027 1 sctp"),
        "line 11 (a=candidate): the transport must be udp or tcp",
    ),
    "a candidate's port": (
        _edit(CHROME, "192.0.2.10 46243", "192.0.2.10 465536"),
        "line 11 (a=candidate): the port must be a number",
    ),
    "an rtcp-fb of no type": (
        _edit(CHROME, "a=rtcp-fb:111 transport-cc", "a=rtcp-fb:111"),
        "line 28 (a=rtcp-fb): must be <format or *> <feedback type>",
    ),
    "an extmap of three parts": (
        _edit(CHROME, "a=extmap:4 urn:ietf:params:rtp-hdrext:sdes:mid", "a=extmap:4 a b"),
        "line 22 (a=extmap): extension attributes are not taken",
    ),
    "an ssrc with no attribute": (
        _edit(CHROME, "a=ssrc:3541250196 cname:q3Dx0Wn+bJnfcozz", "a=ssrc:3541250196 cname"),
        "line 38 (a=ssrc)",
    ),
    "a c= line of no address": (
        _edit(CHROME, "c=IN IP4 0.0.0.0", "c=IN IP4 nowhere"),
        "line 9 (c=): the address is not an IP address",
    ),
    "an empty line": (_edit(CHROME, "s=-\r\n", "s=-\r\n\r\n"), "line 4 is empty"),
    "a CR inside a line": (
        _edit(CHROME, "s=-\r\n", "s=-\rx\r\n"),
        "line 3: a CR that does not end the line",
    ),
    "a tab": (
        _edit(CHROME, "t=0 0", "t=0\t0"),
        "line 4: a character that is not printable (U+0009)",
    ),
    "not v=0 first": (_edit(CHROME, "v=0", "v=1"), "line 1 must be v=0"),
    "no t=": (_without(CHROME, "t="), "no t= line"),
    "a line that is no type=value": (
        _edit(CHROME, "a=rtcp-rsize", "rtcp-rsize"),
        "line 26 is not of the form <letter>=<value>",
    ),
    "too long": ("v=0\r\n" + "a=x\r\n" * (MAX_SDP_CHARS // 5), "characters, more than"),
}


@pytest.mark.parametrize("sdp,reason", REFUSED.values(), ids=REFUSED.keys())
def test_a_malformed_or_unconnectable_offer_is_refused_with_its_reason(
    sdp: str, reason: str
) -> None:
    with pytest.raises(SdpError) as refused:
        check_offer(sdp)
    assert reason in str(refused.value)


def test_a_reason_never_repeats_what_was_sent() -> None:
    secret = "Zz9Secret9zZ"
    for sdp in (
        _edit(CHROME, "m=audio 9 ", f"m=audio {secret} "),
        _edit(CHROME, "m=audio 9 ", f"m={secret} 9 "),
        _edit(CHROME, "a=setup:actpass", f"a=setup:{secret}"),
        _edit(CHROME, "c=IN IP4 0.0.0.0", f"c=IN IP4 {secret}"),
    ):
        with pytest.raises(SdpError) as refused:
            check_offer(sdp)
        assert secret not in str(refused.value)


# -- fuzzing ------------------------------------------------------------------------------

FUZZ = settings(
    max_examples=400,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

#: Values a field of an SDP line is replaced by: numbers at and past their bounds, empty,
#: spaces, separators, other line ends, non-ASCII.
ODD = st.sampled_from(
    [
        "",
        " ",
        "  ",
        "0",
        "-1",
        "1_0",
        "65536",
        "4294967296",
        "99999999999999999999",
        "x",
        ":",
        "/",
        "a:b",
        "*",
        "\n",
        "\r",
        "\t",
        "\x00",
        "\u2028",
        "\xa0",
        "é",
        "9/2",
        "UDP/TLS/RTP/SAVPF",
        "audio",
        "video",
        "sha-256",
        "actpass",
        "BUNDLE",
        "IN IP4 0.0.0.0",
        "IN IP6 ::1",
        "typ",
        "host",
        "opus/48000/2",
        "candidate",
        "m=audio 9 UDP/TLS/RTP/SAVPF 0",
        "a=rtcp-mux",
    ]
)
FIELD = st.one_of(ODD, st.text(max_size=12))


@st.composite
def mutated(draw: st.DrawFn, bases: tuple[str, ...] = (CHROME, FIREFOX)) -> str:
    """One of ``bases`` with a few of its lines changed: a field replaced, a line dropped,
    repeated or moved, a line added, or a cut at any character."""
    lines = draw(st.sampled_from(bases)).split("\r\n")
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(7, len(lines) - 1) | st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["field", "field", "field", "drop", "dup", "move", "add"]))
        if op == "field":
            sep = draw(st.sampled_from([" ", ":", "/", "="]))
            parts = lines[i].split(sep)
            j = draw(st.integers(0, len(parts) - 1))
            parts[j] = draw(FIELD)
            lines[i] = sep.join(parts)
        elif op == "drop":
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "move":
            lines.insert(draw(st.integers(0, len(lines))), lines.pop(i))
        else:
            kind = draw(st.sampled_from(["a=", "m=", "c=", "v=", "o=", "x="]))
            lines.insert(
                i, kind + draw(FIELD) + draw(st.sampled_from(["", ":", " "])) + draw(FIELD)
            )
    text = draw(st.sampled_from(["\r\n", "\n"])).join(lines)
    if draw(st.integers(0, 4)) == 4:  # hypothesis draws small numbers most
        text = text[: draw(st.integers(0, len(text)))]
    return text


def _judge(text: str) -> None:
    """Refused with ``SdpError``, or passed in a form aiortc's parser reads as a call."""
    try:
        checked = check_offer(text)
    except SdpError:
        return
    assert checked.endswith("\r\n") and "\n" not in checked.replace("\r\n", "")
    session = SessionDescription.parse(checked)
    (media,) = session.media
    assert media.kind == "audio" and media.direction in ("sendrecv", "sendonly")
    assert media.dtls is not None and media.dtls.fingerprints
    assert media.ice is not None and media.ice.usernameFragment and media.ice.password
    assert media.rtcp_mux and media.rtp.muxId
    for group in session.group:
        assert all(item == media.rtp.muxId for item in group.items) or group.semantic != "BUNDLE"


@FUZZ
@given(mutated())
@example(CHROME)
@example(FIREFOX)
def test_mutated_offers_are_refused_or_read_by_aiortc(text: str) -> None:
    _judge(text)


@FUZZ
@given(st.text(max_size=3000))
def test_any_text_is_refused_or_read_by_aiortc(text: str) -> None:
    _judge(text)
