"""Worker process of a ``SipServer``: one ``SipEndpoint`` whose calls are driven over IPC.

Started by the node as ``python -m telephony.worker --ipc-fd N --parent-pid P --config JSON``
with one end of a Unix ``socketpair`` inherited as fd ``N`` (see ``telephony.ipc``). The
endpoint listens on ``config.host`` at an ephemeral SIP port, announced in ``Ready``.

The worker goes away with its parent: ``PR_SET_PDEATHSIG`` turns the parent's death into
SIGTERM, and EOF on the IPC socket has the same effect. Either, or a ``Stop`` message, hangs
up the calls (``SipEndpoint.stop``) and exits; a watchdog ends the process if that hangs.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import itertools
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence

import pjsua2 as pj

from telephony import front_token
from telephony.call import CallHandle
from telephony.config import EndpointConfig
from telephony.endpoint import SipEndpoint
from telephony.events import AudioIn, DtmfIn, TransferResult
from telephony.ipc import (
    CallStarted,
    CallStopped,
    ClearPlayout,
    Dtmf,
    FrameDecoder,
    Hangup,
    HopTimes,
    IpcError,
    Ready,
    SendAudio,
    SlotsEnding,
    Stats,
    Stop,
    Transfer,
    TransferStatus,
    config_from_json,
    encode,
    encode_audio,
)
from telephony.stats import EndpointError

log = logging.getLogger("telephony.worker")

PR_SET_PDEATHSIG = 1  # <sys/prctl.h>
STATS_EVERY_S = 1.0
STOP_HARD_LIMIT_S = 8.0  # the watchdog's deadline once a stop has begun
MAX_WRITE_BUFFER = 4 << 20  # inbound audio is dropped while the parent is this far behind


def die_with_parent(parent_pid: int) -> None:
    """Have the kernel send SIGTERM when the parent exits; exit now if it already has."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
            log.warning("prctl(PR_SET_PDEATHSIG) failed: errno %d", ctypes.get_errno())
    if os.getppid() != parent_pid:
        os._exit(0)


def _sip_port() -> int:
    """Endpoint thread: the port the UDP transport actually bound (config.port is 0)."""
    ep = pj.Endpoint.instance()
    for tid in ep.transportEnum():
        info = ep.transportGetInfo(tid)
        if str(info.typeName).upper().startswith("UDP"):
            return int(str(info.localName).rsplit(":", 1)[1])
    raise EndpointError("the endpoint has no UDP transport")


def _rss_kb() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
    except (OSError, ValueError, IndexError):
        return 0


class _CallState:
    __slots__ = ("applied", "clears", "handle")

    def __init__(self, handle: CallHandle) -> None:
        self.handle = handle
        self.applied = 0  # bytes of SendAudio applied to the playout buffer
        self.clears = 0  # ClearPlayout messages applied


class _Link(asyncio.Protocol):
    def __init__(self, worker: EndpointWorker) -> None:
        self.worker = worker
        self.decoder = FrameDecoder()
        self.closed = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        try:
            messages = self.decoder.feed(data)
        except IpcError as exc:
            log.error("IPC from parent broken: %s", exc)
            self.worker.request_stop()
            return
        for msg in messages:
            self.worker.dispatch(msg)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)
        self.worker.request_stop()


