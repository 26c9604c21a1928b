"""The node registers with a PBX or provider: digest, renewal, failover, against sipp registrars."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from node.settings import SettingsError, load_settings
from telephony import CallHandle, EndpointConfig, SipServer
from telephony.registration import RegistrationSettings, refresh_after, split_host_port
from telephony.remote_call import RemoteCall

pytestmark = pytest.mark.sip

SIPP = shutil.which("sipp")
USER, PASSWORD, REALM = "bot", "s3cret-reg", "provider.test"

RESPONSE_HEAD = """[last_Via:]
[last_From:]
[last_To:];tag=[pid]SIPpTag01[call_number]
[last_Call-ID:]
[last_CSeq:]"""


def challenge_then_accept(expires_s: int, *, password: str = PASSWORD) -> str:
    """One registration: 401 with a digest challenge, then 200 if the credentials check out
    (``verifyauth``); anything else fails the sipp run."""
    return f"""  <recv request="REGISTER"/>
  <send><![CDATA[

SIP/2.0 401 Unauthorized
{RESPONSE_HEAD}
WWW-Authenticate: Digest realm="{REALM}", nonce="[pid]n[call_number]x[cseq]", qop="auth",
  algorithm=MD5
Content-Length: 0

]]></send>
  <recv request="REGISTER">
    <action>
      <ereg regexp="Digest .*username=.{USER}." search_in="hdr" header="Authorization:"
            check_it="true" assign_to="seen"/>
      <verifyauth assign_to="authvalid" username="{USER}" password="{password}"/>
    </action>
  </recv>
  <Reference variables="seen"/>
  <nop hide="true" test="authvalid" next="good[cseq]"/>
  <recv request="NEVER" timeout="100"/>
  <label id="good[cseq]"/>
  <send><![CDATA[

SIP/2.0 200 OK
{RESPONSE_HEAD}
[last_Contact:];expires={expires_s}
Content-Length: 0

]]></send>
"""


def scenario(*steps: str) -> str:
    head = '<?xml version="1.0" encoding="ISO-8859-1" ?>\n<scenario name="registrar">\n'
    return head + "".join(steps) + "</scenario>\n"


UNAVAILABLE = f"""  <recv request="REGISTER"/>
  <send><![CDATA[

SIP/2.0 503 Service Unavailable
{RESPONSE_HEAD}
Content-Length: 0

]]></send>
"""


def _label(xml: str) -> str:
    """sipp labels must be unique: number the ``good[cseq]`` placeholders in order."""
    out, n = xml, 0
    while "good[cseq]" in out:
        n += 1
        out = out.replace("good[cseq]", f"good{n}", 2)
    return out.replace("x[cseq]", "x")


@contextlib.asynccontextmanager
async def registrar(
    xml: str, port: int, workdir: Path, timeout_s: float = 20.0
) -> AsyncIterator[asyncio.subprocess.Process]:
    """sipp as a registrar (UAS) on ``127.0.0.1:port`` for one registration's Call-ID."""
    if SIPP is None:
        pytest.skip("sipp (Debian sip-tester) is not installed")
    write_scenario(workdir, _label(xml))
    args = [
        SIPP, "-sf", "scenario.xml", "-m", "1", "-i", "127.0.0.1", "-p", str(port),
        "-mp", str(random.randrange(20000, 29000, 4)),
        "-timeout", f"{timeout_s:.0f}s", "-timeout_error", "-trace_err", "-trace_msg",
        "-nostdin",
    ]  # fmt: skip
    proc = await asyncio.create_subprocess_exec(
        *args,
        cwd=workdir,
        stdin=subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        await until_bound(port)
        yield proc
    finally:
        if proc.returncode is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), timeout_s + 10)
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def until_bound(port: int, timeout_s: float = 10.0) -> None:
    """Wait until something holds UDP ``port`` on loopback (sipp is listening)."""
    deadline = time.monotonic() + timeout_s
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return
        assert time.monotonic() < deadline, f"sipp did not bind port {port}"
        await asyncio.sleep(0.05)


def write_scenario(workdir: Path, xml: str) -> None:
    workdir.mkdir(parents=True)
    (workdir / "scenario.xml").write_text(xml)


def read_logs(workdir: Path, pattern: str) -> str:
    return "".join(p.read_text(errors="replace") for p in workdir.glob(pattern))


async def finished(proc: asyncio.subprocess.Process, workdir: Path, timeout_s: float = 25.0) -> str:
    """sipp's exit: asserts it succeeded; returns the messages it saw."""
    out, _ = await asyncio.wait_for(proc.communicate(), timeout_s)
    messages = read_logs(workdir, "*_messages.log")
    errors = read_logs(workdir, "*_errors.log")
    assert proc.returncode == 0, out.decode(errors="replace")[-2000:] + errors + messages[-3000:]
    return messages


async def no_calls(call: CallHandle | RemoteCall) -> None:
    raise AssertionError("no call expected")


def node_config(free_udp_port: Callable[[], int], *registrars: int, **kw: object) -> EndpointConfig:
    settings = RegistrationSettings(
        registrars=tuple(f"127.0.0.1:{p}" for p in registrars),
        user=USER,
        domain=REALM,
        password=PASSWORD,  # type: ignore[arg-type]
        timeout_s=1.0,
        retry_s=1.0,
        **kw,  # type: ignore[arg-type]
    )
    return EndpointConfig(
        port=free_udp_port(),
        rtp_port_start=random.randrange(30000, 38000, 2),
        rtp_port_range=200,
        log_level=1,
        max_calls=2,
        registration=settings,
    )


