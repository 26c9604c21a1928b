"""A Kamailio SIP proxy of the tests' own, in front of nodes, on a free loopback port.

It runs ``infra/kamailio/kamailio.cfg`` (the documented proxy of a fleet, docs/proxy.md) in
the foreground from a fresh temporary folder, with a dispatcher list naming the given nodes,
and is stopped by its PID at the end, as the suite does its PostgreSQL and Redis.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from testkit import ports
from tests.support.services import (
    HOST,
    Owner,
    Popen,
    PortTaken,
    ServiceError,
    server_dir,
    spawn,
    stop_process,
    wait_until_ready,
)

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "infra" / "kamailio" / "kamailio.cfg"
PORT_TRIES = 3


def kamailio_binary() -> str | None:
    """The ``kamailio`` binary (Debian puts it in /usr/sbin, often not on a user's PATH)."""
    return shutil.which("kamailio") or shutil.which("kamailio", path="/usr/sbin:/usr/local/sbin")


@dataclass(frozen=True)
class KamailioProxy:
    """A running proxy: SIP over UDP on ``host:port``, its log in ``log``."""

    host: str
    port: int
    process: Popen
    log: Path

    @property
    def uri(self) -> str:
        return f"sip:{self.host}:{self.port}"


def free_udp_port() -> int:
    """A loopback UDP port nothing is bound to now (``testkit.ports``)."""
    return ports.free_udp_port(HOST)


def answers_options(port: int, timeout_s: float = 0.3) -> bool:
    """Whether something on ``port`` answers an OPTIONS to itself with 200 (the proxy does)."""
    call_id = f"{uuid.uuid4().hex}@{HOST}"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((HOST, 0))
        s.settimeout(timeout_s)
        local = s.getsockname()[1]
        request = (
            f"OPTIONS sip:{HOST}:{port} SIP/2.0\r\n"
            f"Via: SIP/2.0/UDP {HOST}:{local};branch=z9hG4bK{uuid.uuid4().hex};rport\r\n"
            "Max-Forwards: 70\r\n"
            f"From: <sip:probe@{HOST}>;tag={uuid.uuid4().hex[:8]}\r\n"
            f"To: <sip:{HOST}:{port}>\r\n"
            f"Call-ID: {call_id}\r\n"
            "CSeq: 1 OPTIONS\r\n"
            "Content-Length: 0\r\n\r\n"
        )
        s.sendto(request.encode(), (HOST, port))
        try:
            reply = s.recv(4096).decode(errors="replace")
        except OSError:  # timeout, or ICMP port unreachable
            return False
    return reply.startswith("SIP/2.0 200") and call_id in reply


def _start(
    binary: str, root: Path, *, port: int, nodes_file: Path, ping_s: int, node_timeout_ms: int
) -> Popen:
    log = root / "kamailio.log"
    cmd = [
        binary,
        "-DD",  # foreground, no daemon
        "-E",  # log to stderr (the log file)
        "-f",
        str(CONFIG),
        "-Y",
        str(root),  # its own runtime folder
        "-w",
        str(root),
        "-n",
        "2",
        "-m",
        "32",
        "-M",
        "4",
        "-A",
        f"SB_LISTEN=udp:{HOST}:{port}",
        "-A",
        f'SB_DISPATCHER_LIST="{nodes_file}"',
        "-A",
        f"SB_PING_INTERVAL={ping_s}",
        "-A",
        f"SB_NODE_TIMEOUT_MS={node_timeout_ms}",
    ]
    proc = spawn(cmd, log, Owner(), root)
    try:
        wait_until_ready(proc, "kamailio", log, lambda: answers_options(port))
    except BaseException:
        stop_process(proc)
        raise
    return proc


@contextlib.contextmanager
def run_kamailio(
    nodes: Sequence[int], *, ping_s: int = 10, node_timeout_ms: int = 2000
) -> Iterator[KamailioProxy]:
    """Kamailio with ``infra/kamailio/kamailio.cfg`` in front of the nodes on these UDP ports.

    ``ping_s`` is the interval of its OPTIONS probes of the nodes; ``node_timeout_ms`` how
    long it waits for a node's first reply before it tries the next node.
    """
    binary = kamailio_binary()
    if binary is None:
        raise ServiceError("kamailio not found: run `bash infra/install.sh --test`")
    with server_dir("switchboard-test-kamailio-", Owner()) as root:
        nodes_file = root / "dispatcher.list"
        nodes_file.write_text("".join(f"1 sip:{HOST}:{p} 0 0\n" for p in nodes))
        for attempt in range(PORT_TRIES):
            port = free_udp_port()
            try:
                proc = _start(
                    binary,
                    root,
                    port=port,
                    nodes_file=nodes_file,
                    ping_s=ping_s,
                    node_timeout_ms=node_timeout_ms,
                )
                break
            except PortTaken:
                if attempt == PORT_TRIES - 1:
                    raise
        try:
            yield KamailioProxy(HOST, port, proc, root / "kamailio.log")
        finally:
            stop_process(proc)
