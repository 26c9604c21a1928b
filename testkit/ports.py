"""Free loopback ports for test servers."""

from __future__ import annotations

import socket


def free_udp_port(host: str = "127.0.0.1") -> int:
    """A UDP port nobody is bound to right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port
