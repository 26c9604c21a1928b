"""Agents for transfer tests: SIP clients that a bridged transfer calls.

- ``baresip_agent``: baresip answering by itself (``answermode=auto``), saying what its
  source WAV holds and recording both directions (the sndfile module's dumps); baresip
  hangs up when the WAV ends, so the agent's hang-up is part of the script.
- ``sipp_agent``: sipp as a UAS with a scenario of its own (486 Busy Here, a phone that
  only rings...).

Each listens on a loopback port of its own and is stopped by its PID, bounded in time.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import wave
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from testkit.voices import write_wav

AGENT_CONFIG = """\
poll_method epoll
sip_listen 127.0.0.1:{sip_port}
audio_player aufile,{dir}/player.wav
audio_source aufile,{source}
audio_alert aufile,{dir}/player.wav
audio_srate 8000
audio_channels 1
net_interface 127.0.0.1
module_path /usr/lib/baresip/modules
module stdio.so
module g711.so
module aufile.so
module sndfile.so
module_app account.so
module_app menu.so
snd_path {dir}/rec
"""


@dataclass
class AgentRun:
    """What an agent heard and said (8 kHz int16), and its output."""

    heard: npt.NDArray[np.int16] = field(default_factory=lambda: np.zeros(0, np.int16))
    said: npt.NDArray[np.int16] = field(default_factory=lambda: np.zeros(0, np.int16))
    log: str = ""
    answered: bool = False


def _read(path: Path) -> npt.NDArray[np.int16]:
    with wave.open(str(path), "rb") as wav:
        return np.frombuffer(wav.readframes(wav.getnframes()), "<i2").copy()


async def _stop(proc: asyncio.subprocess.Process, grace_s: float = 5.0) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), grace_s)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
        await proc.wait()


def _prepare_agent(workdir: Path, sip_port: int, pcm: bytes, user: str) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "rec").mkdir(exist_ok=True)
    write_wav(workdir / "voice.wav", pcm)
    write_wav(workdir / "player.wav", bytes(1600))
    (workdir / "config").write_text(
        AGENT_CONFIG.format(sip_port=sip_port, dir=workdir, source=workdir / "voice.wav")
    )
    (workdir / "accounts").write_text(
        f"<sip:{user}@127.0.0.1>;regint=0;answermode=auto;audio_codecs=pcmu,pcma\n"
    )


def _prepare_uas(workdir: Path, xml: str) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "uas.xml").write_text(xml)


@contextlib.asynccontextmanager
async def baresip_agent(
    sip_port: int,
    voice: npt.NDArray[np.int16] | bytes,
    workdir: Path,
    *,
    timeout_s: int,
    user: str = "agent",
) -> AsyncIterator[AgentRun]:
    """An auto-answering baresip, ``sip:<user>@127.0.0.1:sip_port`` (it answers only calls
    to that user), saying ``voice`` once answered.

    The ``AgentRun`` is filled when the block ends (baresip stopped first, by its PID).
    """
    exe = shutil.which("baresip")
    if exe is None:
        raise RuntimeError("baresip is not installed (apt-get install baresip-core)")
    pcm = voice.tobytes() if isinstance(voice, np.ndarray) else voice
    await asyncio.to_thread(_prepare_agent, workdir, sip_port, pcm, user)
    proc = await asyncio.create_subprocess_exec(
        exe, "-4", "-f", str(workdir), "-t", str(timeout_s),
        cwd=workdir, stdin=subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    run = AgentRun()
    output = bytearray()

    async def read() -> None:
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(4096):
            output.extend(chunk)

    reader = asyncio.get_running_loop().create_task(read())
    try:
        # listening once it has printed its account (a second at most on an idle machine)
        for _ in range(100):
            if f"{user}@127.0.0.1".encode() in output or proc.returncode is not None:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        yield run
    finally:
        await _stop(proc)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(reader, 5)
        run.log = output.decode(errors="replace")
        run.answered = "Call established" in run.log or "established" in run.log
        dec = sorted((workdir / "rec").glob("dump-*-dec.wav"))
        enc = sorted((workdir / "rec").glob("dump-*-enc.wav"))
        if dec:
            run.heard = _read(dec[-1])
        if enc:
            run.said = _read(enc[-1])


def busy_uas(code: int = 486, reason: str = "Busy Here") -> str:
    """A sipp UAS scenario: ring once, then refuse the INVITE with ``code``."""
    return f"""<?xml version="1.0" encoding="ISO-8859-1" ?>
<scenario name="agent refuses">
  <recv request="INVITE"/>
  <send><![CDATA[
SIP/2.0 180 Ringing
[last_Via:]
[last_From:]
[last_To:];tag=[pid]SIPpTag01[call_number]
[last_Call-ID:]
[last_CSeq:]
Content-Length: 0

]]></send>
  <pause milliseconds="300"/>
  <send><![CDATA[
SIP/2.0 {code} {reason}
[last_Via:]
[last_From:]
[last_To:];tag=[pid]SIPpTag01[call_number]
[last_Call-ID:]
[last_CSeq:]
Content-Length: 0

]]></send>
  <recv request="ACK"/>
</scenario>
"""


RINGING_UAS = """<?xml version="1.0" encoding="ISO-8859-1" ?>
<scenario name="agent never answers">
  <recv request="INVITE"/>
  <send><![CDATA[
SIP/2.0 180 Ringing
[last_Via:]
[last_From:]
[last_To:];tag=[pid]SIPpTag01[call_number]
[last_Call-ID:]
[last_CSeq:]
Content-Length: 0

]]></send>
  <recv request="CANCEL"/>
  <send><![CDATA[
SIP/2.0 200 OK
[last_Via:]
[last_From:]
[last_To:]
[last_Call-ID:]
[last_CSeq:]
Content-Length: 0

]]></send>
  <send><![CDATA[
SIP/2.0 487 Request Terminated
[last_Via:]
[last_From:]
[last_To:];tag=[pid]SIPpTag01[call_number]
[last_Call-ID:]
CSeq: [last_cseq_number] INVITE
Content-Length: 0

]]></send>
  <recv request="ACK"/>
</scenario>
"""


@contextlib.asynccontextmanager
async def sipp_agent(
    xml: str, sip_port: int, workdir: Path, *, timeout_s: float
) -> AsyncIterator[list[int]]:
    """sipp as a UAS on ``127.0.0.1:sip_port`` playing ``xml`` once.

    Yields a list that holds sipp's exit status once the block has ended (0: the scenario
    ran to its end).
    """
    exe = shutil.which("sipp")
    if exe is None:
        raise RuntimeError("sipp is not installed (apt-get install sip-tester)")
    await asyncio.to_thread(_prepare_uas, workdir, xml)
    proc = await asyncio.create_subprocess_exec(
        exe, "-sf", "uas.xml", "-m", "1", "-i", "127.0.0.1", "-p", str(sip_port),
        "-timeout", f"{timeout_s:.0f}s", "-timeout_error", "-trace_err", "-nostdin",
        cwd=workdir, stdin=subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    status: list[int] = []
    try:
        await asyncio.sleep(0.5)  # listening
        yield status
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), timeout_s + 5)
    finally:
        await _stop(proc)
        status.append(proc.returncode if proc.returncode is not None else -1)
