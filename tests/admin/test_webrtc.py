"""A test call over WebRTC (an aiortc client, as the browser would be) to a real node: the
caller's question goes through the same pipeline and call log as a phone call, and the bot's
answer comes back as audio."""

from __future__ import annotations

import asyncio
import fractions
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from aiortc import MediaStreamTrack, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError
from av import AudioFrame

from bot.calllog.store import make_engine
from testkit.botproc import run_bot
from testkit.voices import RATE, speak
from tests.admin.conftest import add_token, bearer
from tests.admin.test_node import PROFILE_TOML, QUESTION

pytestmark = [pytest.mark.models]

FRAME = RATE // 50  # samples in 20 ms


class _Caller(MediaStreamTrack):
    """The caller's microphone: silence, the question, then silence, in real time."""

    kind = "audio"

    def __init__(self, pcm: bytes, at_s: float) -> None:
        super().__init__()
        lead = b"\0\0" * int(RATE * at_s)
        self._pcm = lead + pcm
        self._pts = 0
        self._start: float | None = None

    async def recv(self) -> AudioFrame:
        if self._start is None:
            self._start = time.monotonic()
        wait = self._start + self._pts / RATE - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        chunk = self._pcm[self._pts * 2 : (self._pts + FRAME) * 2].ljust(FRAME * 2, b"\0")
        frame = AudioFrame(format="s16", layout="mono", samples=FRAME)
        frame.planes[0].update(chunk)
        frame.sample_rate = RATE
        frame.pts = self._pts
        frame.time_base = fractions.Fraction(1, RATE)
        self._pts += FRAME
        return frame


async def _listen(track: Any, heard: list[float]) -> None:
    """The loudness (RMS) of each frame the bot sends, in order."""
    try:
        while True:
            frame = await track.recv()
            samples = frame.to_ndarray().astype(np.float32)
            heard.append(float(np.sqrt(np.mean(samples**2))))
    except MediaStreamError:
        return


async def test_a_browser_call_is_answered_through_the_pipeline_and_logged(
    tmp_path: Path,
) -> None:
    profile = tmp_path / "shop.toml"
    profile.write_text(PROFILE_TOML)
    with run_bot(profile=profile) as bot:
        engine = make_engine(f"sqlite+aiosqlite:///{bot.data_dir / 'switchboard.db'}")
        try:
            token = await add_token(engine, "vic", "viewer")
        finally:
            await engine.dispose()
        pc = RTCPeerConnection()
        heard: list[float] = []
        listeners: list[asyncio.Task[None]] = []

        @pc.on("track")
        def _on_track(track: Any) -> None:
            listeners.append(asyncio.create_task(_listen(track, heard)))

        pc.addTrack(_Caller(speak(QUESTION), at_s=3.0))
        await pc.setLocalDescription(await pc.createOffer())
        async with httpx.AsyncClient(
            base_url=bot.admin_url, headers=bearer(token), timeout=30
        ) as api:
            offer = {"sdp": pc.localDescription.sdp, "type": "offer"}
            r = await api.post("/api/v1/webrtc/offer", json=offer)
            assert r.status_code == 200, r.text
            await pc.setRemoteDescription(RTCSessionDescription(**r.json()))
            live: list[dict[str, Any]] = []
            for _ in range(100):
                live = (await api.get("/api/v1/calls/live")).json()
                if live:
                    break
                await asyncio.sleep(0.1)
            assert live and live[0]["caller"] == "webrtc:vic", live
            await asyncio.sleep(11.0)  # greeting, the question at 3 s, the answer
            await pc.close()
            for task in listeners:
                await asyncio.wait_for(task, 5)
            calls: list[dict[str, Any]] = []
            for _ in range(100):
                calls = (await api.get("/api/v1/calls")).json()["items"]
                if calls and calls[0]["ended_at"]:
                    break
                await asyncio.sleep(0.1)
            assert len(calls) == 1 and calls[0]["caller"] == "webrtc:vic", calls
            detail = (await api.get(f"/api/v1/calls/{calls[0]['id']}")).json()
    turns = detail["turns_detail"]
    asked = [t for t in turns if "order" in (t["transcript"] or "").lower()]
    assert asked, turns
    assert asked[0]["intent"] == "order_status"
    assert asked[0]["answer"].startswith("You can track your order")
    assert asked[0]["voice_to_voice_ms"] is not None
    # The caller heard the greeting and the answer: audio, not just silence.
    loud = sum(1 for rms in heard if rms > 300)
    assert loud > 100, (len(heard), loud)  # > 2 s of speech
