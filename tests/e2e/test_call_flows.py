"""Keypad menus, numbers and business lookups over real SIP.

A real ``switchboard run`` with the default profile (its lookup pointed at an HTTP server
this module starts, with a PIN collector added) is called by the project's dialer (a
pjsua2 user agent in a process of its own) pressing keys as RFC 4733 events and speaking;
what the caller heard is transcribed with Whisper, and the bot's call log (SQLite) and log
lines are read back.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
import wave
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from bot.pipeline.stages.digit_collector import MASK
from bot.profile import DEFAULT_PROFILE, load_profile
from telephony.dialer import dial
from testkit.botproc import BotProcess, run_bot
from testkit.voices import speak
from testkit.wire import voiced_frames
from tests.e2e.conftest import Listener
from tests.support.sipp import run_sipp
from tests.support.sipp_scenarios import (
    ANSWERED_ALONG_ROUTE,
    INVITE_STREAMING,
    bye_to_contact,
    scenario,
)
from tests.support.text import word_error_rate

pytestmark = [pytest.mark.sip, pytest.mark.models]

RATE = 8000
#: How long the order service takes over order 12345: longer than the preamble.
HOLD_S = 2.5
TOKEN = "e2e-order-token"
PIN = "9876"
PIN_PROMPT = "Please key in your four digit PIN, then press hash."


@dataclass
class OrderService:
    """A small order service on a free loopback port: what it was asked, and when."""

    server: ThreadingHTTPServer
    requests: list[tuple[str, str, float]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"


@contextlib.contextmanager
def order_service() -> Iterator[OrderService]:
    service: OrderService

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            service.requests.append(
                (self.path, self.headers.get("Authorization", ""), time.monotonic())
            )
            status, body = 404, {"error": "no such order"}
            if self.path == "/orders/12345":
                time.sleep(HOLD_S)
                status, body = 200, {"status": "on its way", "eta": "Friday", "id": "x"}
            elif self.path == "/orders/24680":
                status, body = 200, {"status": "being packed", "eta": "Monday"}
            elif self.path == "/orders/55555":
                status, body = 500, {"error": "database down"}
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    service = OrderService(server)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield service
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def flows_profile(path: Path, service_url: str) -> Path:
    """The default profile with its lookup at ``service_url`` (with a secret) and a PIN."""
    text = DEFAULT_PROFILE.read_text(encoding="utf-8")
    text = text.replace("http://127.0.0.1:8077", service_url)
    text = text.replace(
        '\nmethod = "GET"\n',
        '\nmethod = "GET"\nauth_header = "Authorization"\nauth_secret = "orders"\n',
    )
    text = text.replace(
        '    { key = "0", intent = "talk_to_person" },\n',
        '    { key = "0", intent = "talk_to_person" },\n    { key = "4", collect = "pin" },\n',
    )
    text += f"""
