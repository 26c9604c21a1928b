"""Outbound test caller: dial a SIP URI, play scripted audio, record both directions.

pjsua2 allows one ``Endpoint`` per process, and the bot's endpoint may live in the caller's
process, so ``dial()`` runs the SIP work in a child process (``python -m telephony.dialer
--worker DIR``) and reads the result back from files.

Both recorded directions come from the same media-port ticks: ``sent[i]`` and ``received[i]``
belong to the same 20 ms tick ``i`` (``first_tick_at + i * 0.02``, ``time.monotonic()``, which
on Linux is one clock for every process), so the caller's last voiced frame and the bot's
first voiced frame can be compared on one timeline.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import sys
import tempfile
import threading
import time
import wave
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pjsua2 as pj
import soxr

from telephony import pjsip_c, srtp, stream_release
from telephony.config import SAMPLE_RATE
from telephony.framebuf import pcm_port_format, read_frame, write_frame

RATE = SAMPLE_RATE
FRAME_SAMPLES = RATE // 50
FRAME_BYTES = FRAME_SAMPLES * 2
TICK_S = 0.02
ANSWER_TIMEOUT_S = 15.0


@dataclass
class DialResult:
    """What happened on a test call."""

    sip_final_status: int  # 200 if answered, else the final response code (0: none)
    answered_at: float | None  # time.monotonic() when the 200 OK arrived
    invite_to_answer_ms: float | None
    first_tick_at: float | None  # time.monotonic() of sample 0 of sent/received
    sent: npt.NDArray[np.int16]  # what we played, one 20 ms frame per tick
    received: npt.NDArray[np.int16]  # what we heard, same ticks
    dtmf_sent: list[str] = field(default_factory=list)
    #: Refer-To of each REFER the far end sent (each declined: this caller stays on the call).
    transfer_requests: list[str] = field(default_factory=list)
    ended_by_remote: bool = False
    codec: str = ""
    error: str = ""
    #: SDP of the far end's 200 OK (its answer), "" if none came.
    answer_sdp: str = ""
    #: The call's stream left the bridge before its media was torn down: before our BYE,
    #: or when the far end's BYE arrived (``telephony.stream_release``).
    stream_released: bool = False


# --------------------------------------------------------------------------- worker side


@dataclass
class DialSpec:
    """Everything the worker needs to place one call."""

    uri: str
    script: list[tuple[float, bytes]]
    record_seconds: float
    local_port: int = 0
    bind_host: str = "127.0.0.1"
    hangup_after_play_s: float | None = None
    dtmf: list[tuple[float, str]] = field(default_factory=list)
    codecs: Sequence[str] = ("PCMU", "PCMA")
    log_level: int = 1
    #: Offer SRTP (RTP/SAVP with SDES a=crypto) and insist on it (pjmedia's "mandatory").
    srtp: bool = False
    #: Print ``ready`` once set up, then place the call when a line arrives on stdin.
    gated: bool = False


@dataclass
class DialGate:
    """Holds a dial back until ``go`` is set; ``ready`` is set once its dialer has started
    and set up (a child process: seconds on a busy machine). Calls that must overlap, or
    follow each other closely, are placed through gates instead of on process start-up."""

    ready: asyncio.Event = field(default_factory=asyncio.Event)
    go: asyncio.Event = field(default_factory=asyncio.Event)


class _Recorder(pj.AudioMediaPort):  # type: ignore[misc]
    """Plays the script and records both directions, indexed by bridge tick."""

    def __init__(self, spec: DialSpec) -> None:
        super().__init__()
        self.max_ticks = int(spec.record_seconds / TICK_S) + 1
        self.sent = np.zeros((self.max_ticks, FRAME_SAMPLES), dtype=np.int16)
        self.received = np.zeros((self.max_ticks, FRAME_SAMPLES), dtype=np.int16)
        # Each script item starts at a tick; frames are queued by tick, not by wall time.
        self.pending = sorted((round(at / TICK_S), pcm) for at, pcm in spec.script)
        self.playout: deque[bytes] = deque()
        self.lock = threading.Lock()
        self.tick = -1
        self.first_tick_at: float | None = None
        self.play_done_tick: int | None = None
        self.silence = bytes(FRAME_BYTES)

    def create(self) -> None:
        self.createPort("dialer", pcm_port_format(RATE))

    def onFrameRequested(self, frame: Any) -> None:
        with self.lock:
            self.tick += 1
            tick = self.tick
            if tick == 0:
                self.first_tick_at = time.monotonic()
            while self.pending and self.pending[0][0] <= tick:
                pcm = self.pending.pop(0)[1]
                pcm += bytes(-len(pcm) % FRAME_BYTES)
                self.playout.extend(
                    pcm[i : i + FRAME_BYTES] for i in range(0, len(pcm), FRAME_BYTES)
                )
            data = self.playout.popleft() if self.playout else self.silence
            if not self.playout and not self.pending and self.play_done_tick is None:
                self.play_done_tick = tick
        if tick < self.max_ticks:
            self.sent[tick] = np.frombuffer(data, dtype="<i2")
        write_frame(frame, data)

    def onFrameReceived(self, frame: Any) -> None:
        tick = self.tick
        if 0 <= tick < self.max_ticks and frame.type == pj.PJMEDIA_FRAME_TYPE_AUDIO:
            pcm = read_frame(frame)
            if len(pcm) == FRAME_BYTES:
                self.received[tick] = np.frombuffer(pcm, dtype="<i2")


class _OutboundCall(pj.Call):  # type: ignore[misc]
    def __init__(self, account: Any, port: _Recorder) -> None:
        super().__init__(account)
        self.port = port
        self.status = 0
        self.answered_at: float | None = None
        self.disconnected = False
        self.stream_released: bool | None = None  # None: not tried
        self.codec = ""
        self.answer_sdp = ""
        self.transfer_requests: list[str] = []

    def onCallTransferRequest(self, prm: Any) -> None:
        # A test caller does not follow transfers: it notes the target and declines.
        self.transfer_requests.append(str(prm.dstUri))
        prm.statusCode = 603

    def onCallState(self, prm: Any) -> None:
        if not self.answer_sdp:
            self.answer_sdp = _answer_sdp(prm.e)
        info = self.getInfo()
        if info.state == pj.PJSIP_INV_STATE_CONFIRMED and self.answered_at is None:
            self.answered_at = time.monotonic()
            self.status = 200
        elif info.state == pj.PJSIP_INV_STATE_DISCONNECTED:
            self.disconnected = True
            if self.answered_at is None:
                self.status = int(info.lastStatusCode)

    def onCallMediaState(self, prm: Any) -> None:
        info = self.getInfo()
        for idx, media in enumerate(info.media):
            if media.type == pj.PJMEDIA_TYPE_AUDIO and media.status == pj.PJSUA_CALL_MEDIA_ACTIVE:
                aud = self.getAudioMedia(idx)
                aud.startTransmit(self.port)
                self.port.startTransmit(aud)
                si = self.getStreamInfo(idx)
                self.codec = f"{si.codecName}/{si.codecClockRate}"


class _StreamRelease:
    """The call's stream out of the bridge before its media goes, whoever ends the call
    (``telephony.stream_release``: the test dialer had the race that module describes)."""

    def __init__(self, call: _OutboundCall, metronome: stream_release.Metronome) -> None:
        self.call: _OutboundCall | None = call
        self.metronome: stream_release.Metronome | None = metronome

    def release(self) -> None:
        call = self.call
        if call is not None and call.stream_released is None and call.isActive():
            call.stream_released = stream_release.release(int(call.getId()), self.metronome)

    def on_bye(self, call_id: str | None) -> None:
        call = self.call
        with contextlib.suppress(pj.Error):
            if call is not None and str(call.getInfo().callIdString) == call_id:
                self.release()

    def close(self) -> None:
        """Let go of the pjsua2 objects (they are freed before the library is)."""
        self.call = self.metronome = None


def _answer_sdp(event: Any) -> str:
    """The SDP body of a received 2xx to our INVITE, or "" (any other event)."""
    if event.type != pj.PJSIP_EVENT_TSX_STATE:
        return ""
    tsx = event.body.tsxState
    if tsx.type != pj.PJSIP_EVENT_RX_MSG:
        return ""
    try:
        message: str = tsx.src.rdata.wholeMsg
    except UnicodeDecodeError:
        return ""
    head, _, body = message.replace("\r\n", "\n").partition("\n\n")
    first = head.split("\n", 1)[0].split()
    is_2xx = len(first) > 1 and first[0] == "SIP/2.0" and first[1].startswith("2")
    return body if is_2xx and "INVITE" in head.upper() else ""


def _create_endpoint(spec: DialSpec) -> Any:
    ep = pj.Endpoint()
    ep.libCreate()
    cfg = pj.EpConfig()
    cfg.uaConfig.threadCnt = 0
    cfg.uaConfig.mainThreadOnly = True
    cfg.uaConfig.userAgent = "Switchboard-dialer"
    cfg.logConfig.level = spec.log_level
    cfg.logConfig.consoleLevel = spec.log_level
    cfg.medConfig.clockRate = RATE
    cfg.medConfig.sndClockRate = RATE
    cfg.medConfig.noVad = True
    cfg.medConfig.ecTailLen = 0
    ep.libInit(cfg)
    ep.audDevManager().setNullDev()
    wanted = [c.upper() for c in spec.codecs]
    for c in ep.codecEnum2():
        name = c.codecId.split("/")[0].upper()
        ep.codecSetPriority(c.codecId, 255 - wanted.index(name) if name in wanted else 0)
    tcfg = pj.TransportConfig()
    tcfg.port = spec.local_port
    tcfg.boundAddress = spec.bind_host
    ep.transportCreate(pj.PJSIP_TRANSPORT_UDP, tcfg)
    stream = uri_transport(spec.uri)
    if stream in ("tcp", "tls"):  # the URI's transport: the call goes over it
        scfg = pj.TransportConfig()
        scfg.port = 0
        scfg.boundAddress = spec.bind_host
        if stream == "tls":
            # The node's certificate is whatever the operator configured; the dialer is a
            # test tool and does not check it.
            scfg.tlsConfig.verifyServer = False
            scfg.tlsConfig.method = pj.PJSIP_TLSV1_2_METHOD
        ep.transportCreate(
            pj.PJSIP_TRANSPORT_TCP if stream == "tcp" else pj.PJSIP_TRANSPORT_TLS, scfg
        )
    ep.libStart()
    return ep


def uri_transport(uri: str) -> str:
    """The ``transport`` parameter of a SIP URI, lower-case ("udp" if none)."""
    m = re.search(r";\s*transport\s*=\s*([A-Za-z]+)", uri.split("?", 1)[0])
    return m.group(1).lower() if m else "udp"


def run_call(spec: DialSpec) -> tuple[dict[str, Any], npt.NDArray[np.int16], npt.NDArray[np.int16]]:
    """Place one call in this process (which must hold no other pjsua2 Endpoint).

    Returns (summary, sent, received).
    """
    ep = _create_endpoint(spec)
    acfg = pj.AccountConfig()
    acfg.idUri = f"sip:dialer@{spec.bind_host}"
    mtc = acfg.mediaConfig.transportConfig
    mtc.port = random.randrange(20000, 30000, 2)
    mtc.portRange = 2000
    mtc.boundAddress = spec.bind_host
    srtp.configure(acfg.mediaConfig, "mandatory" if spec.srtp else "off")
    acc = pj.Account()
    acc.create(acfg, True)
    port = _Recorder(spec)
    port.create()
    call = _OutboundCall(acc, port)
    metronome = stream_release.Metronome(RATE)
    releaser = _StreamRelease(call, metronome)
    pjsip_c.watch_byes(releaser.on_bye)
    dtmf_sent: list[str] = []
    dtmf_queue = sorted(spec.dtmf)
    error = ""
    by_remote = True
    if spec.gated:
        print("ready", flush=True)
        sys.stdin.readline()
    invite_at = time.monotonic()
    try:
        call.makeCall(spec.uri, pj.CallOpParam(True))
        answer_deadline = invite_at + ANSWER_TIMEOUT_S
        while not call.disconnected:
            ep.libHandleEvents(5)
            if call.answered_at is None:
                if time.monotonic() > answer_deadline:
                    error = f"no answer within {ANSWER_TIMEOUT_S:.0f} s"
                    break
                continue
            tick = port.tick
            while dtmf_queue and tick >= 0 and dtmf_queue[0][0] <= tick * TICK_S:
                digits = dtmf_queue.pop(0)[1]
                call.dialDtmf(digits)
                dtmf_sent.append(digits)
            if tick >= port.max_ticks - 1:
                break
            done = port.play_done_tick
            if (
                spec.hangup_after_play_s is not None
                and done is not None
                and not dtmf_queue
                and tick - done >= spec.hangup_after_play_s / TICK_S
            ):
                break
        if not call.disconnected:
            by_remote = False
            if call.isActive():
                releaser.release()
                call.hangup(pj.CallOpParam(True))
            end = time.monotonic() + 2.0
            while not call.disconnected and time.monotonic() < end:
                ep.libHandleEvents(10)
    except pj.Error as exc:
        error = exc.info()
    ticks = max(0, min(port.tick + 1, port.max_ticks))
    summary = {
        "sip_final_status": call.status,
        "answered_at": call.answered_at,
        "invite_to_answer_ms": (
            (call.answered_at - invite_at) * 1000 if call.answered_at is not None else None
        ),
        "first_tick_at": port.first_tick_at,
        "dtmf_sent": dtmf_sent,
        "transfer_requests": call.transfer_requests,
        "ended_by_remote": by_remote and call.disconnected,
        "codec": call.codec,
        "error": error,
        "answer_sdp": call.answer_sdp,
        "stream_released": bool(call.stream_released),
    }
    sent, received = port.sent[:ticks].reshape(-1), port.received[:ticks].reshape(-1)
    # pjsua2 objects must go before the library does; the media clock stops before the
    # port goes (a port freed while it ticks is called back through freed memory).
    ep.audDevManager().setNoDev()
    releaser.close()
    del call, port, metronome
    acc.shutdown()
    del acc
    ep.libDestroy(pj.PJSUA_DESTROY_NO_NETWORK)
    return summary, sent, received


# --------------------------------------------------------------------------- parent side


async def dial(
    uri: str,
    *,
    play: bytes | None = None,
    record_seconds: float,
    local_port: int = 0,
    bind_host: str = "127.0.0.1",
    hangup_after_play_s: float | None = None,
    play_at_s: float = 0.0,
    script: list[tuple[float, bytes]] | None = None,
    dtmf: list[tuple[float, str]] | None = None,
    codecs: Sequence[str] = ("PCMU", "PCMA"),
    log_level: int = 1,
    srtp: bool = False,
    gate: DialGate | None = None,
) -> DialResult:
    """Call ``uri`` from a child process and return what was sent and heard.

    ``play`` (PCM16 mono 8 kHz) starts ``play_at_s`` after media starts; ``script`` adds more
    ``(offset_s, pcm)`` items on the same clock; ``dtmf`` sends ``(offset_s, digits)`` as
    RFC 4733 events. The call lasts ``record_seconds`` unless ``hangup_after_play_s`` ends it
    that long after the last scripted audio, or the remote hangs up. ``srtp`` offers
    RTP/SAVP with SDES keys and accepts nothing else. With ``gate``, the call is placed
    when its ``go`` is set.
    """
    items = list(script or [])
    if play:
        items.append((play_at_s, play))
    with tempfile.TemporaryDirectory(prefix="sb-dial-") as tmp:
        out = Path(tmp)
        spec: dict[str, Any] = {
            "uri": uri,
            "script": [],
            "record_seconds": record_seconds,
            "local_port": local_port,
            "bind_host": bind_host,
            "hangup_after_play_s": hangup_after_play_s,
            "dtmf": [list(d) for d in (dtmf or [])],
            "codecs": list(codecs),
            "log_level": log_level,
            "srtp": srtp,
            "gated": gate is not None,
        }
        for n, (at, pcm) in enumerate(items):
            path = out / f"play{n}.raw"
            path.write_bytes(pcm)
            spec["script"].append([at, str(path)])
        (out / "spec.json").write_text(json.dumps(spec))
        piped = asyncio.subprocess.PIPE if gate is not None else None
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "telephony.dialer",
            "--worker",
            str(out),
            stdin=piped,
            stdout=piped or asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": _package_root()},
        )
        try:
            if gate is not None:
                await _through_gate(proc, gate)
            _, err = await asyncio.wait_for(proc.communicate(), timeout=record_seconds + 25)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise RuntimeError(f"dialer worker did not finish for {uri}") from None
        except BaseException:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            raise
        result_path = out / "result.json"
        if proc.returncode != 0 or not result_path.exists():
            tail = err.decode(errors="replace")[-2000:]
            raise RuntimeError(f"dialer worker failed (rc={proc.returncode}): {tail}")
        summary = json.loads(result_path.read_text())
        return DialResult(
            sent=np.load(out / "sent.npy"),
            received=np.load(out / "received.npy"),
            **summary,
        )


async def _through_gate(proc: asyncio.subprocess.Process, gate: DialGate) -> None:
    """Wait for the worker's ``ready``, set ``gate.ready``, and let it dial on ``gate.go``."""
    assert proc.stdin is not None and proc.stdout is not None

    async def ready() -> None:
        assert proc.stdout is not None
        while (line := await proc.stdout.readline()) != b"ready\n":  # pjlib logs there too
            if not line:
                raise RuntimeError("dialer worker ended before it was ready")

    await asyncio.wait_for(ready(), timeout=60)
    gate.ready.set()
    await gate.go.wait()
    proc.stdin.write(b"go\n")
    await proc.stdin.drain()


