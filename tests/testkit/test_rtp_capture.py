import socket
import struct
import time
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pytest

from testkit.rtp_capture import (
    ALAW_TABLE,
    ULAW_TABLE,
    Capture,
    PortFilter,
    Rtp,
    decode,
    decode_pcma,
    decode_pcmu,
    parse_frame,
    parse_rtp,
    parse_sdp_audio,
    parse_sip,
)

# --------------------------------------------------------------------------- G.711 references
# The classic reference encoders (Sun Microsystems' public-domain g711.c), written out here
# so that the decoding tables are checked against an independent formula.


def ulaw_encode(sample: int) -> int:
    sign = 0x80 if sample < 0 else 0
    magnitude = min(abs(sample), 32635) + 0x84
    exponent = (magnitude >> 7).bit_length() - 1
    mantissa = (magnitude >> (exponent + 3)) & 0x0F
    return ~(sign | (exponent << 4) | mantissa) & 0xFF


def alaw_encode(sample: int) -> int:
    value = sample >> 3
    if value >= 0:
        mask = 0xD5
    else:
        mask = 0x55
        value = -value - 1
    ends = (0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF)
    segment = next((i for i, end in enumerate(ends) if value <= end), None)
    if segment is None:
        return 0x7F ^ mask
    code = segment << 4
    code |= (value >> 1 if segment < 2 else value >> segment) & 0x0F
    return code ^ mask


def test_g711_known_code_points() -> None:
    assert decode_pcmu(bytes([0xFF, 0x00, 0x80, 0x7F])).tolist() == [0, -32124, 32124, 0]
    assert decode_pcma(bytes([0xD5, 0x55, 0xAA, 0x2A])).tolist() == [8, -8, 32256, -32256]
    assert ULAW_TABLE.dtype == np.int16 and ALAW_TABLE.dtype == np.int16


@pytest.mark.parametrize(
    ("encode", "table"), [(ulaw_encode, ULAW_TABLE), (alaw_encode, ALAW_TABLE)]
)
def test_g711_tables_invert_the_reference_encoder(
    encode: Callable[[int], int], table: npt.NDArray[np.int16]
) -> None:
    for code in range(256):
        # every code point decodes to a value the encoder maps back to the same value
        assert table[encode(int(table[code]))] == table[code], hex(code)


@pytest.mark.parametrize(
    ("encode", "decoder"), [(ulaw_encode, decode_pcmu), (alaw_encode, decode_pcma)]
)
def test_g711_sine_round_trip(
    encode: Callable[[int], int], decoder: Callable[[bytes], npt.NDArray[np.int16]]
) -> None:
    t = np.arange(800) / 8000
    sine = np.round(12000 * np.sin(2 * np.pi * 440 * t)).astype(np.int16)
    coded = bytes(encode(int(x)) for x in sine)
    back = decoder(coded)
    assert back.dtype == np.int16 and len(back) == len(sine)
    err = back.astype(np.float64) - sine
    assert np.all(np.abs(err) <= np.abs(sine) / 16 + 16)
    snr = 10 * np.log10((sine.astype(np.float64) ** 2).sum() / (err**2).sum())
    assert snr > 30  # G.711 gives about 38 dB on a loud sine


# --------------------------------------------------------------------------- RTP