[[collectors]]
name = "pin"
prompt = "{PIN_PROMPT}"
min_length = 4
max_length = 8
terminator = "#"
sensitive = true
timeout_s = 5.0
"""
    # Quiet limits short enough for a test call (no other test here is quiet this long).
    text = text.replace("silence_reprompt_s = 25.0", "silence_reprompt_s = 8.0")
    text = text.replace("silence_hangup_s = 10.0", "silence_hangup_s = 4.0")
    assert "silence_reprompt_s = 8.0" in text and "silence_hangup_s = 4.0" in text
    text += "\n[recording]\nenabled = true\n"  # every call of this module is recorded
    path.write_text(text, encoding="utf-8")
    load_profile(path)  # the test's own profile must be valid
    return path


@dataclass
class FlowBot:
    bot: BotProcess
    service: OrderService


@pytest.fixture(scope="module")
def flow_bot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FlowBot]:
    with order_service() as service:
        profile = flows_profile(tmp_path_factory.mktemp("profile") / "flows.toml", service.url)
        env = {"SWITCHBOARD_LOOKUP_SECRETS": json.dumps({"orders": TOKEN})}
        with run_bot(profile=profile, env=env) as bot:
            yield FlowBot(bot, service)


def call_row(bot: BotProcess, since: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The one call placed since log line ``since``: its row and events, once closed."""
    ids = {r["call_id"] for r in bot.records("turn", since=since)}
    assert len(ids) == 1, ids
    sip_call_id = ids.pop()
    db = bot.data_dir / "switchboard.db"
    deadline = time.monotonic() + 20
    while True:
        with (
            contextlib.suppress(sqlite3.OperationalError),
            contextlib.closing(sqlite3.connect(db, timeout=5)) as conn,
        ):
            conn.row_factory = sqlite3.Row
            row = conn.execute(
                "SELECT * FROM calls WHERE sip_call_id = ?", (sip_call_id,)
            ).fetchone()
            if row is not None and row["end_reason"] is not None:
                events = conn.execute(
                    "SELECT kind, detail FROM call_events WHERE call_id = ? ORDER BY at",
                    (row["id"],),
                ).fetchall()
                return dict(row), [dict(e) for e in events]
        assert time.monotonic() < deadline, "call not closed in the call log"
        time.sleep(0.2)


def window(samples: npt.NDArray[np.int16], start_s: float, end_s: float) -> Any:
    return samples[int(start_s * RATE) : int(end_s * RATE)]


def ends_with(expected: str, heard: str) -> bool:
    """``heard`` ends with ``expected``, give or take Whisper's mistakes (a cut-off
    greeting's last syllables may come before it)."""
    tail = " ".join(heard.split()[-len(expected.split()) :])
    return word_error_rate(expected, tail) <= 0.35


def voiced_s(samples: npt.NDArray[np.int16]) -> float:
    return float(voiced_frames(samples).sum()) * 0.02


async def test_a_menu_key_speaks_its_knowledge_entry(flow_bot: FlowBot, listener: Listener) -> None:
    profile = load_profile(DEFAULT_PROFILE)
    entry = next(k.answer for k in profile.knowledge if k.topic == "delivery_time")
    bot = flow_bot.bot
    first = len(bot.lines)
    # Key 3 (delivery times) over the greeting: the greeting stops, the entry is said.
    result = await dial(bot.uri, dtmf=[(1.5, "3")], record_seconds=9)
    assert result.sip_final_status == 200, result.error
    assert result.dtmf_sent == ["3"]
    heard = (await listener.hear(window(result.received, 1.6, 9))).lower()
    # Whisper writes "3 to 5" as "3-5" at times, and hears the cut greeting's last sounds:
    # the entry's own words, in order, are what is checked.
    assert "delivery" in heard and "working days" in heard, heard
    assert heard.index("delivery") < heard.index("working days"), (entry, heard)
    turns = bot.records("turn", since=first)
    assert [(t["route"], t["intent"]) for t in turns] == [("keypad", "delivery_time")], turns
    _, events = await asyncio.to_thread(call_row, bot, first)
    kinds = [(e["kind"], e["detail"]) for e in events]
    assert ("dtmf", "3") in kinds and ("menu", "main: 3") in kinds, kinds


