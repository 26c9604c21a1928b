"""The ``switchboard`` command: run a bot node, call one as a test caller, manage its
database or its model tier."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from node.logs import setup_logging
from node.settings import Settings, SettingsError, load_settings


def _settings(args: argparse.Namespace) -> Settings:
    """The node's settings: the environment, then the command's flags, validated together."""
    overrides: dict[str, Any] = {}
    flags: dict[tuple[str, ...], str] = {}
    for flag, field, value in (
        ("--profile", ("profile",), getattr(args, "profile", None)),
        ("--host", ("sip", "host"), getattr(args, "host", None)),
        ("--port", ("sip", "port"), getattr(args, "port", None)),
        ("--address", ("tier", "address"), getattr(args, "address", None)),
    ):
        if value is None:
            continue
        section = overrides
        for part in field[:-1]:
            section = section.setdefault(part, {})
        section[field[-1]] = value
        flags[field] = flag
    return load_settings(overrides, flags=flags)


def _run(args: argparse.Namespace) -> int:
    from admin.server import AdminServerError  # noqa: PLC0415
    from bot.calllog import (  # noqa: PLC0415 - keeps `switchboard --help` fast
        DatabaseRefused,
        SchemaError,
    )
    from bot.profile import ProfileError  # noqa: PLC0415
    from node.app import run_node  # noqa: PLC0415

    settings = _settings(args)
    setup_logging(settings.log_level, settings.log_format)
    try:
        asyncio.run(run_node(settings))
    except (ProfileError, SchemaError, DatabaseRefused, AdminServerError) as exc:
        _error(str(exc))
        return 2
    except KeyboardInterrupt:
        pass
    return 0


def _dial(args: argparse.Namespace) -> int:
    from node.dialcli import SayError, dial_and_record, utterance  # noqa: PLC0415

    setup_logging("WARNING", "text")
    try:  # before anything is dialled: a bad file is the user's to fix
        play = utterance(args.say) if args.say else None
    except SayError as exc:
        _error(str(exc))
        return 2
    return asyncio.run(
        dial_and_record(
            args.uri,
            play=play,
            record=Path(args.record) if args.record else None,
            record_both=Path(args.record_both) if args.record_both else None,
            duration_s=args.duration,
            say_at_s=args.say_at,
            srtp=args.srtp,
        )
    )


def _db(args: argparse.Namespace) -> int:
    from bot.calllog.access import refusal  # noqa: PLC0415

    settings = _settings(args)
    setup_logging("WARNING", "text")
    try:
        return _run_db(settings, args)
    except Exception as exc:
        why = refusal(exc)
        if why is None:
            raise
        _error(f"the call-log database {why} (check SWITCHBOARD_DATABASE_URL)")
        return 2


def _run_db(settings: Settings, args: argparse.Namespace) -> int:
    from node.dbcli import run_db  # noqa: PLC0415

    return run_db(
        settings, args.db_command, getattr(args, "revision", None), getattr(args, "days", None)
    )


def _serve(args: argparse.Namespace) -> int:
    from node.servecli import run_serve  # noqa: PLC0415 - imports Ray

    settings = _settings(args)
    setup_logging("WARNING", "text")
    return run_serve(settings, args.serve_command)


def _admin(args: argparse.Namespace) -> int:
    from node.admincli import run_admin  # noqa: PLC0415

    settings = _settings(args)
    setup_logging(settings.log_level, settings.log_format)
    return run_admin(
        settings,
        getattr(args, "admin_command", None),
        name=getattr(args, "name", None),
        role=getattr(args, "role", None),
        password_stdin=getattr(args, "password_stdin", None),
        path=getattr(args, "path", None),
    )


def _demo_backend(args: argparse.Namespace) -> int:
    from node.demo_backend import run  # noqa: PLC0415

    return run(args.host, args.port)


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    parser = argparse.ArgumentParser(prog="switchboard", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="answer calls on the configured SIP address")
    run.add_argument("--profile", help="bot profile TOML (default: SWITCHBOARD_PROFILE)")
    run.add_argument("--host", help="SIP listen address (default: SWITCHBOARD_SIP__HOST)")
    run.add_argument("--port", type=int, help="SIP UDP port (default: SWITCHBOARD_SIP__PORT)")
    run.set_defaults(func=_run)

    dial = sub.add_parser("dial", help="call a SIP URI, say something, record the answer")
    dial.add_argument("uri", help="e.g. sip:bot@127.0.0.1:5060")
    dial.add_argument("--say", help="a WAV file to play, or text to speak")
    dial.add_argument("--say-at", type=float, default=4.0, help="seconds after answer to speak")
    dial.add_argument("--record", help="WAV file for what the far end sent")
    dial.add_argument("--record-both", help="stereo WAV: left what we sent, right what we got")
    dial.add_argument("--duration", type=float, default=15.0, help="seconds to stay on the call")
    dial.add_argument(
        "--srtp",
        action="store_true",
        help="offer SRTP (RTP/SAVP with SDES keys) and refuse a plain-RTP answer",
    )
    dial.set_defaults(func=_dial)

    db = sub.add_parser("db", help="call-log database: migrations and retention")
    dbsub = db.add_subparsers(dest="db_command", required=True)
    up = dbsub.add_parser("upgrade", help="apply migrations (default: to the newest)")
    up.add_argument("revision", nargs="?", default="head")
    down = dbsub.add_parser("downgrade", help="undo migrations down to a revision ('base': all)")
    down.add_argument("revision")
    dbsub.add_parser("current", help="the database's revision and this code's")
    purge = dbsub.add_parser("purge", help="blank transcripts older than the retention period")
    purge.add_argument("--days", type=int, help="default: the retention setting")
    db.set_defaults(func=_db)

    srv = sub.add_parser("serve", help="the model tier on a Ray cluster (ray[serve])")
    srvsub = srv.add_subparsers(dest="serve_command", required=True)
    for name, text in (
        ("deploy", "deploy or update the application (SWITCHBOARD_MODELS__*, _TIER__*)"),
        ("status", "deployments, replicas and the nodes' load"),
        ("shutdown", "delete the application"),
    ):
        cmd = srvsub.add_parser(name, help=text)
        cmd.add_argument("--address", help="Ray cluster (default: SWITCHBOARD_TIER__ADDRESS)")
    srv.set_defaults(func=_serve)

    admin = sub.add_parser(
        "admin", help="the admin API on its own (a fleet sharing PostgreSQL), and its users"
    )
    adminsub = admin.add_subparsers(dest="admin_command")
    adminsub.add_parser("serve", help="serve the REST API and console (the default)")
    cu = adminsub.add_parser("create-user", help="add a console user (the first admin, say)")
    cu.add_argument("name")
    cu.add_argument("--role", choices=["admin", "editor", "viewer"], default="admin")
    cu.add_argument(
        "--password-stdin", action="store_true", help="read the password from stdin, no prompt"
    )
    imp = adminsub.add_parser(
        "import-profile", help="load a profile TOML file as the next configuration version"
    )
    imp.add_argument("path")
    admin.set_defaults(func=_admin)
    demo = sub.add_parser("demo-backend", help="a tiny order service for the demo lookup")
    demo.add_argument("--host", default="127.0.0.1")
    demo.add_argument("--port", type=int, default=8077)
    demo.set_defaults(func=_demo_backend)
    return parser


def _error(message: str) -> None:
    for line in message.splitlines():
        print(f"switchboard: {line}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``switchboard`` command: 2 for bad settings, flags or profile."""
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except SettingsError as exc:
        _error(str(exc))
        return 2
    return code


if __name__ == "__main__":
    raise SystemExit(main())