async def wait_until(cond: Callable[[], bool], timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


async def test_registers_with_digest_and_renews_before_expiry(
    free_udp_port: Callable[[], int], tmp_path: Path
) -> None:
    port = free_udp_port()
    # Granted 2 s: renewed after 1 s, each time challenged again.
    xml = scenario(challenge_then_accept(2), challenge_then_accept(2))
    async with registrar(xml, port, tmp_path / "primary") as proc:
        node = SipServer(node_config(free_udp_port, port, expires_s=2), no_calls)
        await node.start()
        try:
            reg = node.registration
            assert reg is not None
            messages = await finished(proc, tmp_path / "primary")
            stats = node.stats()
        finally:
            await asyncio.wait_for(node.stop(), 20)
    assert stats["register_ok"] == 2 and stats["register_auth_refused"] == 0
    assert stats["front_registration_responses"] >= 4
    # Four REGISTERs: two without credentials, two with a digest answer; one Call-ID.
    registers = [m for m in messages.split("\n\n") if m.lstrip().startswith("REGISTER sip:")]
    assert len(registers) >= 4
    authorized = [m for m in registers if "Authorization: Digest" in m]
    assert len(authorized) == 2
    assert all(f'username="{USER}"' in m and 'realm="provider.test"' in m for m in authorized)
    assert all(f"Contact: <sip:{USER}@127.0.0.1:{node.config.port}>" in m for m in registers)
    assert (
        len({line for m in registers for line in m.splitlines() if line.startswith("Call-ID")}) == 1
    )


async def test_fails_over_to_the_second_registrar(
    free_udp_port: Callable[[], int], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first, second = free_udp_port(), free_udp_port()
    async with (
        registrar(scenario(UNAVAILABLE), first, tmp_path / "first") as down,
        registrar(scenario(challenge_then_accept(60)), second, tmp_path / "second") as up,
    ):
        node = SipServer(node_config(free_udp_port, first, second), no_calls)
        with caplog.at_level(logging.INFO, logger="telephony.registration"):
            await node.start()
            try:
                reg = node.registration
                assert reg is not None
                await finished(down, tmp_path / "first")
                await finished(up, tmp_path / "second")
                await wait_until(lambda: reg.registered)
                stats = node.stats()
                assert reg.registrar == f"127.0.0.1:{second}"
            finally:
                await asyncio.wait_for(node.stop(), 20)
    assert stats["register_failovers"] == 1 and stats["register_ok"] == 1
    assert stats["registered"] == 1
    assert f"failed (503 Service Unavailable): failing over to 127.0.0.1:{second}" in caplog.text
    assert f"registered sip:{USER}@{REALM} with 127.0.0.1:{second} for 60 s" in caplog.text


async def test_a_wrong_password_is_reported_as_refused(
    free_udp_port: Callable[[], int], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_udp_port()
    refusing = f"""  <recv request="REGISTER"/>
  <send><![CDATA[

SIP/2.0 401 Unauthorized
{RESPONSE_HEAD}
WWW-Authenticate: Digest realm="{REALM}", nonce="n1", algorithm=MD5
Content-Length: 0

]]></send>
  <recv request="REGISTER"/>
  <send><![CDATA[

SIP/2.0 403 Forbidden
{RESPONSE_HEAD}
Content-Length: 0

]]></send>
"""
    async with registrar(scenario(refusing), port, tmp_path / "r") as proc:
        node = SipServer(node_config(free_udp_port, port), no_calls)
        with caplog.at_level(logging.WARNING, logger="telephony.registration"):
            await node.start()
            try:
                await finished(proc, tmp_path / "r")
                reg = node.registration
                assert reg is not None
                await wait_until(lambda: reg.counters["register_auth_refused"] == 1)
                assert not reg.registered
            finally:
                await asyncio.wait_for(node.stop(), 20)
    assert "credentials refused (403 Forbidden)" in caplog.text


def test_settings_and_renewal_times() -> None:
    assert split_host_port("pbx.example.com") == ("pbx.example.com", 5060)
    assert split_host_port("[::1]:5070") == ("::1", 5070)
    assert refresh_after(2) == 1.0 and refresh_after(300) == 270.0
    listed = RegistrationSettings(registrars="a.example:5060, b.example", user="bot")  # type: ignore[arg-type]
    assert listed.registrars == ("a.example:5060", "b.example")
    with pytest.raises(ValueError, match="register as whom"):
        RegistrationSettings(registrars=("a.example",))
    with pytest.raises(ValueError, match="not host"):
        RegistrationSettings(registrars=("sip:a.example",), user="bot")


def test_the_node_reads_the_registration_from_its_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(
        "SWITCHBOARD_SIP__REGISTRATION__REGISTRARS", "pbx1.example, pbx2.example:5080"
    )
    monkeypatch.setenv("SWITCHBOARD_SIP__REGISTRATION__USER", "bot")
    monkeypatch.setenv("SWITCHBOARD_SIP__REGISTRATION__PASSWORD", "pw")
    monkeypatch.setenv("SWITCHBOARD_SIP__TRANSFER_TARGETS", "sip:agents@pbx1.example")
    sip = load_settings().sip
    assert sip.registration.registrars == ("pbx1.example", "pbx2.example:5080")
    assert sip.registration.password is not None
    assert sip.registration.password.get_secret_value() == "pw"
    assert sip.transfer_targets == ("sip:agents@pbx1.example",)
    monkeypatch.setenv("SWITCHBOARD_SIP__REGISTRATION__EXPIRE_S", "60")
    with pytest.raises(
        SettingsError, match="did you mean SWITCHBOARD_SIP__REGISTRATION__EXPIRES_S"
    ):
        load_settings()