async def test_an_order_number_keyed_in_is_looked_up_behind_a_preamble(
    flow_bot: FlowBot, listener: Listener
) -> None:
    profile = load_profile(DEFAULT_PROFILE)
    lookup = profile.lookups[0]
    bot, service = flow_bot.bot, flow_bot.service
    first, asked = len(bot.lines), len(service.requests)
    # Key 1 (check an order) over the greeting, then the number while the prompt plays.
    keyed_at = 3.0
    result = await dial(bot.uri, dtmf=[(1.0, "1"), (keyed_at, "12345")], record_seconds=14)
    assert result.sip_final_status == 200, result.error
    requests = service.requests[asked:]
    assert [(path, auth) for path, auth, _ in requests] == [("/orders/12345", f"Bearer {TOKEN}")]

    # The preamble is heard while the service holds its answer (HOLD_S), the answer after.
    turns = bot.records("turn", since=first)
    looked = [t for t in turns if t["route"] == "lookup"]
    assert len(looked) == 1, turns
    stages, lookup_ms = looked[0]["stages_ms"], looked[0]["model_ms"]["lookup"]
    assert lookup_ms >= HOLD_S * 1000
    # stages are from the last key: the preamble went out long before the service answered
    assert stages["first_audio_out"] < lookup_ms - 1000, looked[0]
    answered = keyed_at + 0.5 + HOLD_S  # the last of five keys, then the service's hold
    preamble = await listener.hear(window(result.received, keyed_at + 0.4, answered - 0.3))
    assert ends_with(lookup.preamble, preamble), preamble
    spoken = lookup.answer.format(status="on its way", eta="Friday")
    answer = await listener.hear(window(result.received, answered - 0.3, 14))
    assert word_error_rate(spoken, answer) <= 0.35, answer

    _, events = await asyncio.to_thread(call_row, bot, first)
    kinds = [(e["kind"], e["detail"]) for e in events]
    assert ("menu", "main: 1") in kinds and ("collect_started", "order_number") in kinds
    assert ("lookup", "order_status: found 200") in kinds, kinds


async def test_an_order_number_said_aloud_is_looked_up(
    flow_bot: FlowBot, listener: Listener
) -> None:
    profile = load_profile(DEFAULT_PROFILE)
    lookup = profile.lookups[0]
    bot, service = flow_bot.bot, flow_bot.service
    first, asked = len(bot.lines), len(service.requests)
    digits = await asyncio.to_thread(speak, "two four six eight zero.", "slt")
    # Key 1, then the number spoken once the prompt has played: the prompt (~3.5 s) starts
    # at the key, later on a loaded machine; the number comes 2.4 s after its unloaded end,
    # well inside the collector's 6 s wait.
    result = await dial(bot.uri, dtmf=[(1.0, "1")], play=digits, play_at_s=7.0, record_seconds=18)
    assert result.sip_final_status == 200, result.error
    _, events = await asyncio.to_thread(call_row, bot, first)
    seen = f"turns: {bot.heard_turns(first)}\nevents: {events}"
    assert [p for p, _, _ in service.requests[asked:]] == ["/orders/24680"], seen
    spoken = lookup.answer.format(status="being packed", eta="Monday")
    heard = await listener.hear(window(result.received, 7.0, 18))
    assert ends_with(spoken, heard), f"{heard}\n{seen}"
    turns = bot.records("turn", since=first)
    assert [t["route"] for t in turns][-1] == "lookup", seen


async def test_a_failing_service_and_an_unknown_number_are_spoken(
    flow_bot: FlowBot, listener: Listener
) -> None:
    lookup = load_profile(DEFAULT_PROFILE).lookups[0]
    bot = flow_bot.bot
    first = len(bot.lines)
    # 55555: the service answers 500. Then 11111: 404. Each heard, the call goes on. The
    # failed message (~4.5 s) starts once the five keys are in and the service has failed:
    # the next key comes well after it ends even on a loaded machine, or it would cut it.
    result = await dial(
        bot.uri,
        dtmf=[(1.0, "1"), (2.5, "55555"), (12.0, "1"), (13.5, "11111")],
        record_seconds=20,
    )
    assert result.sip_final_status == 200, result.error
    failed = await listener.hear(window(result.received, 3.0, 12.0))
    assert ends_with(lookup.failed, failed), failed
    missing = await listener.hear(window(result.received, 14.0, 20))
    assert ends_with(lookup.not_found, missing), missing
    _, events = await asyncio.to_thread(call_row, bot, first)
    outcomes = [e["detail"] for e in events if e["kind"] == "lookup"]
    assert outcomes == ["order_status: failed 500", "order_status: not_found 404"], events


