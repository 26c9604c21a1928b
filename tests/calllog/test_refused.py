"""A database that refuses the node (wrong credentials, no such database) is said so at start.

Not "unreachable, spooling": waiting does not fix credentials. Each case uses the suite's
own PostgreSQL; the password case adds one pg_hba.conf line for a role of its own (and
takes it out after), so that the suite's trust login for everything else is untouched.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.support.services import PostgresServer

ROOT = Path(__file__).resolve().parents[2]


def switchboard(args: list[str], url: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("SWITCHBOARD_")} | {
        "SWITCHBOARD_DATABASE_URL": url,
        "SWITCHBOARD_DATA_DIR": str(tmp_path),
    }
    return subprocess.run(
        [sys.executable, "-m", "node.cli", *args],
        cwd=ROOT,
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def password_role(postgres_server: PostgresServer) -> Iterator[tuple[str, str]]:
    """A role that must log in with its password (scram-sha-256), and that password."""
    role, password = f"sb_pw_{uuid.uuid4().hex[:8]}", "right-password"
    with psycopg.connect(postgres_server.admin_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
        row = conn.execute("SHOW hba_file").fetchone()
        assert row is not None
        hba = Path(row[0])
        before = hba.read_text()
        rule = f"host all {role} 127.0.0.1/32 scram-sha-256\n"
        hba.write_text(rule + before)
        conn.execute("SELECT pg_reload_conf()")
        try:
            yield role, password
        finally:
            hba.write_text(before)
            conn.execute("SELECT pg_reload_conf()")
            conn.execute(f"DROP ROLE {role}")


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("switchboard: ")]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def test_a_wrong_password_stops_the_node_with_one_line(
    postgres_server: PostgresServer, password_role: tuple[str, str], tmp_path: Path
) -> None:
    role, _ = password_role
    srv = postgres_server
    url = f"postgresql+psycopg://{role}:wrong-password@{srv.host}:{srv.port}/postgres"
    line = _one_line(switchboard(["run", "--port", "0"], url, tmp_path))
    assert "refused the login" in line and "password authentication failed" in line, line
    assert "wrong-password" not in line and "unreachable" not in line
    assert "SWITCHBOARD_DATABASE_URL" in line
    line = _one_line(switchboard(["db", "current"], url, tmp_path))
    assert "refused the login" in line and "password authentication failed" in line, line


def test_an_unknown_role_or_database_is_named(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    srv = postgres_server
    nobody = f"postgresql+psycopg://nobody_here@{srv.host}:{srv.port}/postgres"
    line = _one_line(switchboard(["run", "--port", "0"], nobody, tmp_path))
    assert 'role "nobody_here" does not exist' in line, line
    missing = srv.url("no_such_calllog_db")
    line = _one_line(switchboard(["run", "--port", "0"], missing, tmp_path))
    assert "has no such database" in line and "no_such_calllog_db" in line, line
