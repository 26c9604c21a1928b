"""``switchboard admin ...``: serve the admin API on its own, and manage its users."""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

from admin.accounts import AccountError, create_user
from admin.app import create_app
from admin.audit import record
from admin.db import AdminDb
from admin.security import Role, user_name_problem
from admin.server import AdminServer, AdminServerError
from bot.calllog.migrate import schema_state
from bot.calllog.store import make_engine
from bot.config import limits
from bot.config import store as config_store
from bot.profile import BotProfile, ProfileError, load_profile
from node.calllog import database_url, recordings_dir
from node.settings import Settings


def run_admin(settings: Settings, command: str | None, **options: str | None) -> int:
    """Run one ``admin`` subcommand (none: serve the API); the exit status."""
    # The schema check reads the migrations with Alembic, whose INFO lines ("Context impl
    # SQLiteImpl.") are about nothing the operator asked for.
    logging.getLogger("alembic").setLevel(logging.WARNING)
    if command in (None, "serve"):
        return asyncio.run(_serve(settings))
    if command == "create-user":
        name, role = options["name"], options["role"]
        assert name is not None and role is not None
        problem = user_name_problem(name)  # before the password is asked for
        if problem is not None:
            print(f"switchboard: {problem}", file=sys.stderr)
            return 2
        password = _read_password(bool(options.get("password_stdin")))
        if password is None:
            return 2
        return asyncio.run(_create_user(settings, name, password, role))  # type: ignore[arg-type]
    if command == "import-profile":
        path = options["path"]
        assert path is not None
        return asyncio.run(_import_profile(settings, Path(path)))
    raise ValueError(f"unknown admin command: {command}")


def _has_terminal() -> bool:
    """Whether ``getpass`` can ask on a terminal (without one it reads stdin, echoing)."""
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError:
        return False
    os.close(fd)
    return True


def _read_password(from_stdin: bool) -> str | None:
    if from_stdin:
        return sys.stdin.readline().rstrip("\n")
    if not _has_terminal():
        print(
            "switchboard: no terminal to ask for the password on: "
            "give it on stdin with --password-stdin",
            file=sys.stderr,
        )
        return None
    try:
        first = getpass.getpass("Password: ")
        again = getpass.getpass("Again: ")
    except (EOFError, KeyboardInterrupt):
        print("\nswitchboard: no password given", file=sys.stderr)
        return None
    if again != first:
        print("switchboard: the passwords differ", file=sys.stderr)
        return None
    return first


async def _checked_engine(settings: Settings) -> AdminDb | None:
    engine = make_engine(database_url(settings))
    try:
        state = await schema_state(engine)
    except Exception as exc:
        await engine.dispose()
        print(f"switchboard: database unreachable: {exc}", file=sys.stderr)
        return None
    if state.status != "current":
        await engine.dispose()
        print(f"switchboard: {state.message()}", file=sys.stderr)
        return None
    return AdminDb(engine)


async def _create_user(settings: Settings, name: str, password: str, role: Role) -> int:
    db = await _checked_engine(settings)
    if db is None:
        return 2
    try:
        async with db.sessions() as session:
            await create_user(session, name, password, role, actor="cli")
            await session.commit()
    except AccountError as exc:
        print(f"switchboard: {exc}", file=sys.stderr)
        return 2
    finally:
        await db.engine.dispose()
    print(f"user {name} created ({role})")
    return 0


def _changes(
    current: config_store.Versioned | None, profile: BotProfile
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The profile's sections that an import changes: their values before and after (the
    audit entry says what changed, not only that something did)."""
    old = {} if current is None else current.profile.model_dump(mode="json")
    new = profile.model_dump(mode="json")
    changed = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
    return {k: old.get(k) for k in changed}, {k: new.get(k) for k in changed}


async def _import_profile(settings: Settings, path: Path) -> int:
    try:
        profile = load_profile(path)
    except ProfileError as exc:
        print(f"switchboard: {exc}", file=sys.stderr)
        return 2
    too_large = limits.problems(profile.model_dump(mode="json"))
    for loc, msg in too_large:  # what the API refuses, and the nodes could not apply
        print(f"switchboard: {path}: {'.'.join(map(str, loc))}: {msg}", file=sys.stderr)
    if too_large:
        return 2
    db = await _checked_engine(settings)
    if db is None:
        return 2
    try:
        async with db.sessions() as session:
            current = await config_store.latest(session)
            base = None if current is None else current.version
            before, after = _changes(current, profile)
            version = await config_store.save(
                session,
                profile,
                actor="cli",
                action="config.import",
                target=f"profile:{path.name}",
                before={"version": base, **before},
                after={"version": (base or 0) + 1, **after},
                base=base,
                audit=record,
            )
            await session.commit()
    except config_store.ConfigConflict as exc:
        print(f"switchboard: {exc}", file=sys.stderr)
        return 1
    finally:
        await db.engine.dispose()
    print(f"configuration version {version} from {path}: nodes use it from their next call")
    return 0


async def _serve(settings: Settings) -> int:
    db = await _checked_engine(settings)
    if db is None:
        return 2
    app = create_app(db.engine, settings.admin, recordings_dir=recordings_dir(settings))
    server = AdminServer(app, settings.admin.host, settings.admin.port, own_signals=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await server.start()
    except AdminServerError as exc:
        print(f"switchboard: {exc}", file=sys.stderr)
        await db.engine.dispose()
        return 2
    print(f"admin API on http://{settings.admin.host}:{server.port}/api/v1", flush=True)
    try:
        await stop.wait()
    finally:
        await server.stop()
        await db.engine.dispose()
    return 0