async def test_a_sensitive_number_is_in_no_log_and_no_table(flow_bot: FlowBot) -> None:
    bot = flow_bot.bot
    first = len(bot.lines)
    result = await dial(bot.uri, dtmf=[(1.0, "4"), (4.0, PIN + "#")], record_seconds=8)
    assert result.sip_final_status == 200, result.error
    _, events = await asyncio.to_thread(call_row, bot, first)
    dtmf = [e["detail"] for e in events if e["kind"] == "dtmf"]
    assert dtmf == ["4"] + [MASK] * (len(PIN) + 1), dtmf
    assert ("collected", f"pin: {len(PIN)} digits") in [(e["kind"], e["detail"]) for e in events]
    # Not in a log line, and not in any table of the call log (the whole file is read).
    assert not [line for line in bot.lines[first:] if PIN in line]
    db = (bot.data_dir / "switchboard.db").read_bytes()
    assert PIN.encode() not in db
    assert f"{PIN[0]}{MASK}".encode() not in db


async def test_a_quiet_caller_is_asked_then_hung_up_on(
    flow_bot: FlowBot, listener: Listener
) -> None:
    limits = load_profile(DEFAULT_PROFILE).call_limits
    bot = flow_bot.bot
    first = len(bot.lines)
    result = await dial(bot.uri, record_seconds=30)  # the caller says nothing
    assert result.sip_final_status == 200, result.error
    assert result.ended_by_remote, "the bot did not end the quiet call"
    # greeting (~3.5 s) + 8 s quiet + the prompt + 4 s quiet + the goodbye
    assert 14 * RATE < len(result.received) < 24 * RATE, len(result.received) / RATE
    heard = await listener.hear(result.received[int(4 * RATE) :])
    expected = f"{limits.silence_prompt} {limits.goodbye}"
    assert word_error_rate(expected, heard) <= 0.35, heard
    ids = {r["call_id"] for r in bot.records("turn", since=first)}
    assert len(ids) == 1, ids
    row, events = await asyncio.to_thread(call_row, bot, first)
    assert row["end_reason"] == "silence"
    kinds = [(e["kind"], e["detail"]) for e in events]
    assert [k for k, _ in kinds] == ["silence_prompt", "call_limit"], kinds
    assert ("call_limit", "silence") in kinds


def read_recording(path: Path) -> npt.NDArray[np.int16]:
    """The recording's samples (frames x 2), once the bot has closed the file."""
    deadline = time.monotonic() + 10
    while True:
        try:
            with wave.open(str(path), "rb") as wav:
                assert (wav.getnchannels(), wav.getframerate()) == (2, RATE)
                raw = wav.readframes(wav.getnframes())
            if raw:
                return np.frombuffer(raw, "<i2").reshape(-1, 2)
        except FileNotFoundError:
            pass  # written as .part, renamed when the call ends, just after its row
        assert time.monotonic() < deadline, "recording not closed"
        time.sleep(0.2)


