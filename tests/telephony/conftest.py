"""Fixtures for driving the real SIP endpoint with real SIP clients over loopback."""

from __future__ import annotations

import asyncio
import contextlib
import random
import shutil
import subprocess
import wave
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from telephony import CallHandle, EndpointConfig, SipEndpoint, SipServer
from telephony.dialer import DialResult
from testkit import ports
from testkit.ports import free_udp_block
from testkit.sipp_load import one_address_load
from tests.telephony.nodekit import alive

SIPP = shutil.which("sipp")
SIPP_TIMEOUT_S = 25.0

OnCall = Callable[[CallHandle], Awaitable[None]]


@pytest.fixture
def free_udp_port() -> Callable[[], int]:
    """Allocate a free loopback UDP port (``testkit.ports``: below the ephemeral range,
    locked against the other test processes)."""
    return ports.free_udp_port


@pytest.fixture
def make_endpoint(
    free_udp_port: Callable[[], int],
) -> Iterator[Callable[..., contextlib.AbstractAsyncContextManager[SipEndpoint]]]:
    """Factory: ``async with make_endpoint(on_call, max_calls=2) as ep: ...``.

    The endpoint is started inside the test's own event loop (its ``on_call`` runs there)
    and is always stopped, even when the test fails.
    """

    @contextlib.asynccontextmanager
    async def factory(on_call: OnCall, **overrides: object) -> AsyncIterator[SipEndpoint]:
        cfg = EndpointConfig(
            port=free_udp_port(),
            rtp_port_start=random.randrange(30000, 39000, 2),
            rtp_port_range=200,
            log_level=1,
        )
        for key, value in overrides.items():
            setattr(cfg, key, value)
        ep = SipEndpoint(cfg, on_call)
        await ep.start()
        try:
            yield ep
        finally:
            await asyncio.wait_for(ep.stop(), timeout=15)

    yield factory


# ------------------------------------------------------------------------------ sipp


@dataclass
class SippResult:
    """Exit status and diagnostics of one sipp run."""

    rc: int
    stdout: str
    errors: str  # contents of the -trace_err file, if any

    @property
    def ok(self) -> bool:
        return self.rc == 0


HEADERS = """Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
From: sipp <sip:sipp@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
To: <sip:bot@[remote_ip]:[remote_port]>{to_tag}
Call-ID: [call_id]
Contact: sip:sipp@[local_ip]:[local_port]
Max-Forwards: 70"""


def sdp(formats: str = "0 101", rtpmaps: str | None = None, port: str = "[media_port]") -> str:
    """An SDP offer body for sipp (``formats`` after ``RTP/AVP``)."""
    if rtpmaps is None:
        rtpmaps = "a=rtpmap:0 PCMU/8000\na=rtpmap:101 telephone-event/8000\na=fmtp:101 0-15"
    return f"""v=0
o=user1 53655765 2353687637 IN IP[local_ip_type] [local_ip]
s=-
c=IN IP[media_ip_type] [media_ip]
t=0 0
m=audio {port} RTP/AVP {formats}
{rtpmaps}
a=ptime:20
a=sendrecv"""


def invite(body: str) -> str:
    """The INVITE step."""
    return f"""  <send retrans="500"><![CDATA[
INVITE sip:bot@[remote_ip]:[remote_port] SIP/2.0
{HEADERS.format(to_tag="")}
CSeq: 1 INVITE
Content-Type: application/sdp
Content-Length: [len]

{body}
]]></send>
"""


def ack(cseq: int = 1, non2xx: bool = False) -> str:
    """ACK for a 2xx (new branch) or a non-2xx final response (same Via as the INVITE)."""
    headers = HEADERS.format(to_tag="[peer_tag_param]")
    if non2xx:
        headers = "\n".join(
            "[last_Via:]" if h.startswith("Via:") else h for h in headers.splitlines()
        )
    return f"""  <send><![CDATA[
ACK sip:bot@[remote_ip]:[remote_port] SIP/2.0
{headers}
CSeq: {cseq} ACK
Content-Length: 0

]]></send>
"""


