"""Free test ports: a port is handed out only when it is free over UDP and TCP alike."""

from __future__ import annotations

import socket

import pytest

from testkit import ports


def test_a_port_bound_over_tcp_is_not_handed_out_for_udp(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    port = ports.free_tcp_port()
    ports._held.pop(port).close()  # let go of it, as a process that chose it and ended
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", port))
        server.listen()
        # The chooser's range is this one port, bound over TCP by "another process": a SIP
        # listener given it would fail to bind its TCP side.
        monkeypatch.setattr(ports, "_LOW", port)
        monkeypatch.setattr(ports, "_HIGH", port + 1)
        with pytest.raises(RuntimeError, match="no free udp port"):
            ports.free_udp_port()
    # Free over both again: handed out.
    assert ports.free_udp_port() == port