class EndpointWorker:
    """Runs one ``SipEndpoint`` and mirrors its calls to the parent over the IPC socket."""

    def __init__(self, config: EndpointConfig, sock: socket.socket) -> None:
        self.config = config
        self.sock = sock
        self.calls: dict[int, _CallState] = {}
        self.pumps: set[asyncio.Task[None]] = set()
        self.aux: set[asyncio.Task[None]] = set()
        self.keys = itertools.count(1)
        self.down_hops = HopTimes()
        self.ipc_frames_dropped = 0
        self.transport: asyncio.Transport | None = None
        #: The front's stamp key (``telephony.front_token``), from the environment.
        self.stamp_key: bytes | None = None
        self.endpoint: SipEndpoint | None = None
        self.stopping: asyncio.Event | None = None

    def request_stop(self) -> None:
        if self.stopping is not None and not self.stopping.is_set():
            self.stopping.set()
            timer = threading.Timer(STOP_HARD_LIMIT_S, os._exit, args=(3,))
            timer.daemon = True
            timer.start()

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        self.stopping = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop)
        transport, link = await loop.create_unix_connection(lambda: _Link(self), sock=self.sock)
        self.transport = transport
        self.endpoint = SipEndpoint(
            self.config, self.on_call, on_ending=self.on_ending, stamp_key=self.stamp_key
        )
        await self.endpoint.start()
        try:
            port = await self.endpoint.run(_sip_port)
            self.write(encode(Ready(os.getpid(), port)))
            stats = loop.create_task(self._stats_forever())
            await self.stopping.wait()
            stats.cancel()
        finally:
            await self.endpoint.stop()
        if self.pumps:  # let the pumps pass on the CallEnded of the calls just hung up
            await asyncio.wait(self.pumps, timeout=1.0)
        self.write(encode(Stats(self._counters())))
        transport.close()  # flushes what is buffered first
        try:
            await asyncio.wait_for(link.closed, timeout=2.0)
        except TimeoutError:
            transport.abort()
        return 0

    async def _stats_forever(self) -> None:
        while True:
            await asyncio.sleep(STATS_EVERY_S)
            self.write(encode(Stats(self._counters())))

    def _counters(self) -> dict[str, int]:
        assert self.endpoint is not None
        out = self.endpoint.stats()
        out.update(self.down_hops.summary("ipc_down_hop"))
        out["ipc_frames_dropped"] = self.ipc_frames_dropped
        out["worker_cpu_ms"] = round(time.process_time() * 1000)
        out["worker_rss_kb"] = _rss_kb()
        return out

    # parent -> worker ------------------------------------------------------------------
    def dispatch(self, msg: object) -> None:
        if isinstance(msg, SendAudio):
            st = self.calls.get(msg.key)
            if st is not None:
                self.down_hops.add(time.monotonic() - msg.sent_at)
                st.applied += len(msg.pcm)
                st.handle.send(msg.pcm)
        elif isinstance(msg, ClearPlayout):
            st = self.calls.get(msg.key)
            if st is not None:
                st.handle.clear_playout()
                st.clears += 1
        elif isinstance(msg, Hangup):
            st = self.calls.get(msg.key)
            if st is not None:
                task = asyncio.get_running_loop().create_task(st.handle.hangup())
                self.aux.add(task)
                task.add_done_callback(self.aux.discard)
        elif isinstance(msg, Transfer):
            task = asyncio.get_running_loop().create_task(self._transfer(msg))
            self.aux.add(task)
            task.add_done_callback(self.aux.discard)
        elif isinstance(msg, Stop):
            self.request_stop()
        else:
            log.error("unexpected message from parent: %r", msg)
            self.request_stop()

    async def _transfer(self, msg: Transfer) -> None:
        """Run the call's transfer (REFER or bridge) and report its outcome, whatever it is."""
        st = self.calls.get(msg.key)
        if st is None:
            self.write(encode(TransferStatus(msg.key, False, 0, "call ended")))
            return
        try:
            if msg.mode == "bridge":
                result = await st.handle.bridge(
                    msg.target, timeout_s=msg.timeout_s, summary=msg.summary
                )
            else:
                result = await st.handle.transfer(msg.target, timeout_s=msg.timeout_s)
        except Exception as exc:  # reported, never left to the parent's timeout
            log.exception("transfer of call %d failed", msg.key)
            result = TransferResult(False, 0, f"transfer failed in the worker: {exc}")
        self.write(encode(TransferStatus(msg.key, result.ok, result.status, result.reason)))

    # worker -> parent ------------------------------------------------------------------
    def on_ending(self, count: int) -> None:
        """``SipEndpoint``'s on_ending: slots held by calls that are over (see the front)."""
        self.write(encode(SlotsEnding(count)))

    async def on_call(self, handle: CallHandle) -> None:
        """``SipEndpoint``'s on_call: announce the call, then forward its events."""
        key = next(self.keys)
        st = _CallState(handle)
        self.calls[key] = st
        task = asyncio.current_task()
        if task is not None:
            self.pumps.add(task)
        ended = False
        try:
            self.write(
                encode(
                    CallStarted(
                        key=key,
                        call_id=handle.call_id,
                        remote_uri=handle.remote_uri,
                        local_uri=handle.local_uri,
                        codec=handle.codec,
                        sample_rate=handle.sample_rate,
                        answered_ago=time.monotonic() - handle.answered_at,
                    )
                )
            )
            ended = await self._pump(key, st)
        finally:
            del self.calls[key]
            if task is not None:
                self.pumps.discard(task)
            if not ended:
                self.write(encode(CallStopped(key, "worker stopped", False, handle.frames_played)))

    async def _pump(self, key: int, st: _CallState) -> bool:
        handle, write, now = st.handle, self.write, time.monotonic
        transport = self.transport
        assert transport is not None
        async for ev in handle.receive():
            if isinstance(ev, AudioIn):
                if transport.get_write_buffer_size() > MAX_WRITE_BUFFER:
                    self.ipc_frames_dropped += 1
                    continue
                write(
                    encode_audio(
                        key,
                        ev.pcm,
                        queued=handle.queued_frames,
                        played=handle.frames_played,
                        clears=st.clears,
                        applied=st.applied,
                        bridge_at=ev.at,
                        sent_at=now(),
                    )
                )
            elif isinstance(ev, DtmfIn):
                write(encode(Dtmf(key, ev.digit, ev.duration_ms, now() - ev.at)))
            else:
                write(encode(CallStopped(key, ev.reason, ev.by_remote, handle.frames_played)))
                return True
        return False


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m telephony.worker")
    parser.add_argument("--ipc-fd", type=int, required=True)
    parser.add_argument("--parent-pid", type=int, required=True)
    parser.add_argument("--config", required=True, help="EndpointConfig as JSON")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING, format=f"worker[{os.getpid()}] %(name)s %(levelname)s: %(message)s"
    )
    die_with_parent(args.parent_pid)
    sock = socket.socket(fileno=args.ipc_fd)
    worker = EndpointWorker(config_from_json(args.config), sock)
    key = os.environ.pop(front_token.KEY_ENV, "")
    worker.stamp_key = bytes.fromhex(key) if key else None
    return asyncio.run(worker.run())


if __name__ == "__main__":
    sys.exit(main())