def bye() -> str:
    """BYE from sipp, and the 200 that must answer it."""
    return f"""  <send retrans="500"><![CDATA[
BYE sip:bot@[remote_ip]:[remote_port] SIP/2.0
{HEADERS.format(to_tag="[peer_tag_param]")}
CSeq: 2 BYE
Content-Length: 0

]]></send>
  <recv response="200" crlf="true"/>
"""


def answer_bye() -> str:
    """Wait for the endpoint's BYE and answer 200."""
    return """  <recv request="BYE"/>
  <send><![CDATA[
SIP/2.0 200 OK
[last_Via:]
[last_From:]
[last_To:]
[last_Call-ID:]
[last_CSeq:]
Content-Length: 0

]]></send>
"""


def scenario(*steps: str, name: str = "switchboard test") -> str:
    """Wrap steps in a sipp scenario document."""
    return (
        '<?xml version="1.0" encoding="ISO-8859-1" ?>\n'
        f'<scenario name="{name}">\n' + "".join(steps) + "</scenario>\n"
    )


def answered(rtp_stream: str | None = None) -> str:
    """Provisional responses, the 200 OK, our ACK, then optionally start streaming."""
    steps = """  <recv response="100" optional="true"/>
  <recv response="180" optional="true"/>
  <recv response="200" rtd="true"/>
""" + ack()
    if rtp_stream:
        steps += f'  <nop><action><exec rtp_stream="{rtp_stream}"/></action></nop>\n'
    return steps


def pause(ms: int) -> str:
    return f'  <pause milliseconds="{ms}"/>\n'


@pytest.fixture
def sipp(tmp_path: Path, free_udp_port: Callable[[], int]) -> Callable[..., Awaitable[SippResult]]:
    """``await sipp(xml, target_port, calls=1)``: run a bounded sipp UAC against us."""
    if SIPP is None:
        pytest.skip("sipp (Debian sip-tester) is not installed")
    counter = iter(range(1000))

    async def run(
        xml: str,
        target_port: int,
        *,
        calls: int = 1,
        rate: int = 10,
        extra: tuple[str, ...] = (),
        timeout_s: float = SIPP_TIMEOUT_S,
    ) -> SippResult:
        n = next(counter)
        workdir = tmp_path / f"sipp{n}"
        workdir.mkdir()
        (workdir / "scenario.xml").write_text(xml)
        args = [
            str(SIPP),
            "-sf", "scenario.xml",
            "-m", str(calls),
            "-l", str(calls),
            "-r", str(rate),
            "-i", "127.0.0.1",
            "-mi", "127.0.0.1",
            "-p", str(free_udp_port()),
            "-mp", str(free_udp_block()),
            "-timeout", "20s",
            "-timeout_error",
            "-trace_err",
            "-nostdin",
            *extra,
            f"127.0.0.1:{target_port}",
        ]  # fmt: skip
        proc = await asyncio.create_subprocess_exec(
            *args,
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), timeout=timeout_s)
        except TimeoutError:
            proc.kill()  # our own child, by PID
            await proc.wait()
            raise AssertionError(f"sipp did not finish within {timeout_s} s") from None
        errors = "".join(p.read_text(errors="replace") for p in workdir.glob("*_errors.log"))
        assert proc.returncode is not None
        return SippResult(proc.returncode, out.decode(errors="replace")[-3000:], errors)

    return run


# ------------------------------------------------------------------------------ audio


def _tts(text: str, out: Path) -> None:
    flite, sox = shutil.which("flite"), shutil.which("sox")
    if flite is None or sox is None:
        pytest.skip("flite and sox are needed to make test speech")
    raw = out.with_suffix(".flite.wav")
    subprocess.run([flite, "-t", text, "-o", str(raw)], check=True, timeout=30)
    subprocess.run(
        [sox, str(raw), "-r", "8000", "-c", "1", "-b", "16", "-e", "signed", str(out)],
        check=True,
        timeout=30,
    )


@dataclass
class Speech:
    """A test utterance: 16-bit PCM wav, mu-law wav (for sipp) and the samples."""

    pcm_wav: Path
    ulaw_wav: Path
    samples: np.ndarray


