"""``SipServer``: ``SipEndpoint``'s API, with calls spread over worker processes.

The pjsua2 wheel holds ``WHEEL_MAX_CALLS`` calls per process (one slot kept to answer 503),
and pjsua is a per-process singleton. A node therefore runs
``ceil(max_calls / per_worker)`` worker processes (``python -m telephony.worker``), each a
plain ``SipEndpoint`` on ``config.host`` with an ephemeral SIP port and its own slice of the
RTP port range, behind one SIP front on ``config.host:config.port``
(``telephony.sip_dispatch``). Each call reaches ``on_call`` in this process as a
``RemoteCall`` (``telephony.remote_call``), driven over a Unix socket per worker
(``telephony.ipc``).

A worker that dies takes its calls with it: they end with ``CallEnded("worker crashed")``
and the worker is started again. Workers die with this process (see ``telephony.worker``).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import socket
import ssl
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from telephony import front_token
from telephony.config import EndpointConfig
from telephony.events import NO_ACK
from telephony.ipc import (
    AudioFrame,
    CallStarted,
    CallStopped,
    ClearPlayout,
    Dtmf,
    FrameDecoder,
    Hangup,
    HopTimes,
    IpcError,
    Ready,
    SlotsEnding,
    Stats,
    Stop,
    Transfer,
    TransferStatus,
    config_to_json,
    encode,
    encode_send,
)
from telephony.peers import CallerGate
from telephony.registration import Registration
from telephony.remote_call import RemoteCall
from telephony.sip_dispatch import FRONT_KEYS, TRANSACTION_S, SipFront, WorkerSlot
from telephony.sip_stream import Proto, StreamListener
from telephony.stats import STAT_KEYS, WHEEL_MAX_CALLS, EndpointError, call_limit

log = logging.getLogger(__name__)

OnRemoteCall = Callable[[RemoteCall], Awaitable[None]]

START_TIMEOUT_S = 20.0
RESTART_BACKOFF_S = 0.5
RESTART_BACKOFF_MAX_S = 10.0
STABLE_AFTER_S = 30.0  # a worker up this long resets the restart backoff
START_TRIES = 2  # a worker's tries at the node's start
# Workers send stats every second: one silent this long is hung, and is killed (restarted).
HEARTBEAT_TIMEOUT_S = 10.0
MIN_RTP_PORTS_PER_CALL = 4  # RTP + RTCP, and room for pjsua to skip a busy pair
CALL_FINISH_S = 5.0  # on stop: how long on_call may take over its call's end

# Counters that only grow: a dead worker's last values stay in the node's totals.
_CUMULATIVE = tuple(k for k in STAT_KEYS if k != "calls_active")


def per_worker_calls() -> int:
    """Calls one worker process can hold (what ``SipEndpoint`` answers at most)."""
    return call_limit(EndpointConfig(max_calls=WHEEL_MAX_CALLS))


def _package_root() -> str:
    root = str(Path(__file__).resolve().parent.parent)
    extra = os.environ.get("PYTHONPATH")
    return f"{root}{os.pathsep}{extra}" if extra else root


class _WorkerLink(asyncio.Protocol):
    """One worker process as the parent sees it: process, IPC link and its live calls.

    Also the ``CallLink`` of its ``RemoteCall``s.
    """

    def __init__(self, node: SipServer, slot: WorkerSlot, config: EndpointConfig) -> None:
        self.node = node
        self.slot = slot
        self.config = config
        self.proc: asyncio.subprocess.Process | None = None
        self.transport: asyncio.Transport | None = None
        self.decoder = FrameDecoder()
        self.calls: dict[int, RemoteCall] = {}
        self.ready: asyncio.Future[Ready] = asyncio.get_running_loop().create_future()
        self.pid = 0
        self.stats: dict[str, int] = {}
        self.started_at = time.monotonic()
        self.last_heard = self.started_at
        self.up = False  # sent Ready: from then on its death is the node's to handle
        self.lost = False

    # CallLink ---------------------------------------------------------------------
    def _write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def send_audio(self, key: int, pcm: bytes) -> None:
        self._write(encode_send(key, time.monotonic(), pcm))

    def clear_playout(self, key: int) -> None:
        self._write(encode(ClearPlayout(key)))

    def hangup(self, key: int) -> None:
        self._write(encode(Hangup(key)))

    def transfer(self, key: int, target: str, timeout_s: float) -> None:
        self._write(encode(Transfer(key, target, timeout_s)))

    def bridge(self, key: int, target: str, timeout_s: float, summary: bytes) -> None:
        self._write(encode(Transfer(key, target, timeout_s, "bridge", summary)))

    def stop(self) -> None:
        self._write(encode(Stop()))

    # asyncio.Protocol -------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        now = self.last_heard = time.monotonic()
        try:
            messages = self.decoder.feed(data)
        except IpcError as exc:
            log.error("worker %d: broken IPC stream: %s", self.pid, exc)
            self.node._worker_lost(self, "worker crashed")
            return
        node = self.node
        for msg in messages:
            if type(msg) is AudioFrame:
                call = self.calls.get(msg.key)
                if call is not None:
                    call.on_audio(msg, now)
                node._up_hops.add(now - msg.sent_at)
                node._bridge_hops.add(now - msg.bridge_at)
            elif isinstance(msg, CallStarted):
                call = RemoteCall(
                    key=msg.key,
                    link=self,
                    call_id=msg.call_id,
                    remote_uri=msg.remote_uri,
                    local_uri=msg.local_uri,
                    codec=msg.codec,
                    sample_rate=msg.sample_rate,
                    answered_at=now - msg.answered_ago,
                    frame_bytes=self.config.frame_bytes,
                    worker_pid=self.pid,
                )
                self.calls[msg.key] = call
                node._call_started(call)
            elif isinstance(msg, Dtmf):
                call = self.calls.get(msg.key)
                if call is not None:
                    call.on_dtmf(msg.digit, msg.duration_ms, now - msg.ago)
            elif isinstance(msg, CallStopped):
                call = self.calls.pop(msg.key, None)
                if call is not None:
                    call.on_ended(msg.reason, msg.by_remote, msg.played)
                    node._call_finished(call, msg.reason)
            elif isinstance(msg, SlotsEnding):
                self.slot.ending = msg.count
            elif isinstance(msg, TransferStatus):
                call = self.calls.get(msg.key)
                if call is not None:
                    call.on_transfer_status(msg.ok, msg.status, msg.reason)
            elif isinstance(msg, Stats):
                self.stats = msg.counters
            elif isinstance(msg, Ready):
                if not self.ready.done():
                    self.ready.set_result(msg)
            else:
                log.error("worker %d sent %r", self.pid, msg)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.ready.done():
            self.ready.set_exception(EndpointError("worker exited before it was ready"))
        self.node._worker_lost(self, "worker crashed")


def free_port_outside(host: str, avoid: range, tries: int = 64) -> int:
    """A UDP port free on ``host`` now and not in ``avoid`` (0: let the worker pick)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    for _ in range(tries):
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            try:
                probe.bind((host, 0))
            except OSError:
                return 0
            port = int(probe.getsockname()[1])
        if port not in avoid:
            return port
    return 0


