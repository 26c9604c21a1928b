"""baresip, a SIP client from Debian, as a scripted caller that records both directions."""

from __future__ import annotations

import shutil
import subprocess
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

CONFIG = """\
poll_method epoll
sip_listen 127.0.0.1:0
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
class BaresipCall:
    """What baresip sent (its ``enc`` dump) and heard (``dec``), 8 kHz int16."""

    sent: npt.NDArray[np.int16]
    received: npt.NDArray[np.int16]
    log: str


def _read(path: Path) -> npt.NDArray[np.int16]:
    with wave.open(str(path), "rb") as wav:
        return np.frombuffer(wav.readframes(wav.getnframes()), "<i2").copy()


def baresip_call(
    uri: str,
    source_wav_8k: Path,
    workdir: Path,
    timeout_s: int,
    *,
    account_params: str = "",
    config: str = "",
) -> BaresipCall:
    """Dial ``uri``, play the WAV (baresip hangs up when it ends), return both directions.

    ``account_params`` are added to the account line (``;mediaenc=srtp-mand``), ``config``
    lines to the configuration (``module srtp.so``).
    """
    exe = shutil.which("baresip")
    if exe is None:
        raise RuntimeError("baresip is not installed (apt-get install baresip-core)")
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "rec").mkdir(exist_ok=True)
    with wave.open(str(workdir / "player.wav"), "wb") as silent:
        silent.setnchannels(1)
        silent.setsampwidth(2)
        silent.setframerate(8000)
        silent.writeframes(bytes(1600))
    (workdir / "config").write_text(CONFIG.format(dir=workdir, source=source_wav_8k) + config)
    (workdir / "accounts").write_text(f"<sip:caller@127.0.0.1>;regint=0{account_params}\n")
    proc = subprocess.run(
        [exe, "-4", "-f", str(workdir), "-e", f"/dial {uri}", "-t", str(timeout_s)],
        cwd=workdir,
        capture_output=True,
        timeout=timeout_s + 20,
        check=False,
    )
    log = proc.stdout.decode(errors="replace") + proc.stderr.decode(errors="replace")
    enc = sorted((workdir / "rec").glob("dump-*-enc.wav"))
    dec = sorted((workdir / "rec").glob("dump-*-dec.wav"))
    if not enc or not dec:
        raise RuntimeError(f"baresip recorded nothing:\n{log[-3000:]}")
    return BaresipCall(sent=_read(enc[-1]), received=_read(dec[-1]), log=log)
