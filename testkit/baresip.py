"""baresip callers for the wire benchmark: each plays its script on a SIP port of its own,
a concurrency level's callers at once.

Unlike the tests' recording caller (``tests/support/baresip.py``), these callers record
nothing: what they sent and heard is read from the packet capture, and their fixed SIP
port is how the capture tells their calls apart.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from testkit.question_script import Script
from testkit.voices import write_wav


@dataclass(frozen=True)
class Caller:
    """A baresip caller of one concurrency level."""

    concurrency: int
    index: int  # across the whole run
    sip_port: int
    script: Script


#: What baresip prints when a call is over (hung up by either side, or failed).
CALL_OVER = b" terminated (duration"
BARESIP_CONFIG = """\
poll_method epoll
sip_listen 127.0.0.1:{sip_port}
audio_player aufile,{dir}/heard.wav
audio_source aufile,{source}
audio_alert aufile,{dir}/heard.wav
audio_srate 8000
audio_channels 1
net_interface 127.0.0.1
rtp_ports {rtp_first}-{rtp_last}
module_path /usr/lib/baresip/modules
module stdio.so
module g711.so
module aufile.so
module_app account.so
module_app menu.so
"""


def prepare_caller(caller: Caller, workdir: Path, rtp_ports: range, codec: str) -> None:
    """A baresip configuration folder for ``caller``: config, account and script WAV."""
    workdir.mkdir(parents=True, exist_ok=True)
    source = workdir / "script.wav"
    write_wav(source, caller.script.pcm)
    (workdir / "config").write_text(
        BARESIP_CONFIG.format(
            sip_port=caller.sip_port,
            dir=workdir,
            source=source,
            rtp_first=rtp_ports.start,
            rtp_last=rtp_ports.stop - 1,
        )
    )
    (workdir / "accounts").write_text(
        f"<sip:caller{caller.index}@127.0.0.1>;regint=0;audio_codecs={codec.lower()}\n"
    )


async def run_caller(exe: str, uri: str, caller: Caller, workdir: Path) -> str | None:
    """Run one baresip call through its script (from ``prepare_caller``).

    baresip hangs up when its source WAV ends but stays up until ``-t``; it is stopped
    (SIGTERM, by its PID) once it reports the call over. Returns None when the call ended,
    else the end of baresip's output.
    """
    timeout_s = int(caller.script.seconds + 15)
    proc = await asyncio.create_subprocess_exec(
        exe, "-4", "-f", str(workdir), "-e", f"/dial {uri}", "-t", str(timeout_s),
        cwd=workdir, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    assert proc.stdout is not None
    output = b""
    ended = False
    deadline = time.monotonic() + timeout_s + 20
    try:
        while time.monotonic() < deadline:
            try:
                chunk = await asyncio.wait_for(proc.stdout.read(4096), 1.0)
            except TimeoutError:
                continue
            if not chunk:
                break
            output = (output + chunk)[-8192:]
            if not ended and CALL_OVER in output:
                ended = True
                await asyncio.sleep(0.5)  # the BYE's answer
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGTERM)
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL if not ended else signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            await proc.wait()
    return None if ended else output.decode(errors="replace")[-2000:]


async def run_level(
    exe: str,
    uri: str,
    callers: Sequence[Caller],
    workdir: Path,
    rtp_ports: range,
    *,
    codec: str,
    stagger_s: float,
) -> None:
    """Every caller of one concurrency level at once (starts ``stagger_s`` apart)."""

    for caller in callers:
        prepare_caller(caller, workdir / f"caller{caller.index}", rtp_ports, codec)

    async def one(k: int, caller: Caller) -> None:
        await asyncio.sleep(k * stagger_s)
        problem = await run_caller(exe, uri, caller, workdir / f"caller{caller.index}")
        if problem is not None:
            print(f"caller {caller.index}: the call did not end:\n{problem}", file=sys.stderr)

    await asyncio.gather(*(one(k, c) for k, c in enumerate(callers)))