def _package_root() -> str:
    root = str(Path(__file__).resolve().parent.parent)
    extra = os.environ.get("PYTHONPATH")
    return f"{root}{os.pathsep}{extra}" if extra else root


def _run_worker(out_dir: Path) -> int:
    raw = json.loads((out_dir / "spec.json").read_text())
    raw["script"] = [(float(at), Path(p).read_bytes()) for at, p in raw["script"]]
    raw["dtmf"] = [(float(at), str(d)) for at, d in raw["dtmf"]]
    summary, sent, received = run_call(DialSpec(**raw))
    np.save(out_dir / "sent.npy", sent)
    np.save(out_dir / "received.npy", received)
    (out_dir / "result.json").write_text(json.dumps(summary))
    return 0


# --------------------------------------------------------------------------- CLI


def read_wav_8k(path: str) -> bytes:
    """Read a PCM16 WAV of any rate/channels as PCM16 mono 8 kHz (resampled with soxr)."""
    with wave.open(path, "rb") as w:
        if w.getsampwidth() != 2:
            raise ValueError(f"{path}: only 16-bit PCM WAV is supported (convert with sox)")
        rate, channels = w.getframerate(), w.getnchannels()
        data = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    if channels > 1:
        data = data.reshape(-1, channels).mean(axis=1).astype(np.int16)
    if rate != RATE:
        data = soxr.resample(data, rate, RATE).astype(np.int16)
    return data.astype("<i2").tobytes()