class SipServer:
    """A SIP node that answers calls in worker processes and hands each to ``on_call``.

    Same public API as ``SipEndpoint`` (``start``, ``stop``, ``stats``, ``active_calls``);
    ``on_call`` receives a ``RemoteCall``, which offers what the bot uses of ``CallHandle``.
    """

    def __init__(
        self,
        config: EndpointConfig,
        on_call: OnRemoteCall,
        *,
        per_worker: int | None = None,
        relay_idle_s: float = TRANSACTION_S,
        relay_linger_s: float = TRANSACTION_S,
        restart_backoff_s: float = RESTART_BACKOFF_S,
        start_timeout_s: float = START_TIMEOUT_S,
        heartbeat_timeout_s: float = HEARTBEAT_TIMEOUT_S,
    ) -> None:
        self.config = config
        self._on_call = on_call
        #: The key of the front's stamp on new calls, shared with the workers only.
        self._stamp_key = front_token.new_key()
        per = per_worker if per_worker is not None else per_worker_calls()
        if not 1 <= per <= per_worker_calls():
            raise ValueError(f"per_worker must be 1..{per_worker_calls()}, not {per}")
        self.per_worker = per
        total = max(0, config.max_calls)
        n = math.ceil(total / per)
        self._slots = [WorkerSlot(i, min(per, total - i * per)) for i in range(n)]
        # Each slot owns a slice of the RTP range and uses one half of it at a time: a
        # restarted worker takes the other half, so that callers of the calls that died with
        # its predecessor, still streaming RTP to the old ports, do not hit its new calls.
        self._rtp_slice = (config.rtp_port_range // n) & ~1 if n else 0
        self._rtp_half = (self._rtp_slice // 2) & ~1
        if n and self._rtp_half < MIN_RTP_PORTS_PER_CALL * per:
            raise ValueError(
                f"rtp_port_range={config.rtp_port_range} is too small for {n} workers of "
                f"{per} calls (needs {2 * MIN_RTP_PORTS_PER_CALL * per * n})"
            )
        self._relay_idle_s = relay_idle_s
        self._relay_linger_s = relay_linger_s
        self._restart_backoff_s = restart_backoff_s
        self._start_timeout_s = start_timeout_s
        self._heartbeat_timeout_s = heartbeat_timeout_s
        self._workers: list[_WorkerLink | None] = [None] * n
        self._failures = [0] * n  # consecutive early deaths per slot
        self._generation = [0] * n  # workers started per slot so far
        self._front: SipFront | None = None
        self._listeners: list[StreamListener] = []
        #: The node's registration with a PBX or provider (``telephony.registration``).
        self.registration: Registration | None = None
        self._stopping = False
        self._started = False
        self._tasks: set[asyncio.Task[None]] = set()  # on_call tasks
        self._background: set[asyncio.Task[None]] = set()  # process watchers, restarts
        self._retired = dict.fromkeys(_CUMULATIVE, 0)
        self._calls_total = 0
        self._calls_active = 0
        self._restarts = 0
        self._up_hops = HopTimes()
        self._bridge_hops = HopTimes()
        self._final: dict[str, int] | None = None

    # public API -------------------------------------------------------------------
    @property
    def workers(self) -> int:
        """Worker processes this node runs (when all are up)."""
        return len(self._slots)

    @property
    def worker_pids(self) -> list[int]:
        """PIDs of the worker processes now up, by slot."""
        return [w.pid for w in self._workers if w is not None and not w.lost and w.pid]

    @property
    def call_limit(self) -> int:
        """Calls this node answers at once."""
        return sum(s.capacity for s in self._slots)

    @property
    def places_taken(self) -> int:
        """Call places taken on this node: SIP calls up or being set up (and slots pjsua
        still holds for calls that are over), and places held with ``hold_place``."""
        front = self._front
        return 0 if front is None else front.places_taken

    def hold_place(self) -> Callable[[], None] | None:
        """Hold one of the node's call places for a call of another transport (a browser
        call), counted against ``max_calls`` with the SIP calls; returns what gives it back
        (once), or None when every place is taken or the node is not answering calls."""
        front = self._front
        if front is None or front.places_taken >= front.places:
            return None
        front.held += 1
        given_back = False

        def give_back() -> None:
            nonlocal given_back
            if not given_back:
                given_back = True
                front.held = max(0, front.held - 1)

        return give_back

    @property
    def active_calls(self) -> int:
        """Calls with media up and not yet ended."""
        return self._calls_active

    async def start(self) -> None:
        """Bind the SIP front and start every worker; returns once all are listening."""
        if self._started:
            raise EndpointError("node already started")
        self._started = True
        self._final = None
        cfg = self.config
        front = SipFront(
            cfg.host,
            cfg.port,
            self._slots,
            retry_after_s=cfg.retry_after_s,
            server=cfg.user_agent,
            idle_s=self._relay_idle_s,
            linger_s=self._relay_linger_s,
            ringing_s=cfg.answer_delay_ms / 1000,
            limits=cfg.limits,
            gate=CallerGate(cfg.peers, cfg.realm),
            public_host=cfg.public_host,
            stamp_key=self._stamp_key,
            on_key=self._key_from_front,
        )
        try:
            await front.start()
        except OSError as exc:
            raise EndpointError(f"SIP front cannot bind {cfg.host}:{cfg.port}: {exc}") from exc
        self._front = front
        try:
            await self._listen_streams(front)
            await asyncio.gather(*(self._first_spawn(slot) for slot in self._slots))
        except BaseException:
            await self.stop()
            raise
        if cfg.registration.enabled:  # once workers can take the calls it will bring
            self.registration = Registration(
                cfg.registration,
                send=front.send_raw,
                contact=(cfg.public_host or front.relay_host, front.port),
                user_agent=cfg.user_agent,
                family=front.family,
            )
            front.registration = self.registration
            self.registration.start()
        self._keep(asyncio.get_running_loop().create_task(self._heartbeats(), name="heartbeats"))

    async def _listen_streams(self, front: SipFront) -> None:
        """SIP over TCP (on the front's port) and TLS, as ``config.stream`` asks."""
        cfg = self.config
        wanted: list[tuple[Proto, int]] = []
        if cfg.stream.tcp:
            wanted.append(("TCP", front.port))
        if cfg.stream.tls:
            wanted.append(("TLS", cfg.stream.tls_port))
        for proto, port in wanted:
            listener = StreamListener(front, cfg.stream, proto)
            try:
                await listener.start(cfg.host, port)
            except (OSError, ssl.SSLError, ValueError) as exc:
                raise EndpointError(
                    f"SIP front cannot listen for {proto} on {cfg.host}:{port}: {exc}"
                ) from exc
            self._listeners.append(listener)

    def stream_port(self, proto: Proto) -> int | None:
        """The port the node takes SIP over ``proto`` (TCP, TLS) on, or None."""
        return next((li.port for li in self._listeners if li.proto == proto), None)

    @property
    def draining(self) -> bool:
        """New calls get 503 + Retry-After (``drain`` was called)."""
        return self._front is not None and self._front.draining

    async def drain(self, max_s: float, *, give_up: asyncio.Event | None = None) -> bool:
        """Take no new call (503 + Retry-After, OPTIONS too) and wait for the live ones.

        Returns True once no call is live or being set up, False after ``max_s`` or when
        ``give_up`` is set first. The node keeps serving its live calls; ``stop`` ends it.
        """
        front = self._front
        if front is None:
            return True
        front.draining = True
        deadline = time.monotonic() + max_s
        while self._calls_active > 0 or any(s.load > 0 for s in self._slots):
            if time.monotonic() >= deadline or (give_up is not None and give_up.is_set()):
                return False
            await asyncio.sleep(0.1)
        return True

    async def stop(self, timeout_s: float = 10.0) -> None:
        """Hang up every call, stop the workers (killing any that hang), close the front."""
        if not self._started or self._stopping:
            return
        self._stopping = True
        front = self._front
        registration, self.registration = self.registration, None
        if registration is not None:  # removed while the front can still hear the answer
            await registration.stop()
        if front is not None:
            # No new requests; the calls' own traffic still passes (the workers' BYEs
            # leave from the front, and the callers' answers come back to it).
            front.stop_taking()
        for listener in self._listeners:
            listener.stop_listening()  # open connections stay for the final messages
        for task in [t for t in self._background if not t.get_name().startswith("watch")]:
            task.cancel()  # restarts and the heartbeat check
        workers = [w for w in self._workers if w is not None and w.proc is not None]
        for w in workers:
            w.stop()
        procs = [w.proc for w in workers if w.proc is not None]
        if procs:
            _, pending = await asyncio.wait(
                [asyncio.ensure_future(p.wait()) for p in procs], timeout=timeout_s
            )
            for w in workers:
                if w.proc is not None and w.proc.returncode is None:
                    log.error("worker %d did not stop within %.1f s: killing it", w.pid, timeout_s)
                    w.proc.kill()
            if pending:
                await asyncio.wait(pending, timeout=5.0)
        for w in workers:
            self._worker_lost(w, "node stopped")
        if self._background:
            await asyncio.wait(self._background, timeout=5.0)
        if front is not None:
            front.close()
            front.close_relays()
            await front.closed()  # the port is free for a start() again
        for listener in self._listeners:
            listener.close()
        self._listeners = []
        if self._tasks:  # each call's on_call sees its end and finishes (its records)
            await asyncio.wait(list(self._tasks), timeout=CALL_FINISH_S)
        for task in list(self._tasks):
            task.cancel()
        self._final = self.stats()
        # Back to the state before start(): the node may be started again.
        self._front = None
        self._workers = [None] * len(self._slots)
        for slot in self._slots:
            slot.addr, slot.load, slot.ending = None, 0, 0
        self._started = self._stopping = False

    def stats(self) -> dict[str, int]:
        """Workers' counters summed (``STAT_KEYS``), plus the front's and the node's own.

        Worker counters are refreshed once a second; ``calls_active`` and ``calls_total``
        are this process's own, exact. ``rejected_busy`` includes the front's 503s.
        """
        if self._final is not None and self._front is None:
            return dict(self._final)
        out = dict.fromkeys(STAT_KEYS, 0)
        for key in _CUMULATIVE:
            out[key] = self._retired[key]
        live = [w for w in self._workers if w is not None and not w.lost]
        down_hops: dict[str, int] = {}
        cpu = rss = 0
        for w in live:
            for key in _CUMULATIVE:
                out[key] += w.stats.get(key, 0)
            for key in ("ipc_down_hop_p50_us", "ipc_down_hop_p99_us", "ipc_down_hop_max_us"):
                down_hops[key] = max(down_hops.get(key, 0), w.stats.get(key, 0))
            cpu += w.stats.get("worker_cpu_ms", 0)
            rss += w.stats.get("worker_rss_kb", 0)
        out["calls_active"] = self._calls_active
        out["calls_total"] = self._calls_total
        front = self._front
        if front is not None:
            out.update(front.counters)
            out["rejected_busy"] += front.counters["front_rejected_busy"]
            out["front_relays_open"] = front.relays_open
            out["front_slots_ending"] = sum(slot.ending for slot in self._slots)
            out["front_stream_open"] = sum(len(li.conns) for li in self._listeners)
            datagrams = max(1, front.counters["front_datagrams"])
            out["front_route_ns_avg"] = round(front.route_cost_s / datagrams * 1e9)
        else:
            out.update(dict.fromkeys(FRONT_KEYS, 0))
        if self.registration is not None:
            out.update(self.registration.counters)
        out["workers"] = len(self._slots)
        out["workers_up"] = sum(1 for s in self._slots if s.addr is not None)
        out["worker_restarts"] = self._restarts
        out["workers_cpu_ms"] = cpu
        out["workers_rss_kb"] = rss
        out["node_cpu_ms"] = round(time.process_time() * 1000)
        out.update(self._up_hops.summary("ipc_up_hop"))
        out.update(self._bridge_hops.summary("bridge_to_node"))
        out.update(down_hops or HopTimes().summary("ipc_down_hop"))
        return out

    # workers ----------------------------------------------------------------------
    def _worker_config(self, slot: WorkerSlot) -> EndpointConfig:
        cfg = self.config
        half = self._generation[slot.index] % 2
        self._generation[slot.index] += 1
        rtp_start = cfg.rtp_port_start + slot.index * self._rtp_slice + half * self._rtp_half
        return cfg.model_copy(
            update={
                # Outside every worker's RTP range, so that no worker's media can find it
                # taken (an ephemeral port could fall anywhere).
                "port": free_port_outside(
                    cfg.host, range(cfg.rtp_port_start, cfg.rtp_port_start + cfg.rtp_port_range)
                ),
                "max_calls": slot.capacity,
                "rtp_port_start": rtp_start,
                "rtp_port_range": self._rtp_half,
            }
        )

    async def _first_spawn(self, slot: WorkerSlot) -> None:
        """Start the worker of ``slot`` at the node's start; one that exits before it is
        ready (one way: its SIP port, free when picked, taken by another process before the
        worker bound it) gets one more try on a newly picked port."""
        for tries_left in reversed(range(START_TRIES)):
            try:
                await self._spawn(slot)
                return
            except EndpointError as exc:
                if not tries_left or self._stopping:
                    raise
                log.error("%s: starting it again", exc)

    async def _spawn(self, slot: WorkerSlot) -> None:
        """Start the worker of ``slot`` and wait until its SIP port is known."""
        loop = asyncio.get_running_loop()
        cfg = self._worker_config(slot)
        w = _WorkerLink(self, slot, cfg)
        parent_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            w.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "telephony.worker",
                "--ipc-fd",
                str(child_sock.fileno()),
                "--parent-pid",
                str(os.getpid()),
                "--config",
                config_to_json(cfg),
                pass_fds=(child_sock.fileno(),),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,  # pjlib prints there; logs go to stderr
                env={
                    **os.environ,
                    "PYTHONPATH": _package_root(),
                    front_token.KEY_ENV: self._stamp_key.hex(),
                },
            )
        except BaseException:
            parent_sock.close()
            raise
        finally:
            child_sock.close()
        w.pid = w.proc.pid
        self._workers[slot.index] = w
        self._keep(loop.create_task(self._watch(w), name=f"watch-worker-{slot.index}"))
        await loop.create_unix_connection(lambda: w, sock=parent_sock)
        try:
            ready = await asyncio.wait_for(w.ready, self._start_timeout_s)
        except (TimeoutError, EndpointError) as exc:
            if w.proc.returncode is None:
                w.proc.kill()
            rc = await w.proc.wait()
            raise EndpointError(
                f"worker {slot.index} (pid {w.pid}, port {cfg.port}) did not start: {exc}"
                f" (exit status {rc})"
            ) from exc
        w.pid = ready.pid
        w.started_at = time.monotonic()
        w.up = True
        if not w.lost:
            host = self._front.relay_host if self._front is not None else self.config.host
            slot.addr = (host, ready.sip_port)
        log.info("worker %d (pid %d) listening on port %d", slot.index, w.pid, ready.sip_port)

    async def _watch(self, w: _WorkerLink) -> None:
        """Reap the worker's process; a death not asked for ends its calls and restarts it."""
        assert w.proc is not None
        rc = await w.proc.wait()
        self._worker_lost(w, "worker crashed")
        if self._stopping or self._workers[w.slot.index] is not w or not w.up:
            return  # a worker that never came up is _spawn's caller's to retry
        log.error("worker %d (pid %d) exited with %s: restarting it", w.slot.index, w.pid, rc)
        if time.monotonic() - w.started_at > STABLE_AFTER_S:
            self._failures[w.slot.index] = 0
        loop = asyncio.get_running_loop()
        self._keep(loop.create_task(self._restart(w.slot), name=f"restart-{w.slot.index}"))

    def _keep(self, task: asyncio.Task[None]) -> None:
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _heartbeats(self) -> None:
        """Kill a worker that has sent nothing (not even its stats) for a while: it is hung."""
        while True:
            await asyncio.sleep(1.0)
            now = time.monotonic()
            for w in self._workers:
                if w is None or w.lost or not w.up or w.proc is None:
                    continue
                if w.proc.returncode is None and now - w.last_heard > self._heartbeat_timeout_s:
                    log.error("worker %d (pid %d) is silent: killing it", w.slot.index, w.pid)
                    w.proc.kill()

    async def _restart(self, slot: WorkerSlot) -> None:
        while not self._stopping:
            fails = self._failures[slot.index]
            await asyncio.sleep(min(RESTART_BACKOFF_MAX_S, self._restart_backoff_s * 2**fails))
            self._failures[slot.index] = fails + 1
            if self._stopping:
                return
            try:
                await self._spawn(slot)
            except EndpointError as exc:
                log.error("restarting worker %d failed: %s", slot.index, exc)
                continue
            self._restarts += 1
            return

    def _worker_lost(self, w: _WorkerLink, reason: str) -> None:
        """The worker's link or process is gone: end its calls, free its slots (once)."""
        if w.lost:
            return
        w.lost = True
        slot = w.slot
        slot.addr = None
        if self._front is not None:
            self._front.worker_down(slot)
        for key in _CUMULATIVE:
            self._retired[key] += w.stats.get(key, 0)
        w.stats = {}
        calls, w.calls = list(w.calls.values()), {}
        for call in calls:
            call.on_ended("node stopped" if self._stopping else reason, False)
            self._call_finished(call)
        if w.transport is not None:
            w.transport.close()
        if w.proc is not None and w.proc.returncode is None and not self._stopping:
            w.proc.kill()  # a worker without its IPC link is of no use

    # calls ------------------------------------------------------------------------
    def _call_started(self, call: RemoteCall) -> None:
        self._calls_total += 1
        self._calls_active += 1
        if self._front is not None:
            self._front.call_started(call.call_id)
        task = asyncio.get_running_loop().create_task(
            self._run_on_call(call), name=f"call-{call.call_id}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _key_from_front(self, call_id: str, digit: str, duration_ms: int) -> bool:
        """An in-dialog INFO's DTMF key, answered by the front: to its call, as the
        worker's RFC 4733 keys go (True if a call of that Call-ID is up)."""
        for w in self._workers:
            if w is None:
                continue
            for call in w.calls.values():
                if call.call_id == call_id:
                    call.on_dtmf(digit, duration_ms, time.monotonic())
                    return True
        return False

    def _call_finished(self, call: RemoteCall, reason: str = "") -> None:
        self._calls_active -= 1
        if self._front is not None:
            if reason == NO_ACK:
                self._front.call_unacked(call.call_id)
            self._front.call_finished(call.call_id)

    async def _run_on_call(self, call: RemoteCall) -> None:
        try:
            await self._on_call(call)
        except Exception:
            log.exception("on_call failed for %s; hanging up", call.call_id)
            await call.hangup()
