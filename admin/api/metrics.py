"""``GET /metrics``: the node's figures for Prometheus."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from admin.deps import require
from admin.node_port import NodePort


async def _metrics(request: Request) -> Response:
    node: NodePort | None = request.app.state.node
    body = generate_latest(node.metrics.registry) if node is not None else b""
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
