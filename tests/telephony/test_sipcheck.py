"""The front's request checks: strict where RFC 4475 says so, not where real phones differ."""

from __future__ import annotations

import pytest

from telephony.sipcheck import (
    accept_rejection,
    check_request,
    method_rejection,
    request_defect,
    require_unsupported,
)
from telephony.sipmsg import scan
from tests.support.corpus import rfc4475_dir


def verdict(data: bytes) -> int | None:
    found = check_request(data, scan(data))
    return found.code if found is not None else None


REAL_WORLD = (
    "INVITE sip:bot@127.0.0.1 SIP/2.0\r\n"
    "Via: SIP/2.0/UDP [2001:db8::9]:5060;branch=z9hG4bK-1;received=2001:db8::9;rport=5060\r\n"
    "Via: SIP/2.0/UDP my_host.local:5070;branch=z9hG4bK-2\r\n"
    "From: José Pérez <sip:jose@127.0.0.1>;tag=f1\r\n"
    "To: <sip:bot@127.0.0.1>\r\nCall-ID: c1\r\nCSeq: 1 INVITE\r\n"
    "Contact: <sip:a@127.0.0.1:5070;transport=udp>;expires=3600;"
    '+sip.instance="<urn:uuid:00000000-0000-1000-8000-000000000000>", <sip:b@h>\r\n'
    "Content-Length: 0\r\n\r\n"
).encode()


def test_what_real_phones_send_passes() -> None:
    # An IPv6 sent-by and an unbracketed IPv6 received=, an underscore in a host name, an
    # unquoted UTF-8 display name, a quoted '<' '>' in a Contact parameter, two Contacts.
    assert verdict(REAL_WORLD) is None
    tel = REAL_WORLD.replace(b"INVITE sip:bot@127.0.0.1 SIP/2.0", b"INVITE tel:+15551234 SIP/2.0")
    assert verdict(tel) is None
    folded = REAL_WORLD.replace(b"CSeq: 1 INVITE", b"CSeq: 1\r\n INVITE")
    assert verdict(folded) is None


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("TC_BADASPEC_I", 400), ("TC_BADDN_I", 400), ("TC_BADINV01_I", 400),
        ("TC_BADVERS_V", 505), ("TC_CLERR_I", 400), ("TC_ESCRURI_V", 400),
        ("TC_INSUF_I", 400), ("TC_LTGTRURI_I", 400), ("TC_LWSRURI_I", 400),
        ("TC_LWSSTART_V", 400), ("TC_MCL01_I", 400), ("TC_MISMATCH01_V", 400),
        ("TC_MISMATCH02_V", 400), ("TC_MULTI01_I", 400), ("TC_NCL_I", 400),
        ("TC_QUOTBAL_I", 400), ("TC_REGBADCT_I", 400), ("TC_SCALAR02_V", 400),
        ("TC_TEST_I", 400), ("TC_TRWS_I", 400),
        ("TC_WSINV", None), ("TC_INTMETH", None), ("TC_ESC01_V", None), ("TC_ESC02_V", None),
        ("TC_ESCNULL_V", None), ("TC_LWSDISP_V", None), ("TC_LONGREQ_V", None),
        ("TC_SEMIURI_V", None), ("TC_TRANSPORTS_V", None), ("TC_MPART01", None),
        ("TC_UNKSM2_V", None), ("TC_BADDATE_V", 400), ("TC_ZEROMF_V", None),
    ],
)  # fmt: skip
def test_rfc4475_verdicts(name: str, code: int | None) -> None:
    assert verdict((rfc4475_dir() / f"{name}.dat").read_bytes()) == code


def test_methods_and_require() -> None:
    assert method_rejection("INVITE") is None and method_rejection("OPTIONS") is None
    register = method_rejection("REGISTER")
    assert register is not None and register.code == 405
    unknown = method_rejection("FROBNICATE")
    assert unknown is not None and unknown.code == 501
    bext = scan((rfc4475_dir() / "TC_BEXT01_V.dat").read_bytes())
    assert require_unsupported(bext) == ["nothingSupportsThis", "nothingSupportsThisEither"]
    timer = scan(REAL_WORLD.replace(b"CSeq:", b"Require: timer, 100rel\r\nCSeq:"))
    assert require_unsupported(timer) == []


def test_a_date_in_gmt_passes_another_zone_does_not() -> None:
    gmt = REAL_WORLD.replace(b"CSeq:", b"Date: Sat, 13 Nov 2010 23:29:00 GMT\r\nCSeq:")
    assert verdict(gmt) is None and request_defect(gmt.decode()) is None
    est = gmt.replace(b" GMT", b" EST")
    assert verdict(est) == 400 and request_defect(est.decode()) == "malformed Date"
    baddate = (rfc4475_dir() / "TC_BADDATE_V.dat").read_bytes()
    assert request_defect(baddate.decode("latin-1")) == "malformed Date"


def test_an_invite_must_accept_sdp() -> None:
    sdp01 = accept_rejection(scan((rfc4475_dir() / "TC_SDP01_V.dat").read_bytes()))
    assert sdp01 is not None and sdp01.code == 406
    assert accept_rejection(scan(REAL_WORLD)) is None  # no Accept: SDP is taken
    for accept, code in (
        (b"application/sdp;level=1, application/isup", None),
        (b"Application/*", None),
        (b"*/*;q=0.1", None),
        (b"text/html", 406),
        (b"", 406),  # RFC 3261 20.1: an empty Accept accepts nothing
    ):
        with_accept = REAL_WORLD.replace(b"CSeq:", b"Accept: " + accept + b"\r\nCSeq:")
        found = accept_rejection(scan(with_accept))
        assert (found.code if found is not None else None) == code, accept
    options = REAL_WORLD.replace(b"INVITE", b"OPTIONS").replace(b"CSeq:", b"Accept: x/y\r\nCSeq:")
    assert accept_rejection(scan(options)) is None
