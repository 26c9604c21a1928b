"""``GET /metrics``: the node's figures for Prometheus."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from admin.deps import require
from admin.metrics import NodeMetrics


async def _metrics(request: Request) -> Response:
    metrics: NodeMetrics | None = request.app.state.metrics
    body = generate_latest(metrics.registry) if metrics is not None else b""
    return Response(body, media_type=CONTENT_TYPE_LATEST)


def metrics_router(*, public: bool) -> APIRouter:
    """``/metrics``, open to anyone who reaches it when ``public``, else to an API token."""
    router = APIRouter(tags=["metrics"])
    deps = [] if public else [Depends(require("viewer"))]
    router.add_api_route(
        "/metrics",
        _metrics,
        methods=["GET"],
        dependencies=deps,
        summary="Prometheus metrics",
        response_class=Response,
    )
    return router
