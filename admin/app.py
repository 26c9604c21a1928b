"""The admin FastAPI application: REST API under /api/v1 (OpenAPI at /api/v1/openapi.json)."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncEngine

from admin.api import accounts, calls, config
from admin.api.metrics import metrics_router
from admin.db import AdminDb
from admin.metrics import NodeMetrics
from admin.settings import AdminSettings
from bot.calllog.calllog import LiveCallInfo

API_TITLE = "Switchboard admin API"


def create_app(
    engine: AsyncEngine,
    settings: AdminSettings,
    *,
    live_calls: Callable[[], list[LiveCallInfo]] | None = None,
    try_utterance: config.TryUtterance | None = None,
    metrics: NodeMetrics | None = None,
) -> FastAPI:
    """The app on the call log's database. ``live_calls``: the node's own calls, when the
    app runs inside a node (``switchboard run``); without it, live calls come from the
    database (``switchboard admin``, for a fleet)."""
    app = FastAPI(
        title=API_TITLE,
        version="1",
        openapi_url="/api/v1/openapi.json",
        docs_url="/api/v1/docs",
        redoc_url=None,
    )
    app.state.db = AdminDb(engine)
    app.state.settings = settings
    app.state.live_calls = live_calls
    app.state.try_utterance = try_utterance
    app.state.metrics = metrics
    app.include_router(accounts.router)
    app.include_router(calls.router)
    app.include_router(config.router)
    app.include_router(metrics_router(public=settings.metrics_public))
    return app
