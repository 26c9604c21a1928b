"""A Kamailio SIP proxy of the tests' own, in front of nodes, on a free loopback port.

It runs ``infra/kamailio/kamailio.cfg`` (the documented proxy of a fleet, docs/proxy.md) in
the foreground from a fresh temporary folder, with a dispatcher list naming the given nodes,
and is stopped by its PID at the end, as the suite does its PostgreSQL and Redis. It takes
SIP over UDP and TCP on one port, and over TLS on another when asked (a throwaway
certificate made by openssl in that folder).
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import uuid
from collections.abc import Iterator, Mapping, Sequence
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
    """A running proxy: SIP over UDP and TCP on ``host:port`` (and TLS on ``tls_port``),
    its log in ``log``."""

    host: str
    port: int
    process: Popen
    log: Path
    tls_port: int | None = None

    @property
    def uri(self) -> str:
        return f"sip:{self.host}:{self.port}"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def free_udp_port() -> int:
    """A loopback UDP port nothing is bound to now (``testkit.ports``)."""
    return ports.free_udp_port(HOST)


def free_sip_port() -> int:
    """A loopback port free for both UDP and TCP (the proxy takes both on one port)."""
    for _ in range(50):
        port = free_udp_port()
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((HOST, port))
            except OSError:
                continue
        return port
    raise ServiceError("no loopback port free for both UDP and TCP")


def make_certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for the proxy's TLS and its key (PEM), made by openssl."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise ServiceError("openssl not found in PATH: needed to make the test certificate")
    cert, key = folder / "proxy.crt", folder / "proxy.key"
    out = subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", f"/CN={HOST}", "-keyout", str(key), "-out", str(cert)],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    if out.returncode != 0:
        raise ServiceError(f"openssl req failed: {out.stderr.strip()}")
    return cert, key


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
    binary: str,
    root: Path,
    *,
    port: int,
    nodes_file: Path,
    ping_s: int,
    node_timeout_ms: int,
    tls: tuple[int, Path, Path] | None,
    settings: Mapping[str, str | int],
) -> Popen:
    log = root / "kamailio.log"
    defines: dict[str, str | int] = {
        "SB_LISTEN": f"udp:{HOST}:{port}",
        "SB_LISTEN_TCP": f"tcp:{HOST}:{port}",
        "SB_DISPATCHER_LIST": f'"{nodes_file}"',
        "SB_PING_INTERVAL": ping_s,
        "SB_NODE_TIMEOUT_MS": node_timeout_ms,
    }
    if tls is not None:
        tls_port, cert, key = tls
        defines |= {
            "SB_LISTEN_TLS": f"tls:{HOST}:{tls_port}",
            "SB_TLS_CERT": f'"{cert}"',
            "SB_TLS_KEY": f'"{key}"',
        }
    defines |= settings
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
    ]
    for name, value in defines.items():
        cmd += ["-A", f"{name}={value}"]
    proc = spawn(cmd, log, Owner(), root)
    try:
        wait_until_ready(proc, "kamailio", log, lambda: answers_options(port))
    except BaseException:
        stop_process(proc)
        raise
    return proc


@contextlib.contextmanager
def run_kamailio(
    nodes: Sequence[int],
    *,
    ping_s: int = 10,
    node_timeout_ms: int = 2000,
    tls: bool = False,
    settings: Mapping[str, str | int] | None = None,
) -> Iterator[KamailioProxy]:
    """Kamailio with ``infra/kamailio/kamailio.cfg`` in front of the nodes on these UDP ports.

    ``ping_s`` is the interval of its OPTIONS probes of the nodes; ``node_timeout_ms`` how
    long it waits for a node's first reply before it tries the next node; ``tls``: a TLS
    listener too; ``settings``: more of the configuration's defines (``SB_BAN_S``: 60).
    """
    binary = kamailio_binary()
    if binary is None:
        raise ServiceError("kamailio not found: run `bash infra/install.sh --test`")
    with server_dir("switchboard-test-kamailio-", Owner()) as root:
        nodes_file = root / "dispatcher.list"
        nodes_file.write_text("".join(f"1 sip:{HOST}:{p} 0 0\n" for p in nodes))
        cert = make_certificate(root) if tls else None
        for attempt in range(PORT_TRIES):
            port = free_sip_port()
            tls_port = ports.free_tcp_port(HOST) if cert is not None else None
            try:
                proc = _start(
                    binary,
                    root,
                    port=port,
                    nodes_file=nodes_file,
                    ping_s=ping_s,
                    node_timeout_ms=node_timeout_ms,
                    tls=None if cert is None or tls_port is None else (tls_port, *cert),
                    settings=settings or {},
                )
                break
            except PortTaken:
                if attempt == PORT_TRIES - 1:
                    raise
        try:
            yield KamailioProxy(HOST, port, proc, root / "kamailio.log", tls_port)
        finally:
            stop_process(proc)
