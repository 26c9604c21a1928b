"""Property-based fuzzing (hypothesis) of the project's own parsers.

The SIP front's scanner and request checks, the stateless answers built from what they
found, the SDP offer parser, the IPC frame decoder and the dialer's DTMF script. Each is
fed arbitrary and mutated input and may only answer or raise its own documented error.
Bounded: a fixed number of examples each, no deadline per example (a shared CPU is slow),
no example database (the runs do not depend on earlier ones).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import struct

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from telephony.dialer import _parse_dtmf
from telephony.ipc import (
    HEADER,
    AudioFrame,
    CallStarted,
    CallStopped,
    Dtmf,
    FrameDecoder,
    Hangup,
    IpcError,
    Message,
    SendAudio,
    Stats,
    Transfer,
    TransferStatus,
    encode,
)
from telephony.sdp import has_common_codec, parse_audio_offers, sip_body
from telephony.sip_dispatch import SipFront, WorkerSlot, stateless_response, with_rport
from telephony.sipcheck import (
    address_defect,
    check_request,
    method_rejection,
    require_unsupported,
    scheme_rejection,
    split_outside_quotes,
)
from telephony.sipmsg import scan
from tests.support.corpus import rfc4475_dir

FUZZ = settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

VALID = (
    b"INVITE sip:bot@127.0.0.1 SIP/2.0\r\n"
    b"Via: SIP/2.0/UDP 127.0.0.1:5070;branch=z9hG4bK-1\r\n"
    b'From: "A" <sip:a@127.0.0.1>;tag=f1\r\nTo: <sip:bot@127.0.0.1>\r\n'
    b"Call-ID: c1@h\r\nCSeq: 1 INVITE\r\nContact: <sip:a@127.0.0.1:5070>\r\n"
    b"Max-Forwards: 70\r\nContent-Type: application/sdp\r\nContent-Length: 4\r\n\r\nbody"
)
SEEDS = [VALID] + [p.read_bytes() for p in sorted(rfc4475_dir().glob("*.dat"))]
# Bytes that matter to SIP's grammar, weighted in so mutations hit the parsers' branches.
SIP_BYTES = st.sampled_from(
    [b"\r\n", b"\n", b" ", b"\t", b":", b";", b",", b'"', b"\\", b"<", b">", b"=", b"\x00",
     b"SIP/2.0", b"Via:", b"Call-ID:", b"CSeq:", b"Content-Length:", b"tag=", b"\r\n ", b"%"]
)  # fmt: skip


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """A seed message with a few bytes inserted, deleted or replaced."""
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(data)))
        op = draw(st.sampled_from(["insert", "delete", "replace"]))
        piece = draw(st.one_of(SIP_BYTES, st.binary(min_size=1, max_size=8)))
        if op == "insert":
            data[at:at] = piece
        elif op == "delete":
            del data[at : at + draw(st.integers(1, 16))]
        else:
            data[at : at + len(piece)] = piece
    return bytes(data)


def _judge(data: bytes) -> None:
    """What the front does with a datagram, minus the sockets: it must never raise."""
    msg = scan(data)
    if msg.is_response or not msg.method:
        return
    check_request(data, msg)
    method_rejection(msg.method)
    require_unsupported(msg)
    scheme_rejection(msg)
    if msg.get("via") is not None:
        reply = stateless_response(msg, 400, "Bad Request", ("127.0.0.1", 5070))
        back = scan(reply)
        assert back.is_response and back.start_line_ok
        if msg.call_id is not None and "\n" not in msg.call_id and "\r" not in msg.call_id:
            # As bytes: SIP trims only its own whitespace; a str's strip() would also take
            # a trailing NBSP or \x1c that the request's Call-ID (and the reply's) keeps.
            assert back.call_id == msg.call_id
        with_rport(data, msg)


@FUZZ
@given(st.binary(max_size=2000))
def test_the_front_survives_any_bytes(data: bytes) -> None:
    _judge(data)


#: Found by the fuzzing: a Call-ID ending in a byte that is whitespace to Python's str
#: (NBSP) but not to SIP, which the reply keeps as the request had it.
NBSP_CALL_ID = (
    b"INVITE sip:u@example.com SIP/2.0\r\nVia: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bKx\r\n"
    b"Call-ID: abc@example.co\xa0\r\nCSeq: 1 INVITE\r\nFrom: <sip:a@b>;tag=1\r\n"
    b"To: <sip:u@example.com>\r\nContent-Length: 0\r\n\r\n"
)


@FUZZ
@given(mutated())
@example(NBSP_CALL_ID)
def test_the_front_survives_mutated_sip(data: bytes) -> None:
    _judge(data)


@FUZZ
@given(
    via=st.from_regex(
        r"SIP ?/ ?2\.0 ?/ ?(UDP|TCP|TLS) [a-z0-9.]{1,20}(:[0-9]{1,5})?", fullmatch=True
    ),
    params=st.lists(
        st.from_regex(r";[a-z]{1,8}(=[A-Za-z0-9.]{1,10})?", fullmatch=True), max_size=4
    ),
)
def test_rport_lands_in_the_top_via_and_nothing_else_moves(via: str, params: list[str]) -> None:
    top = via + "".join(params)
    data = VALID.replace(b"SIP/2.0/UDP 127.0.0.1:5070;branch=z9hG4bK-1", top.encode())
    msg = scan(data)
    out = with_rport(data, msg)
    again = scan(out)
    assert again.call_id == msg.call_id and again.cseq == msg.cseq
    assert out.endswith(b"\r\n\r\nbody")
    via_value = again.get("via")
    assert via_value is not None and b"rport" in via_value.value
    assert check_request(out, again) == check_request(data, msg)


@FUZZ
@given(st.text(max_size=200))
def test_address_checks_and_splits_never_raise(text: str) -> None:
    raw = text.encode("utf-8", "surrogatepass")
    address_defect(raw)
    address_defect(raw, star=True)
    parts = split_outside_quotes(raw)
    assert b",".join(parts) == raw  # the cut loses nothing


@FUZZ
@given(st.text(max_size=600))
def test_sdp_parser_answers_or_says_malformed(text: str) -> None:
    try:
        offers = parse_audio_offers(text)
    except ValueError:
        return
    for offer in offers:
        assert offer.port >= 0 and all(isinstance(f, str) for f in offer.formats)
    with contextlib.suppress(ValueError):
        has_common_codec(text, ("PCMU", "G722"))
    sip_body(text)


@FUZZ
@given(
    port=st.integers(0, 65535),
    pts=st.lists(st.integers(0, 127), min_size=1, max_size=6),
    names=st.dictionaries(st.integers(96, 127), st.sampled_from(["opus", "G722", "PCMU", "x"])),
)
def test_sdp_offers_list_every_payload_type(
    port: int, pts: list[int], names: dict[int, str]
) -> None:
    lines = ["v=0", "o=- 1 1 IN IP4 127.0.0.1", "s=-", "c=IN IP4 127.0.0.1", "t=0 0"]
    lines.append(f"m=audio {port} RTP/AVP {' '.join(map(str, pts))}")
    lines += [f"a=rtpmap:{pt} {name}/8000" for pt, name in names.items()]
    (offer,) = parse_audio_offers("\r\n".join(lines) + "\r\n")
    assert offer.port == port and len(offer.formats) == len(pts)
    for pt, name in zip(pts, offer.formats, strict=True):
        if pt in names:
            assert name == names[pt].upper()


FLOATS = st.floats(allow_nan=False, allow_infinity=False, width=64)
KEYS = st.integers(0, 2**32 - 1)
TEXT = st.text(max_size=40)
MESSAGES: st.SearchStrategy[Message] = st.one_of(
    st.builds(
        AudioFrame, KEYS, KEYS, KEYS, KEYS, st.integers(0, 2**64 - 1), FLOATS, FLOATS,
        st.binary(max_size=320),
    ),
    st.builds(SendAudio, KEYS, FLOATS, st.binary(max_size=320)),
    st.builds(Hangup, KEYS),
    st.builds(Dtmf, KEYS, st.sampled_from("0123456789*#ABCD"), st.integers(0, 10_000), FLOATS),
    st.builds(CallStopped, KEYS, TEXT, st.booleans(), st.integers(0, 10**9)),
    st.builds(CallStarted, KEYS, TEXT, TEXT, TEXT, TEXT, st.integers(8000, 48000), FLOATS),
    st.builds(Transfer, KEYS, TEXT, FLOATS),
    st.builds(TransferStatus, KEYS, st.booleans(), st.integers(0, 699), TEXT),
    st.builds(Stats, st.dictionaries(TEXT, st.integers(-(2**40), 2**40), max_size=5)),
)  # fmt: skip


@FUZZ
@given(st.lists(MESSAGES, max_size=8), st.lists(st.integers(1, 64), max_size=20))
def test_ipc_frames_come_back_whatever_the_cuts(msgs: list[Message], cuts: list[int]) -> None:
    stream = b"".join(encode(m) for m in msgs)
    dec = FrameDecoder()
    got: list[Message] = []
    pos = 0
    for n in cuts:
        got += dec.feed(stream[pos : pos + n])
        pos += n
    got += dec.feed(stream[pos:])
    assert got == msgs and dec.pending == 0


@FUZZ
@given(st.binary(max_size=600))
def test_ipc_decoder_answers_or_raises_ipc_error(data: bytes) -> None:
    dec = FrameDecoder()
    with contextlib.suppress(IpcError):
        dec.feed(data)


@FUZZ
@given(
    kind=st.integers(0, 255),
    payload=st.one_of(st.binary(max_size=80), st.text(max_size=80).map(str.encode)),
)
def test_ipc_decoder_on_any_typed_frame(kind: int, payload: bytes) -> None:
    frame = HEADER.pack(len(payload), kind) + payload
    with contextlib.suppress(IpcError):
        FrameDecoder().feed(frame)


@FUZZ
@given(st.sampled_from(['{"pid": Infinity, "sip_port": 1}', '{"pid": 1e999, "sip_port": 1}',
                        '{"key": NaN, "digit": "1", "duration_ms": 1, "ago": 0}',
                        "[" * 5000 + "]" * 5000]))  # fmt: skip
def test_ipc_json_extremes_are_ipc_errors(payload: str) -> None:
    for kind in (1, 4, 5, 7):
        data = payload.encode()
        with contextlib.suppress(IpcError):
            FrameDecoder().feed(struct.pack("<IB", len(data), kind) + data)


@FUZZ
@given(st.lists(st.tuples(FLOATS.filter(math.isfinite), st.text("0123456789*#", max_size=6))))
def test_dtmf_script_round_trips(items: list[tuple[float, str]]) -> None:
    text = [f"{at!r}:{digits}" for at, digits in items]
    assert _parse_dtmf(text) == items


@FUZZ
@given(st.lists(st.one_of(mutated(), st.binary(max_size=300)), min_size=1, max_size=10))
def test_the_front_routes_any_datagrams_without_breaking_its_tables(datagrams: list[bytes]) -> None:
    """The whole front (``SipFront.datagram_received``) on a loop that is not running: its
    answers go nowhere (no transport); new INVITEs get real relay sockets, closed after."""
    loop = asyncio.new_event_loop()
    workers = [WorkerSlot(0, 2), WorkerSlot(1, 2)]
    for slot in workers:
        slot.addr = ("127.0.0.1", 9)
    front = SipFront("127.0.0.1", 0, workers, retry_after_s=5)
    front._loop = loop
    try:
        for data in datagrams:
            before = set(front.routes)
            front.datagram_received(data, ("127.0.0.1", 5070))
            for call_id in set(front.routes) - before:
                assert scan(data).method == "INVITE" and scan(data).call_id == call_id
            assert all(0 <= w.load <= w.capacity for w in workers)
        c = front.counters
        assert c["front_datagrams"] == len(datagrams)
    finally:
        front.close_relays()
        loop.close()
