"""Serving the admin app with uvicorn, inside a node's event loop or on its own."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator

import uvicorn
from fastapi import FastAPI

log = logging.getLogger(__name__)


class AdminServerError(RuntimeError):
    """The admin API could not listen (address taken, not a local address...)."""


class _EmbeddedServer(uvicorn.Server):
    """uvicorn that leaves SIGTERM and SIGINT to the process it runs in: inside a node,
    the node drains its calls on SIGTERM; uvicorn's own handlers would take the signal,
    stop the API, then raise the signal again and end the node with its calls."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class AdminServer:
    """uvicorn serving ``app`` on ``host:port`` in the running event loop. ``own_signals``:
    uvicorn stops on SIGTERM/SIGINT (the API alone); otherwise the caller stops it."""

    def __init__(self, app: FastAPI, host: str, port: int, *, own_signals: bool = False) -> None:
        self.app = app
        self.host = host
        self.port = port
        self.own_signals = own_signals
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Bind (an error here is ours, not uvicorn's exit) and start serving."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError as exc:
            sock.close()
            raise AdminServerError(
                f"admin API cannot listen on {self.host}:{self.port}: {exc.strerror or exc} "
                "(SWITCHBOARD_ADMIN__HOST / SWITCHBOARD_ADMIN__PORT)"
            ) from None
        sock.listen(128)
        sock.setblocking(False)
        self.port = sock.getsockname()[1]
        # The OpenAPI document (142 KB, the console's Settings page reads it) is built here,
        # off the event loop, not by its first request: inside a node, that request built
        # it on the loop every call's pipeline runs on, 0.5 s of pure Python here (2.5 s
        # beside ten busy processes) with every call's audio and turns stopped.
        await asyncio.to_thread(self.app.openapi)
        # proxy_headers off: uvicorn would take X-Forwarded-For from any client on loopback
        # as the client's address; the app reads it only from trusted proxies
        # (AdminSettings.trusted_proxies).
        config = uvicorn.Config(
            self.app,
            log_config=None,
            access_log=False,
            lifespan="off",
            server_header=False,
            proxy_headers=False,
        )
        self._server = uvicorn.Server(config) if self.own_signals else _EmbeddedServer(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]), name="admin-api")
        while not self._server.started:
            if self._task.done():
                await self._task  # raises what stopped it
                raise AdminServerError("admin API stopped at start")
            await asyncio.sleep(0.01)
        log.info("admin API on http://%s:%d/api/v1", self.host, self.port)

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await self._task
            self._server = self._task = None

    async def wait(self) -> None:
        """Until the server stops."""
        if self._task is not None:
            await self._task
