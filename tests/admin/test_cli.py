"""``switchboard admin``: the first admin from the command line, then the API on its own."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from bot.calllog.migrate import upgrade
from node.admincli import run_admin
from node.settings import load_settings
from tests.admin.conftest import PASSWORD

ROOT = Path(__file__).resolve().parents[2]


def _env(url: str) -> dict[str, str]:
    return {**os.environ, "SWITCHBOARD_DATABASE_URL": url, "SWITCHBOARD_ADMIN__PORT": "0"}


def _switchboard(*args: str, url: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "node.cli", *args],
        cwd=ROOT,
        env=_env(url),
        input=stdin,
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_no_user_until_one_is_created_from_the_cli_then_the_served_api_lets_them_in(
    tmp_path: Path,
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'sb.db'}"
    # An unmigrated database: refused with what to run.
    done = _switchboard("admin", url=url)
    assert done.returncode == 2
    assert "switchboard db upgrade" in done.stderr
    upgrade(url)

    short = _switchboard(
        "admin", "create-user", "ada", "--password-stdin", url=url, stdin="short\n"
    )
    assert short.returncode == 2 and "at least 12 characters" in short.stderr
    made = _switchboard(
        "admin",
        "create-user",
        "ada",
        "--role",
        "admin",
        "--password-stdin",
        url=url,
        stdin=PASSWORD + "\n",
    )
    assert made.returncode == 0, made.stderr
    # The CLI hashes at the product's cost (the test process hashes at the lowest one).
    with sqlite3.connect(tmp_path / "sb.db") as db:
        (stored,) = db.execute("SELECT password_hash FROM admin_users").fetchone()
    assert stored.startswith("$argon2id$v=19$m=65536,t=3,p=4$"), stored
    again = _switchboard(
        "admin", "create-user", "ada", "--password-stdin", url=url, stdin=PASSWORD + "\n"
    )
    assert again.returncode == 2 and "exists" in again.stderr

    proc = subprocess.Popen(
        [sys.executable, "-m", "node.cli", "admin"],
        cwd=ROOT,
        env=_env(url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:(\d+)/api/v1", first)
        assert found, first + (
            proc.stderr.read() if proc.poll() is not None and proc.stderr else ""
        )
        base = f"http://127.0.0.1:{found.group(1)}"
        with httpx.Client(base_url=base, timeout=10) as client:
            assert client.get("/api/v1/calls").status_code == 401
            r = client.post("/api/v1/auth/login", json={"name": "admin", "password": PASSWORD})
            assert r.status_code == 401  # no default account
            r = client.post("/api/v1/auth/login", json={"name": "ada", "password": PASSWORD})
            assert r.status_code == 200, r.text
            assert r.json()["role"] == "admin"
            openapi = client.get("/api/v1/openapi.json").json()
            assert "/api/v1/calls/{call_id}" in openapi["paths"]
    finally:
        proc.terminate()
        assert proc.wait(timeout=15) == 0
        if proc.stdout:
            proc.stdout.close()
        if proc.stderr:
            proc.stderr.close()


def test_a_taken_port_stops_the_api_with_one_line(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'sb.db'}"
    upgrade(url)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**_env(url), "SWITCHBOARD_ADMIN__PORT": str(port)}
        done = subprocess.run(
            [sys.executable, "-m", "node.cli", "admin"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 2
    assert done.stderr.startswith(f"switchboard: admin API cannot listen on 127.0.0.1:{port}: ")
    assert done.stderr.count("\n") == 1, done.stderr
    assert "SWITCHBOARD_ADMIN__PORT" in done.stderr and "Traceback" not in done.stderr


#: Names the login refuses, so ``create-user`` must too: the first two were made before.
REFUSED_NAMES = ("a b", "x<y", "n" * 65, "ada\n", ".", "..", "a/b", "a%2e", "a?b", "a#b")


def test_create_user_takes_only_names_the_login_takes_and_says_each_thing_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found by a security test: ``create-user`` made users named ``a b`` and ``x<y`` that
    the login refuses, printed Alembic's log lines on stderr, and printed its short-password
    error twice."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'sb.db'}"
    upgrade(url)
    # Every name, through what the command runs (in this process: a command's start is
    # seconds of CPU); the first two through the command itself.
    monkeypatch.setenv("SWITCHBOARD_DATABASE_URL", url)
    monkeypatch.setattr(sys, "stdin", io.StringIO(PASSWORD + "\n"))
    alembic = logging.getLogger("alembic")
    level = alembic.level
    try:
        for name in REFUSED_NAMES:
            code = run_admin(
                load_settings(), "create-user", name=name, role="admin", password_stdin=True
            )
            out, err = capsys.readouterr()
            assert code == 2, name
            assert out == "" and err.startswith("switchboard: name: "), err
            assert err.count("\n") == 1, err
    finally:
        alembic.setLevel(level)  # run_admin quiets it for the command's process
    for name in REFUSED_NAMES[:2]:
        done = _switchboard(
            "admin", "create-user", name, "--password-stdin", url=url, stdin=PASSWORD + "\n"
        )
        assert done.returncode == 2, name
        assert done.stderr.startswith("switchboard: name: "), done.stderr
        assert done.stderr.count("\n") == 1, done.stderr
    short = _switchboard(
        "admin", "create-user", "ada", "--password-stdin", url=url, stdin="short\n"
    )
    assert short.returncode == 2
    assert short.stderr == "switchboard: password: at least 12 characters\n", short.stderr
    made = _switchboard(
        "admin", "create-user", "ada.b@x-y_z", "--password-stdin", url=url, stdin=PASSWORD + "\n"
    )
    assert made.returncode == 0, made.stderr
    assert made.stderr == ""
    assert made.stdout == "user ada.b@x-y_z created (admin)\n"


def test_import_profile_refuses_what_a_node_could_not_apply(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'sb.db'}"
    upgrade(url)
    default = (ROOT / "bot" / "profiles" / "default.toml").read_text()
    examples = ", ".join(f'"big example {i}"' for i in range(101))
    big = tmp_path / "big.toml"
    big.write_text(
        default + f'\n[[intents]]\nname = "big"\nexamples = [{examples}]\nanswer = "Yes."\n'
    )
    done = _switchboard("admin", "import-profile", str(big), url=url)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"switchboard: {big}: intents.9.examples: at most 100 items")
    done = _switchboard("admin", "import-profile", str(ROOT / "bot/profiles/default.toml"), url=url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("configuration version 1 from ")
    # A second import: its audit entry says what changed, and only that.
    changed = tmp_path / "changed.toml"
    changed.write_text(default.replace('greeting = "', 'greeting = "Welcome. ', 1))
    done = _switchboard("admin", "import-profile", str(changed), url=url)
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(tmp_path / "sb.db") as db:
        rows = db.execute(
            "SELECT before, after FROM admin_audit_log WHERE action = 'config.import' ORDER BY at"
        ).fetchall()
    first, second = (tuple(json.loads(x) for x in row) for row in rows)
    assert first[0]["version"] is None and first[1]["version"] == 1
    assert second[0].keys() == second[1].keys() == {"version", "greeting"}, second
    assert second[1]["greeting"] == "Welcome. " + second[0]["greeting"]


def test_create_user_without_a_terminal_says_to_use_password_stdin(tmp_path: Path) -> None:
    """Found by an accounts review: ``create-user`` with no terminal and no
    ``--password-stdin`` (a script, a container) ended in an ``EOFError`` traceback."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'sb.db'}"
    upgrade(url)
    done = subprocess.run(
        [sys.executable, "-m", "node.cli", "admin", "create-user", "ada", "--role", "admin"],
        cwd=ROOT,
        env=_env(url),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        start_new_session=True,  # no controlling terminal: /dev/tty cannot be opened
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "switchboard: no terminal to ask for the password on: "
        "give it on stdin with --password-stdin\n"
    ), done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
