"""sipp as a bounded one-call UAC against a SIP port on loopback."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from testkit.ports import free_udp_block, free_udp_port

SIPP = shutil.which("sipp")


@dataclass
class SippRun:
    """Exit status and diagnostics of one sipp run, and the folder it ran in."""

    rc: int
    stdout: str
    errors: str  # contents of the -trace_err file, if any
    workdir: Path

    @property
    def ok(self) -> bool:
        return self.rc == 0


async def run_sipp(xml: str, target_port: int, workdir: Path, *, timeout_s: float) -> SippRun:
    """Run the scenario ``xml`` once against ``127.0.0.1:target_port``.

    ``<log>`` actions go to ``*_logs.log`` in ``workdir`` (``-trace_logs``). sipp gives up
    by itself after ``timeout_s``; it is killed (by its PID) if it does not.
    """
    if SIPP is None:
        raise RuntimeError("sipp is not installed (apt-get install sip-tester)")
    _write(workdir, xml)
    args = [
        SIPP,
        "-sf", "scenario.xml",
        "-m", "1",
        "-l", "1",
        "-i", "127.0.0.1",
        "-mi", "127.0.0.1",
        "-p", str(free_udp_port()),
        "-mp", str(free_udp_block()),
        "-timeout", f"{timeout_s:.0f}s",
        "-timeout_error",
        "-trace_err",
        "-trace_logs",
        "-nostdin",
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
        out, _ = await asyncio.wait_for(proc.communicate(), timeout=timeout_s + 15)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"sipp did not finish within {timeout_s + 15:.0f} s") from None
    assert proc.returncode is not None
    return SippRun(proc.returncode, out.decode(errors="replace")[-3000:], _errors(workdir), workdir)


def _write(workdir: Path, xml: str) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "scenario.xml").write_text(xml)


def _errors(workdir: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in workdir.glob("*_errors.log"))
