"""The admin FastAPI application: REST API under /api/v1 (OpenAPI at /api/v1/openapi.json)."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles
from sqlalchemy.ext.asyncio import AsyncEngine

from admin import errors, openapi
from admin.api import accounts, calls, config, missed, outcomes, webrtc
from admin.api.metrics import metrics_router
from admin.db import AdminDb
from admin.http import SECURITY_HEADERS, BodyGuard, SecurityHeaders
from admin.node_port import NodePort
from admin.settings import AdminSettings

API_TITLE = "Switchboard admin API"
STATIC = Path(__file__).parent / "static"
__all__ = ["SECURITY_HEADERS", "create_app"]


def create_app(
    engine: AsyncEngine,
    settings: AdminSettings,
    *,
    node: NodePort | None = None,
    recordings_dir: Path | None = None,
) -> FastAPI:
    """The app on the call log's database. ``node``: the node the app runs inside
    (``switchboard run``): its own live calls, metrics, matcher and models; without it
    (``switchboard admin``, for a fleet) live calls come from the database and what needs
    a node's models answers 503. ``recordings_dir``: the folder whose
    recordings the API may serve (none: recordings cannot be fetched here)."""
    app = FastAPI(
        title=API_TITLE,
        version="1",
        openapi_url="/api/v1/openapi.json",
        # The interactive docs page loads its scripts from a CDN: the console does not.
        docs_url=None,
        redoc_url=None,
    )
    app.state.db = AdminDb(engine)
    app.state.settings = settings
    app.state.node = node
    app.state.recordings_dir = recordings_dir
    app.include_router(accounts.router)
    app.include_router(calls.router)
    app.include_router(missed.router)
    app.include_router(outcomes.router)
    app.include_router(config.router)
    app.include_router(webrtc.router, responses=errors.error_responses(429, 503))
    app.include_router(metrics_router(public=settings.metrics_public))
    app.mount("/console", StaticFiles(directory=STATIC, html=True), name="console")

    @app.get("/", include_in_schema=False)
    async def home() -> RedirectResponse:
        return RedirectResponse("/console/")

    errors.install(app)
    openapi.install(app)
    # Outermost last: the headers go on every response, the guard's own included.
    app.add_middleware(BodyGuard, max_bytes=settings.max_body_bytes)
    app.add_middleware(SecurityHeaders)
    return app
