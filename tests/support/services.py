"""PostgreSQL and Redis servers of the test suite's own, on free loopback ports.

The tests never use a server someone started by hand: each server here runs from a fresh
temporary directory on a port picked when it starts, and is stopped by its PID at the end.
PostgreSQL refuses to run as root, so under root it runs as ``nobody``.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

import psycopg

from testkit import ports

HOST = "127.0.0.1"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0
#: A port found free can be taken before the server binds it: try again on another.
PORT_TRIES = 3
PG_USER = "postgres"
#: PostgreSQL's fast shutdown (SIGTERM waits for every client to disconnect).
PG_STOP_SIGNAL = signal.SIGINT


Popen: TypeAlias = subprocess.Popen[bytes]


class ServiceError(RuntimeError):
    """A test server could not be started."""


class PortTaken(ServiceError):
    """The server exited because its port was taken meanwhile."""


@dataclass(frozen=True)
class Owner:
    """The user a server process runs as (``None``: this process's own)."""

    uid: int | None = None
    gid: int | None = None


@dataclass(frozen=True)
class PostgresServer:
    """A running PostgreSQL: superuser ``postgres``, trust authentication."""

    host: str
    port: int
    socket_dir: Path
    pid: int

    def url(self, database: str) -> str:
        """The SQLAlchemy URL of ``database`` on this server."""
        return f"postgresql+psycopg://{PG_USER}@{self.host}:{self.port}/{database}"

    @property
    def admin_dsn(self) -> str:
        """A libpq connection string to the ``postgres`` maintenance database."""
        return f"host={self.host} port={self.port} user={PG_USER} dbname=postgres"


@dataclass(frozen=True)
class RedisTls:
    """Files for a Redis over TLS: a CA, the server's certificate and a client's."""

    ca_file: Path
    cert_file: Path
    key_file: Path
    client_cert_file: Path
    client_key_file: Path
    #: The server asks clients for a certificate signed by the CA.
    require_client_cert: bool = False

    def client_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        ctx.load_cert_chain(str(self.client_cert_file), str(self.client_key_file))
        return ctx


@dataclass(frozen=True)
class RedisServer:
    """A running Redis without persistence (with a password and TLS when started so)."""

    host: str
    port: int
    process: Popen
    password: str | None = None
    tls: RedisTls | None = None

    def url(self, db: int = 0) -> str:
        scheme = "rediss" if self.tls is not None else "redis"
        return f"{scheme}://{self.host}:{self.port}/{db}"

    def kill(self) -> None:
        """Make it vanish at once (SIGKILL), as a crashed server would."""
        self.process.kill()
        self.process.wait()


def free_tcp_port() -> int:
    """A loopback TCP port nothing listens on now (``testkit.ports``)."""
    return ports.free_tcp_port(HOST)


def child_env() -> dict[str, str]:
    """This environment without libpq's variables, so that no ``PG*`` setting leaks in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["LC_ALL"] = "C"
    return env


def log_tail(path: Path, lines: int = 25) -> str:
    """The last lines of a server's log, for an error message."""
    if not path.exists():
        return "(no log written)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def stop_process(proc: Popen, first: int = signal.SIGTERM) -> None:
    """Stop a server by its PID: ``first``, a bounded wait, then SIGKILL."""
    if proc.poll() is not None:
        return
    proc.send_signal(first)
    try:
        proc.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def wait_until_ready(proc: Popen, name: str, log: Path, ready: Callable[[], bool]) -> None:
    """Poll ``ready()`` until true; fail with the log's tail if the server exits or stalls."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            tail = log_tail(log)
            kind = PortTaken if re.search(r"address already in use", tail, re.I) else ServiceError
            raise kind(f"{name} exited with status {proc.returncode} before it was ready:\n{tail}")
        if ready():
            return
        if time.monotonic() > deadline:
            raise ServiceError(
                f"{name} did not accept connections within {START_TIMEOUT_S:.0f} s:\n"
                + log_tail(log)
            )
        time.sleep(0.05)


def on_free_port(start: Callable[[int], Popen], port: int | None = None) -> tuple[Popen, int]:
    """Start a server on ``port``, or on a free one: another if it was taken meanwhile."""
    if port is not None:
        return start(port), port
    for _ in range(PORT_TRIES - 1):
        chosen = free_tcp_port()
        try:
            return start(chosen), chosen
        except PortTaken:
            continue  # taken between the probe and the server's bind: pick another
    chosen = free_tcp_port()
    return start(chosen), chosen


# --- where a server runs ------------------------------------------------------------------


def server_owner() -> Owner:
    """``nobody`` under root (PostgreSQL will not run as root), else this user."""
    if os.geteuid() != 0:
        return Owner()
    nobody = pwd.getpwnam("nobody")
    return Owner(nobody.pw_uid, nobody.pw_gid)


def searchable_by_all(path: Path) -> bool:
    """Whether every folder down to ``path`` lets any user pass through it."""
    return all(p.stat().st_mode & 0o001 for p in (path, *path.parents))


def temp_base(owner: Owner) -> Path:
    """A temporary folder another user can reach (a root-only ``TMPDIR`` would not do)."""
    candidates = [Path(tempfile.gettempdir()), Path("/tmp"), Path("/var/tmp")]
    if owner.uid is None:
        return candidates[0]
    for base in candidates:
        if base.is_dir() and searchable_by_all(base):
            return base
    raise ServiceError(f"no temporary folder that user {owner.uid} can reach: {candidates}")


@contextlib.contextmanager
def server_dir(prefix: str, owner: Owner) -> Iterator[Path]:
    """A fresh temporary folder owned by ``owner``, removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=temp_base(owner)))
    try:
        if owner.uid is not None and owner.gid is not None:
            os.chown(path, owner.uid, owner.gid)
        yield path
    finally:
        shutil.rmtree(path)


