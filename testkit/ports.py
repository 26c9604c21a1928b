"""Free loopback ports for test servers.

A port chosen now and bound later (by a server started a moment after, or by an agent a test
starts minutes later against a node that was told its address at start) must not be taken in
between. Two things take ports meanwhile:

- the kernel, for every socket bound to port 0 and every outgoing connection, from the
  ephemeral range (``net.ipv4.ip_local_port_range``, 32768-60999 by default): so ports are
  chosen below that range, where the kernel never hands one out;
- other test processes run side by side, choosing the same way: so each chosen port is
  locked (``fcntl``) in a directory they share, for as long as the process that chose it
  lives. The lock is the number's, whichever protocol asked: a SIP listener (baresip, a
  node with TCP) binds the same number over UDP and TCP, and a UDP port handed to one test
  while another process took it for a TCP server failed an agent's start ("Address already
  in use"). So a port is handed out only when it is free over both.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import fcntl
import os
import random
import socket
import tempfile
from pathlib import Path
from typing import IO

# Below the ephemeral range and apart from the ranges tests give to media: 20000-29000
# (``free_udp_block``, a SIP tester's RTP) and 30000-39000 (the node's RTP).
_LOW, _HIGH = 10000, 20000
_LOCK_DIR = Path(tempfile.gettempdir()) / "switchboard-test-ports"
_MAX_HELD = 256  # locks a process keeps; the oldest is let go past this
_held: collections.OrderedDict[int, IO[bytes]] = collections.OrderedDict()


@atexit.register
def _let_go() -> None:
    while _held:
        _held.popitem()[1].close()


def _ephemeral_low() -> int:
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
        return int(text.split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _lock(port: int) -> bool:
    """Take ``port`` for this process, unless another process holds it."""
    _LOCK_DIR.mkdir(exist_ok=True)
    with contextlib.suppress(OSError):
        os.chmod(_LOCK_DIR, 0o1777)  # shared by every user's test runs, as /tmp is
    path = _LOCK_DIR / f"port-{port}"
    try:
        handle = open(path, "ab")  # noqa: SIM115 - held open: the lock lasts as long
    except OSError:
        return False
    try:
        fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        return False
    _held[port] = handle
    while len(_held) > _MAX_HELD:
        _, oldest = _held.popitem(last=False)
        oldest.close()
    return True


def _free_port(kind: str, host: str) -> int:
    high = min(_HIGH, _ephemeral_low())
    rng = random.SystemRandom()
    for _ in range(500):
        port = rng.randrange(_LOW, high)
        if port in _held or not _lock(port):
            continue
        if not all(_bindable(host, port, t) for t in (socket.SOCK_DGRAM, socket.SOCK_STREAM)):
            _held.pop(port).close()  # bound by something that does not choose this way
            continue
        return port
    raise RuntimeError(f"no free {kind} port in {_LOW}-{high} on {host}")


def _bindable(host: str, port: int, sock_type: int) -> bool:
    with socket.socket(socket.AF_INET, sock_type) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_udp_port(host: str = "127.0.0.1") -> int:
    """A UDP port nobody is bound to now, and that nobody else choosing here will get."""
    return _free_port("udp", host)


def free_tcp_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on now, and that nobody else choosing here will get."""
    return _free_port("tcp", host)


def free_udp_block(
    count: int = 4, *, low: int = 20000, high: int = 29000, host: str = "127.0.0.1"
) -> int:
    """The first of ``count`` consecutive UDP ports, all free right now, at a random even
    start in [low, high): a SIP tester's media ports (audio and video RTP and RTCP), which
    it binds without moving on when one is taken. Tests run side by side in other processes
    bind ports in the same range, so each block is tried before it is handed out."""
    rng = random.SystemRandom()
    for _ in range(200):
        start = rng.randrange(low, high - count, 2)
        socks: list[socket.socket] = []
        try:
            for port in range(start, start + count):
                sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                socks.append(sock)
                sock.bind((host, port))
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
        return start
    raise RuntimeError(f"no {count} free UDP ports in a row in {low}-{high} on {host}")
