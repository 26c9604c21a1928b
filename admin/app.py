"""The admin FastAPI application: REST API under /api/v1 (OpenAPI at /api/v1/openapi.json)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from fastapi import FastAPI, Request, Response
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles
from sqlalchemy.ext.asyncio import AsyncEngine

from admin.api import accounts, calls, config, webrtc
from admin.api.metrics import metrics_router
from admin.db import AdminDb
from admin.metrics import NodeMetrics
from admin.settings import AdminSettings
from admin.webrtc import WebRtcCalls
from bot.calllog.calllog import LiveCallInfo

API_TITLE = "Switchboard admin API"
STATIC = Path(__file__).parent / "static"
#: The console loads nothing from elsewhere, and no other site may frame it.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}


def create_app(
    engine: AsyncEngine,
    settings: AdminSettings,
    *,
    live_calls: Callable[[], list[LiveCallInfo]] | None = None,
    try_utterance: config.TryUtterance | None = None,
    matching_report: config.MatchingReport | None = None,
    metrics: NodeMetrics | None = None,
    webrtc_calls: WebRtcCalls | None = None,
    recordings_dir: Path | None = None,
) -> FastAPI:
    """The app on the call log's database. ``live_calls``: the node's own calls, when the
    app runs inside a node (``switchboard run``); without it, live calls come from the
    database (``switchboard admin``, for a fleet). ``recordings_dir``: the folder whose
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
    app.state.live_calls = live_calls
    app.state.try_utterance = try_utterance
    app.state.matching_report = matching_report
    app.state.metrics = metrics
    app.state.webrtc = webrtc_calls
    app.state.recordings_dir = recordings_dir
    app.include_router(accounts.router)
    app.include_router(calls.router)
    app.include_router(config.router)
    app.include_router(webrtc.router)
    app.include_router(metrics_router(public=settings.metrics_public))
    app.mount("/console", StaticFiles(directory=STATIC, html=True), name="console")

    @app.get("/", include_in_schema=False)
    async def home() -> RedirectResponse:
        return RedirectResponse("/console/")

    @app.middleware("http")
    async def security_headers(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await call_next(request)
        for key, value in SECURITY_HEADERS.items():
            response.headers.setdefault(key, value)
        if request.url.path.startswith("/api/"):
            response.headers.setdefault("Cache-Control", "no-store")
        return response

    return app