def write_wav(path: str, samples: npt.NDArray[np.int16], channels: int = 1) -> None:
    """Write PCM16 at 8 kHz; ``samples`` is interleaved when ``channels`` is 2."""
    with wave.open(path, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(samples.astype("<i2").tobytes())


def _parse_dtmf(items: list[str]) -> list[tuple[float, str]]:
    out = []
    for item in items:
        at, _, digits = item.partition(":")
        out.append((float(at), digits))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m telephony.dialer sip:bot@127.0.0.1:5060 --say in.wav --record out.wav``."""
    parser = argparse.ArgumentParser(prog="python -m telephony.dialer", description=__doc__)
    parser.add_argument("uri", nargs="?")
    parser.add_argument("--say", help="WAV to play (any rate; resampled to 8 kHz)")
    parser.add_argument("--play-at", type=float, default=0.0, help="seconds into the call")
    parser.add_argument("--record", help="WAV of what the far end sent us")
    parser.add_argument("--record-both", help="stereo WAV: left = we sent, right = we heard")
    parser.add_argument("--duration", type=float, default=15.0, help="max call length, s")
    parser.add_argument("--hangup-after-play", type=float, default=None, metavar="S")
    parser.add_argument("--dtmf", action="append", default=[], metavar="AT:DIGITS")
    parser.add_argument("--local-port", type=int, default=0)
    parser.add_argument("--bind-host", default="127.0.0.1")
    parser.add_argument("--log-level", type=int, default=1)
    parser.add_argument(
        "--srtp",
        action="store_true",
        help="offer SRTP (RTP/SAVP, SDES a=crypto) and refuse a plain-RTP answer",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return _run_worker(Path(args.worker))
    if not args.uri:
        parser.error("a SIP URI is required")
    play = read_wav_8k(args.say) if args.say else b""
    spec = DialSpec(
        uri=args.uri,
        script=[(args.play_at, play)] if play else [],
        record_seconds=args.duration,
        local_port=args.local_port,
        bind_host=args.bind_host,
        hangup_after_play_s=args.hangup_after_play,
        dtmf=_parse_dtmf(args.dtmf),
        log_level=args.log_level,
        srtp=args.srtp,
    )
    stdout = os.dup(1)
    os.dup2(2, 1)  # pjlib logs to stdout; keep stdout for the JSON summary
    try:
        summary, sent, received = run_call(spec)
    finally:
        sys.stdout.flush()
        os.dup2(stdout, 1)
        os.close(stdout)
    if args.record:
        write_wav(args.record, received)
    if args.record_both:
        write_wav(args.record_both, np.stack([sent, received], axis=1).reshape(-1), channels=2)
    print(json.dumps(summary, indent=2))
    return 0 if summary["sip_final_status"] == 200 else 1


if __name__ == "__main__":
    sys.exit(main())
