"""The front's request checks: strict where RFC 4475 says so, not where real phones differ."""

from __future__ import annotations

import pytest

from telephony.sipcheck import check_request, method_rejection, require_unsupported
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
        ("TC_UNKSM2_V", None), ("TC_BADDATE_V", None), ("TC_ZEROMF_V", None),
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
