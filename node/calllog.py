"""The call log's settings resolved: database URL, spool folder, node name, config version."""

from __future__ import annotations

import hashlib
import socket
from pathlib import Path

from sqlalchemy.engine import make_url

from bot.calllog.calllog import CallLog
from node.settings import Settings


def database_url(settings: Settings) -> str:
    """``settings.database_url``, or the embedded SQLite file under the data folder."""
    if settings.database_url:
        return settings.database_url
    return f"sqlite+aiosqlite:///{(settings.data_dir / 'switchboard.db').resolve()}"


def spool_dir(settings: Settings) -> Path:
    """Where records wait while the database is away."""
    return settings.calllog.spool_dir or settings.data_dir / "spool"


def node_name(settings: Settings) -> str:
    """This node in the call log: two processes never share ``host:sip port`` while alive."""
    return settings.node_name or f"{socket.gethostname()}:{settings.sip.port}"


def config_version(profile: Path) -> str:
    """The bot configuration's version: SHA-256 of the profile file."""
    return hashlib.sha256(profile.read_bytes()).hexdigest()


async def open_call_log(settings: Settings) -> CallLog:
    """The node's call log. The embedded SQLite default creates its schema when new."""
    url = database_url(settings)
    return await CallLog.open(
        url,
        spool_dir=spool_dir(settings),
        node=node_name(settings),
        config_version=config_version(settings.profile),
        options=settings.calllog,
        create_if_empty=make_url(url).get_backend_name() == "sqlite",
    )


def recordings_dir(settings: Settings) -> Path:
    """Where call recordings are written: the setting, or ``<data_dir>/recordings``."""
    return settings.recordings.dir or settings.data_dir / "recordings"