def spawn(
    cmd: list[str], log: Path, owner: Owner, cwd: Path, env: dict[str, str] | None = None
) -> Popen:
    """Start a server in the foreground, its output into ``log``, as ``owner``."""
    with log.open("ab") as out:
        return subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            user=owner.uid,
            group=owner.gid,
            extra_groups=[] if owner.uid is not None else None,
        )


# --- PostgreSQL ---------------------------------------------------------------------------


def _version_key(bindir: Path) -> tuple[int, ...]:
    """``/usr/lib/postgresql/15/bin`` -> (15,), so that 15 sorts above 9.6."""
    return tuple(int(n) for n in re.findall(r"\d+", bindir.parent.name))


def postgres_bindir() -> Path:
    """Where ``initdb`` and ``postgres`` are, whatever the installed major version."""
    candidates: list[Path] = []
    if pg_config := shutil.which("pg_config"):
        out = subprocess.run(
            [pg_config, "--bindir"], capture_output=True, text=True, check=False, timeout=30
        )
        if out.returncode == 0:
            candidates.append(Path(out.stdout.strip()))
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=_version_key, reverse=True)
    if postgres := shutil.which("postgres"):
        candidates.append(Path(postgres).parent)
    for bindir in candidates:
        if (bindir / "initdb").is_file() and (bindir / "postgres").is_file():
            return bindir
    raise ServiceError(
        "PostgreSQL server binaries (initdb, postgres) not found in pg_config --bindir, "
        "/usr/lib/postgresql/*/bin or PATH: run `bash infra/install.sh --test`"
    )


def initdb(bindir: Path, data: Path, owner: Owner) -> None:
    """A new cluster in ``data``: superuser ``postgres``, trust authentication, no fsync."""
    cmd = [str(bindir / "initdb"), "-D", str(data), "-U", PG_USER, "--auth=trust"]
    cmd += ["--encoding=UTF8", "--no-locale", "--no-sync"]
    out = subprocess.run(
        cmd,
        cwd=data.parent,
        env=child_env(),
        user=owner.uid,
        group=owner.gid,
        extra_groups=[] if owner.uid is not None else None,
        capture_output=True,
        text=True,
        check=False,
        timeout=START_TIMEOUT_S,
    )
    if out.returncode != 0:
        raise ServiceError(f"{cmd[0]} failed (status {out.returncode}):\n{out.stdout}{out.stderr}")


def postgres_serves(port: int, data: Path) -> bool:
    """Whether the server on ``port`` answers queries from ``data`` (not some other server's)."""
    dsn = f"host={HOST} port={port} user={PG_USER} dbname=postgres connect_timeout=2"
    try:
        with psycopg.connect(dsn) as conn:
            row = conn.execute("SELECT current_setting('data_directory')").fetchone()
    except psycopg.OperationalError:
        return False  # not listening yet, or listening but still starting up
    return row is not None and Path(row[0]).resolve() == data.resolve()


def start_postgres(bindir: Path, root: Path, owner: Owner, port: int) -> Popen:
    """Start ``postgres`` on ``root/data`` and ``port``; return it once it answers."""
    binary = str(bindir / "postgres")
    data = root / "data"
    cmd = [binary, "-D", str(data), "-p", str(port), "-k", str(root)]
    for setting in (
        f"listen_addresses={HOST}",
        "fsync=off",
        "synchronous_commit=off",
        "full_page_writes=off",
    ):
        cmd += ["-c", setting]
    log = root / f"postgres-{port}.log"
    proc = spawn(cmd, log, owner, cwd=root, env=child_env())
    try:
        wait_until_ready(proc, binary, log, lambda: postgres_serves(port, data))
    except BaseException:
        stop_process(proc, PG_STOP_SIGNAL)
        raise
    return proc