def rtp_packet(
    pt: int = 0,
    seq: int = 7,
    ts: int = 1600,
    ssrc: int = 0x1234ABCD,
    *,
    marker: bool = False,
    payload: bytes = b"\xff" * 160,
    csrc: int = 0,
    extension: bytes | None = None,
    padding: int = 0,
) -> bytes:
    b0 = 0x80 | csrc | (0x10 if extension is not None else 0) | (0x20 if padding else 0)
    head = struct.pack("!BBHII", b0, pt | (0x80 if marker else 0), seq, ts, ssrc)
    head += b"\0\0\0\1" * csrc
    if extension is not None:
        head += struct.pack("!HH", 0xBEDE, len(extension) // 4) + extension
    pad = bytes(padding - 1) + bytes([padding]) if padding else b""
    return head + payload + pad


def test_parse_rtp_header_fields() -> None:
    rtp = parse_rtp(rtp_packet(pt=8, seq=65535, ts=0xFFFFFFF0, marker=True, payload=b"\xd5" * 4))
    assert rtp == Rtp(
        payload_type=8,
        marker=True,
        seq=65535,
        timestamp=0xFFFFFFF0,
        ssrc=0x1234ABCD,
        payload=b"\xd5" * 4,
    )
    samples = decode(rtp)
    assert samples is not None and samples.tolist() == [8, 8, 8, 8]


def test_parse_rtp_skips_csrc_extension_and_padding() -> None:
    data = rtp_packet(payload=b"abcd", csrc=2, extension=b"\1\2\3\4", padding=3)
    rtp = parse_rtp(data)
    assert rtp is not None and rtp.payload == b"abcd"


def test_parse_rtp_rejects_rtcp_stun_sip_and_runts() -> None:
    rtcp_rr = struct.pack("!BBHI", 0x81, 201, 7, 0x1234ABCD) + bytes(24)
    rtcp_sr = struct.pack("!BBHI", 0x80, 200, 6, 0x1234ABCD) + bytes(20)
    stun = struct.pack("!HHI", 0x0001, 0, 0x2112A442) + bytes(12)
    assert parse_rtp(rtcp_rr) is None
    assert parse_rtp(rtcp_sr) is None
    assert parse_rtp(stun) is None
    assert parse_rtp(b"INVITE sip:bot@127.0.0.1 SIP/2.0\r\n\r\n") is None
    assert parse_rtp(b"\x80\x00\x00") is None


def test_decode_other_payload_types_is_none() -> None:
    rtp = parse_rtp(rtp_packet(pt=9))
    assert rtp is not None and decode(rtp) is None


# --------------------------------------------------------------------------- SIP

INVITE = (
    b"INVITE sip:bot@127.0.0.1:5060 SIP/2.0\r\n"
    b"Via: SIP/2.0/UDP 127.0.0.1:40000;branch=z9hG4bKabc;rport\r\n"
    b"Max-Forwards: 70\r\n"
    b'From: "Caller" <sip:caller@127.0.0.1>;tag=111\r\n'
    b"To: <sip:bot@127.0.0.1:5060>\r\n"
    b"Call-ID: 4f2a-call@127.0.0.1\r\n"
    b"CSeq: 1 INVITE\r\n"
    b"Content-Type: application/sdp\r\n"
    b"Content-Length: 140\r\n"
    b"\r\n"
    b"v=0\r\n"
    b"o=- 1 2 IN IP4 127.0.0.1\r\n"
    b"s=-\r\n"
    b"c=IN IP4 127.0.0.1\r\n"
    b"t=0 0\r\n"
    b"m=audio 11652 RTP/AVP 0 8 101\r\n"
    b"a=rtpmap:0 PCMU/8000\r\n"
)

OK_200 = (
    b"SIP/2.0 200 OK\r\n"
    b"Via: SIP/2.0/UDP 127.0.0.1:40000;branch=z9hG4bKabc;rport=40000\r\n"
    b"f: <sip:caller@127.0.0.1>;tag=111\r\n"
    b"t: <sip:bot@127.0.0.1:5060>;tag=222\r\n"
    b"i: 4f2a-call@127.0.0.1\r\n"
    b"CSeq: 1 INVITE\r\n"
    b"\r\n"
    b"v=0\r\n"
    b"c=IN IP4 10.0.0.1\r\n"
    b"m=audio 21000 RTP/AVP 0\r\n"
    b"c=IN IP4 127.0.0.1\r\n"
    b"m=video 0 RTP/AVP 96\r\n"
    b"c=IN IP4 10.9.9.9\r\n"
)


def test_parse_sip_invite() -> None:
    msg = parse_sip(INVITE)
    assert msg is not None
    assert msg.method == "INVITE" and msg.status is None and not msg.is_response
    assert msg.call_id == "4f2a-call@127.0.0.1"
    assert (msg.cseq, msg.cseq_method) == (1, "INVITE")
    assert msg.from_uri == "sip:caller@127.0.0.1"
    assert msg.to_uri == "sip:bot@127.0.0.1:5060"
    assert msg.audio == ("127.0.0.1", 11652)


def test_parse_sip_response_with_compact_headers_and_media_level_address() -> None:
    msg = parse_sip(OK_200)
    assert msg is not None and msg.is_response
    assert msg.status == 200 and msg.method is None
    assert msg.call_id == "4f2a-call@127.0.0.1"
    assert msg.cseq_method == "INVITE"
    assert msg.audio == ("127.0.0.1", 21000)  # the audio section's own c= line


def test_parse_sip_bye_and_non_sip() -> None:
    bye = parse_sip(b"BYE sip:caller@127.0.0.1:40000 SIP/2.0\nCall-ID: x1\nCSeq: 2 BYE\n\n")
    assert bye is not None and bye.method == "BYE" and bye.call_id == "x1" and bye.audio is None
    assert parse_sip(rtp_packet()) is None
    assert parse_sip(b"hello world") is None
    assert parse_sip(b"SIP/2.0 abc Weird\r\n\r\n") is None


def test_parse_sdp_without_audio() -> None:
    assert parse_sdp_audio("v=0\r\nc=IN IP4 127.0.0.1\r\nm=video 5000 RTP/AVP 96\r\n") is None


# --------------------------------------------------------------------------- frames and capture


def udp_frame(src: tuple[str, int], dst: tuple[str, int], payload: bytes) -> bytes:
    udp = struct.pack("!HHHH", src[1], dst[1], 8 + len(payload), 0) + payload
    ip = struct.pack(
        "!BBHHHBBH4s4s",
        0x45,
        0,
        20 + len(udp),
        1,
        0x4000,  # don't fragment
        64,
        17,
        0,
        socket.inet_aton(src[0]),
        socket.inet_aton(dst[0]),
    )
    return bytes(12) + b"\x08\x00" + ip + udp


def test_parse_frame() -> None:
    frame = udp_frame(("127.0.0.1", 4000), ("127.0.0.2", 5000), b"payload")
    assert parse_frame(frame) == (("127.0.0.1", 4000), ("127.0.0.2", 5000), b"payload")
    tcp = bytearray(frame)
    tcp[14 + 9] = 6
    assert parse_frame(bytes(tcp)) is None
    arp = bytes(12) + b"\x08\x06" + bytes(28)
    assert parse_frame(arp) is None
    fragment = bytearray(frame)
    fragment[14 + 6 : 14 + 8] = b"\x20\x00"  # more fragments follow
    assert parse_frame(bytes(fragment)) is None


def test_port_filter() -> None:
    keep = PortFilter([5060, range(20000, 21000)])
    assert keep(5060, 40000) and keep(40000, 20999) and not keep(40000, 21000)
    keep.add(40000)
    assert keep(40000, 1)


def test_capture_finds_udp_packets_on_loopback() -> None:
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    other = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        receiver.bind(("127.0.0.1", 0))
        other.bind(("127.0.0.1", 0))
        sender.bind(("127.0.0.1", 0))
        port, other_port = receiver.getsockname()[1], other.getsockname()[1]
        capture = Capture([port])
        try:
            capture.start()
        except PermissionError:
            pytest.skip("a raw packet socket needs root")
        try:
            before = time.monotonic()
            for seq in range(5):
                sender.sendto(rtp_packet(seq=seq), ("127.0.0.1", port))
                sender.sendto(b"not for us", ("127.0.0.1", other_port))
            sender.sendto(INVITE, ("127.0.0.1", port))
            after = time.monotonic()
            deadline = time.monotonic() + 10
            while len(capture.packets()) < 6 and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            capture.stop()
        packets = capture.packets()
        src = ("127.0.0.1", sender.getsockname()[1])
        assert [p.src for p in packets] == [src] * 6
        assert [p.dst for p in packets] == [("127.0.0.1", port)] * 6
        assert [r.seq for r in map(parse_rtp, (p.payload for p in packets[:5])) if r] == [
            0,
            1,
            2,
            3,
            4,
        ]
        sip = parse_sip(packets[5].payload)
        assert sip is not None and sip.call_id == "4f2a-call@127.0.0.1"
        times = [p.t for p in packets]
        assert times == sorted(times)
        # kernel timestamps, on the monotonic clock (a loose sanity bound, not a timing test)
        assert before - 5 < times[0] and times[-1] < after + 5
    finally:
        for sock in (receiver, other, sender):
            sock.close()