def age_and_purge(bot: BotProcess, call_id: str, path: Path, days: int) -> str:
    """Make the call and its recording ``days`` old, run `switchboard db purge`."""
    db = bot.data_dir / "switchboard.db"
    old = time.time() - days * 86400
    with contextlib.closing(sqlite3.connect(db, timeout=5)) as conn, conn:
        (stored,) = conn.execute(
            "SELECT answered_at FROM calls WHERE id = ?", (call_id,)
        ).fetchone()
        # the same text form as the stored value (microseconds, then any zone suffix)
        aged = datetime.fromtimestamp(old, UTC).strftime("%Y-%m-%d %H:%M:%S.%f") + stored[26:]
        conn.execute("UPDATE calls SET answered_at = ? WHERE id = ?", (aged, call_id))
    os.utime(path, (old, old))
    env = {**os.environ, "SWITCHBOARD_DATA_DIR": str(bot.data_dir)}
    proc = subprocess.run(
        [sys.executable, "-m", "node.cli", "db", "purge"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def recording_link(bot: BotProcess, call_id: str) -> str | None:
    db = bot.data_dir / "switchboard.db"
    with contextlib.closing(sqlite3.connect(db, timeout=5)) as conn:
        link = conn.execute("SELECT recording_path FROM calls WHERE id = ?", (call_id,))
        value: str | None = link.fetchone()[0]
        return value


async def test_a_recorded_call_holds_both_sides_and_is_purged_after_retention(
    flow_bot: FlowBot,
) -> None:
    bot = flow_bot.bot
    first = len(bot.lines)
    question = await asyncio.to_thread(speak, "What are your opening hours?", "slt")
    result = await dial(bot.uri, play=question, play_at_s=4.5, record_seconds=12)
    assert result.sip_final_status == 200, result.error
    row, _ = await asyncio.to_thread(call_row, bot, first)
    path = Path(row["recording_path"])
    assert path.is_relative_to(bot.data_dir / "recordings"), path
    stereo = await asyncio.to_thread(read_recording, path)
    caller, heard = stereo[:, 0].copy(), stereo[:, 1].copy()
    assert 10 * RATE < len(stereo) < 14 * RATE, len(stereo) / RATE
    # Left, the caller: silent through the greeting, then the question (~1.5 s).
    assert voiced_s(window(caller, 0, 4.3)) < 0.2
    assert voiced_s(window(caller, 4.3, 7.5)) >= 1.0
    # Right, the bot: the greeting, then its answer after the question. The greeting holds
    # about 2 s of voiced frames in all, and a loaded machine starts it a few hundred ms
    # late: 2.0 s here failed at 1.96 s; 1.0 s still tells a greeting from a silent side.
    assert voiced_s(window(heard, 0, 4.3)) >= 1.0
    assert voiced_s(window(heard, 6.0, 12)) >= 1.0

    # Forty days later: `switchboard db purge` deletes the file and the row's link to it.
    out = await asyncio.to_thread(age_and_purge, bot, row["id"], path, 40)
    assert "deleted 1 recording(s)" in out, out
    assert not await asyncio.to_thread(path.exists)
    assert await asyncio.to_thread(recording_link, bot, row["id"]) is None


def info_dtmf(signal: str, cseq: int) -> str:
    """A SIP INFO digit (application/dtmf-relay) to the bot's Contact along the route set,
    and its 200."""
    return f"""  <send retrans="500"><![CDATA[
INFO [$bot_contact] SIP/2.0
Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
From: sipp <sip:sipp@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
To: <sip:bot@[remote_ip]:[remote_port]>[peer_tag_param]
Call-ID: [call_id]
CSeq: {cseq} INFO
Contact: sip:sipp@[local_ip]:[local_port]
Max-Forwards: 70
[routes]
Content-Type: application/dtmf-relay
Content-Length: [len]

Signal={signal}
Duration=160
]]></send>
  <recv response="200"/>
"""


async def test_a_sip_info_digit_drives_the_menu(flow_bot: FlowBot, tmp_path: Path) -> None:
    bot = flow_bot.bot
    first = len(bot.lines)
    xml = scenario(
        INVITE_STREAMING,
        ANSWERED_ALONG_ROUTE,
        '  <pause milliseconds="1500"/>\n',
        info_dtmf("3", 2),
        '  <pause milliseconds="5000"/>\n',
        bye_to_contact(3),
    )
    run = await run_sipp(xml, bot.port, tmp_path / "sipp", timeout_s=30)
    assert run.ok, run.stdout + run.errors
    _, events = await asyncio.to_thread(call_row, bot, first)
    kinds = [(e["kind"], e["detail"]) for e in events]
    assert ("dtmf", "3") in kinds and ("menu", "main: 3") in kinds, kinds
    turns = bot.records("turn", since=first)
    assert [(t["route"], t["intent"]) for t in turns] == [("keypad", "delivery_time")], turns