@contextlib.contextmanager
def run_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL of the tests' own, on a free loopback port; stopped and removed after."""
    bindir, owner = postgres_bindir(), server_owner()
    with server_dir("switchboard-test-pg-", owner) as root:
        initdb(bindir, root / "data", owner)
        proc, port = on_free_port(lambda p: start_postgres(bindir, root, owner, p))
        try:
            yield PostgresServer(HOST, port, root, proc.pid)
        finally:
            stop_process(proc, PG_STOP_SIGNAL)


# --- Redis --------------------------------------------------------------------------------


def redis_serves(
    port: int, root: Path, password: str | None = None, tls: RedisTls | None = None
) -> bool:
    """Whether the Redis on ``port`` is the one working in ``root`` (not some other server)."""
    expected = f"\r\n{root.resolve()}\r\n".encode()  # Redis reports its real path
    request = b"CONFIG GET dir\r\n"
    if password is not None:
        request = f"AUTH {password}\r\n".encode() + request
    try:
        with contextlib.ExitStack() as stack:
            sock = stack.enter_context(socket.create_connection((HOST, port), timeout=1))
            if tls is not None:
                sock = stack.enter_context(
                    tls.client_context().wrap_socket(sock, server_hostname=HOST)
                )
            sock.sendall(request)
            reply = b""
            while expected not in reply and len(reply) < 8192:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                reply += chunk
    except OSError:
        return False  # not listening yet (or its TLS not up yet)
    return expected in reply


def redis_tls_files(folder: Path, *, require_client_cert: bool = False) -> RedisTls:
    """A CA, and a server and a client certificate it signed (for 127.0.0.1), made by openssl."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise ServiceError("openssl not found in PATH: needed to make the test certificates")

    def run(*args: str) -> None:
        out = subprocess.run(
            [openssl, *args], cwd=folder, capture_output=True, text=True, check=False, timeout=60
        )
        if out.returncode != 0:
            raise ServiceError(f"openssl {args[0]} failed: {out.stderr.strip()}")

    key = ("-newkey", "rsa:2048", "-nodes")
    run(
        "req",
        "-x509",
        *key,
        "-days",
        "2",
        "-subj",
        "/CN=test-ca",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
    )
    for name in ("server", "client"):
        run("req", *key, "-subj", f"/CN={name}", "-keyout", f"{name}.key", "-out", f"{name}.csr")
        (folder / f"{name}.ext").write_text(f"subjectAltName=IP:{HOST}\n")
        signed_by_ca = ("-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2")
        run(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            *signed_by_ca,
            "-extfile",
            f"{name}.ext",
            "-out",
            f"{name}.crt",
        )
    return RedisTls(
        folder / "ca.crt",
        folder / "server.crt",
        folder / "server.key",
        folder / "client.crt",
        folder / "client.key",
        require_client_cert,
    )


def start_redis(
    binary: str, root: Path, port: int, password: str | None = None, tls: RedisTls | None = None
) -> Popen:
    """Start ``redis-server`` on ``port`` with no persistence; return it once it answers."""
    cmd = [binary, "--bind", HOST, "--save", "", "--appendonly", "no"]
    cmd += ["--dir", str(root), "--daemonize", "no", "--logfile", ""]
    if tls is None:
        cmd += ["--port", str(port)]
    else:
        cmd += ["--port", "0", "--tls-port", str(port)]
        cmd += ["--tls-cert-file", str(tls.cert_file), "--tls-key-file", str(tls.key_file)]
        cmd += ["--tls-ca-cert-file", str(tls.ca_file)]
        cmd += ["--tls-auth-clients", "yes" if tls.require_client_cert else "no"]
    if password is not None:
        cmd += ["--requirepass", password]
    log = root / f"redis-{port}.log"
    proc = spawn(cmd, log, Owner(), cwd=root)
    try:
        wait_until_ready(proc, binary, log, lambda: redis_serves(port, root, password, tls))
    except BaseException:
        stop_process(proc)
        raise
    return proc


@contextlib.contextmanager
def run_redis(
    port: int | None = None, *, password: str | None = None, tls: RedisTls | None = None
) -> Iterator[RedisServer]:
    """A Redis of the tests' own on ``port`` (default: a free one); stopped and removed after.

    A fixed ``port`` is for starting a server again where a killed one was. With
    ``password`` it requires it (``requirepass``); with ``tls`` it takes TLS only.
    """
    binary = shutil.which("redis-server")
    if binary is None:
        raise ServiceError("redis-server not found in PATH: run `bash infra/install.sh --test`")
    with server_dir("switchboard-test-redis-", Owner()) as root:
        proc, port = on_free_port(lambda p: start_redis(binary, root, p, password, tls), port)
        try:
            yield RedisServer(HOST, port, proc, password, tls)
        finally:
            stop_process(proc)