@pytest.fixture(scope="session")
def speech(tmp_path_factory: pytest.TempPathFactory) -> Speech:
    """About 4 s of synthetic speech at 8 kHz."""

    d = tmp_path_factory.mktemp("speech")
    pcm = d / "speech.wav"
    _tts("Hello, I would like to check the status of my order please.", pcm)
    ulaw = d / "speech_ulaw.wav"
    subprocess.run(
        ["sox", str(pcm), "-r", "8000", "-c", "1", "-e", "mu-law", str(ulaw)],
        check=True,
        timeout=30,
    )
    with wave.open(str(pcm), "rb") as w:
        samples = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").copy()
    return Speech(pcm, ulaw, samples)


@pytest.fixture(scope="session")
def silence_ulaw(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """10 s of mu-law digital silence, for a caller that sends RTP but says nothing."""
    d = tmp_path_factory.mktemp("silence")
    path = d / "silence_ulaw.wav"
    if shutil.which("sox") is None:
        pytest.skip("sox is needed")
    subprocess.run(
        ["sox", "-n", "-r", "8000", "-c", "1", "-e", "mu-law", str(path), "trim", "0", "10"],
        check=True,
        timeout=30,
    )
    return path


def frame_rms(pcm: bytes) -> float:
    """RMS of a PCM16 frame."""
    a = np.frombuffer(pcm, dtype="<i2").astype(np.float64)
    return float(np.sqrt(np.mean(a * a))) if a.size else 0.0


def tone_ratio(samples: np.ndarray, freq: float, rate: int = 8000) -> float:
    """Share of the signal's energy within +-50 Hz of ``freq``."""
    x = samples.astype(np.float64)
    if not x.size or not np.any(x):
        return 0.0
    spec = np.abs(np.fft.rfft(x)) ** 2
    freqs = np.fft.rfftfreq(x.size, 1 / rate)
    band = (freqs > freq - 50) & (freqs < freq + 50)
    return float(spec[band].sum() / spec.sum())


@pytest.fixture
def helpers() -> object:
    """Plain helper functions and scenario builders as attributes."""

    class H:
        frame_rms = staticmethod(frame_rms)
        tone_ratio = staticmethod(tone_ratio)
        sdp = staticmethod(sdp)
        invite = staticmethod(invite)
        ack = staticmethod(ack)
        bye = staticmethod(bye)
        answer_bye = staticmethod(answer_bye)
        scenario = staticmethod(scenario)
        answered = staticmethod(answered)
        pause = staticmethod(pause)

    return H


# ------------------------------------------------------------------------------ nodes


@pytest.fixture
def make_node(
    free_udp_port: Callable[[], int],
) -> Callable[..., contextlib.AbstractAsyncContextManager[SipServer]]:
    """``async with make_node(on_call, max_calls=8) as node``; checks no worker outlives it."""

    @contextlib.asynccontextmanager
    async def factory(on_call: Any, **overrides: Any) -> AsyncIterator[SipServer]:
        node_keys = ("relay_linger_s", "relay_idle_s", "heartbeat_timeout_s")
        node_kw = {k: overrides.pop(k) for k in node_keys if k in overrides}
        cfg = EndpointConfig(
            port=free_udp_port(),
            rtp_port_start=random.randrange(30000, 38000, 2),
            rtp_port_range=400,
            log_level=1,
            # Test callers share 127.0.0.1 (a test of the cap passes limits of its own).
            limits=one_address_load(),
        )
        for key, value in overrides.items():
            setattr(cfg, key, value)
        node = SipServer(cfg, on_call, **node_kw)
        await node.start()
        pids: set[int] = set(node.worker_pids)
        try:
            yield node
            pids.update(node.worker_pids)
        finally:
            await asyncio.wait_for(node.stop(), timeout=20)
        leftover = [p for p in pids if alive(p)]
        assert not leftover, f"worker processes left behind: {leftover}"

    return factory


@pytest.fixture
def hears_own_tone(helpers: Any) -> Callable[[DialResult, float], None]:
    """Checks that a dialer got its own tone back (the node's on_call echoed it)."""

    def check(result: DialResult, freq: float) -> None:
        assert result.sip_final_status == 200, result.error
        ratio = helpers.tone_ratio(result.received, freq)
        assert ratio > 0.8, f"caller at {freq} Hz heard {ratio:.2f} of its tone back"

    return check
