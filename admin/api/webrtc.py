"""``POST /api/v1/webrtc/offer``: a test call from the browser, answered by this node."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, HTTPException, Request, status
from pydantic import BaseModel, Field

from admin.deps import SettingsDep, Viewer
from admin.errors import error
from admin.node_port import NodePort
from telephony.webrtc import CallRefused, WebRtcCalls
from telephony.webrtc_sdp import SdpError

router = APIRouter(prefix="/api/v1/webrtc", tags=["webrtc"])


class Offer(BaseModel):
    """The browser's session description (``RTCPeerConnection.localDescription``)."""

    sdp: str = Field(min_length=1, max_length=20_000)
    type: Literal["offer"]


class Answer(BaseModel):
    sdp: str
    type: str


@router.post("/offer", response_model=Answer, summary="Call the bot from the browser")
async def offer(body: Offer, request: Request, who: Viewer, settings: SettingsDep) -> Answer:
    """Answer a WebRTC offer; the call runs through the node's pipeline and call log, its
    caller ``webrtc:<user>``. 422 naming the line and what is wrong when the offer is
    malformed or could never connect (no audio, no ICE credentials, no DTLS fingerprint);
    429 when the user already has ``webrtc_max_calls_per_user`` browser calls; 503 when the
    node has ``webrtc_max_calls``, is at its call limit (phone calls count), or drains. An
    offer not connected within ``webrtc_connect_timeout_s`` is dropped."""
    node: NodePort | None = request.app.state.node
    calls: WebRtcCalls | None = None if node is None else node.webrtc
    if calls is None:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            detail="browser calls need a node with the webrtc extra (aiortc): use the API of "
            "`switchboard run`",
        )
    try:
        sdp, kind = await calls.answer(
            body.sdp,
            body.type,
            caller=f"webrtc:{who.user_name}",
            max_per_caller=settings.webrtc_max_calls_per_user,
            max_calls=settings.webrtc_max_calls,
            connect_timeout_s=settings.webrtc_connect_timeout_s,
        )
    except CallRefused as exc:
        code = status.HTTP_503_SERVICE_UNAVAILABLE if exc.node_full else 429
        raise HTTPException(code, detail=str(exc), headers={"Retry-After": "10"}) from None
    except SdpError as exc:
        raise error(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            f"SDP offer refused: {exc}",
            loc=("body", "sdp"),
        ) from None
    return Answer(sdp=sdp, type=kind)
