"""Free loopback ports for test servers."""

from __future__ import annotations

import random
import socket


def free_udp_port(host: str = "127.0.0.1") -> int:
    """A UDP port nobody is bound to right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


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
