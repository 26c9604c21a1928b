"""A real ``switchboard run`` process on a loopback port, with its log lines."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testkit.ports import free_udp_port

ROOT = Path(__file__).resolve().parents[1]
SPEECH_CACHE_VARIABLE = "SWITCHBOARD_SPEECH_CACHE__DIR"
_speech_cache: str | None = None


def shared_speech_cache() -> str:
    """One speech-cache folder for every node this process starts (removed at exit): each
    node has a data folder of its own, but only the first synthesizes the fixed phrases."""
    global _speech_cache  # noqa: PLW0603 - one folder per process, made on first use
    if _speech_cache is None:
        _speech_cache = tempfile.mkdtemp(prefix="switchboard-speech-")
        atexit.register(shutil.rmtree, _speech_cache, ignore_errors=True)
    return _speech_cache


@dataclass
class BotProcess:
    """A running bot node and what it has logged so far."""

    proc: subprocess.Popen[bytes]
    port: int
    #: ``SWITCHBOARD_DATA_DIR``: the embedded call log is ``switchboard.db`` in it.
    data_dir: Path
    lines: list[str] = field(default_factory=list)

    @property
    def uri(self) -> str:
        return f"sip:bot@127.0.0.1:{self.port}"

    @property
    def admin_url(self) -> str:
        """The admin API's base URL, from the node's log (``http://127.0.0.1:<port>``)."""
        for line in self.lines:
            if "admin API on http://" in line:
                start = line.index("http://")
                return line[start:].split("/api/v1")[0]
        raise LookupError("the node logged no admin API address")

    def records(self, event: str, since: int = 0) -> list[dict[str, Any]]:
        """Structured log records with this ``event`` (from log line ``since`` on)."""
        out = []
        for line in self.lines[since:]:
            if line.startswith("{") and f'"event": "{event}"' in line:
                out.append(json.loads(line))
        return out

    def transcripts(self, since: int = 0) -> dict[tuple[str, int], str]:
        """What the node heard on each turn (its ``turn_text`` lines, logged in tests), by
        call id and turn index: beside ``records("turn")`` in a failure's message."""
        return {
            (r["call_id"], r["turn"]): r["transcript"] for r in self.records("turn_text", since)
        }

    def heard_turns(self, since: int = 0) -> list[tuple[Any, ...]]:
        """What the node heard and did on each turn from log line ``since`` on (its index,
        route, intent and score, end of turn, barge-in, words, error, then the transcript):
        for a failure's message."""
        keys = ("turn", "route", "intent", "intent_score", "eot", "barge_in", "caller_words")
        heard = self.transcripts(since)
        return [
            (*(r.get(k) for k in (*keys, "error")), heard.get((r["call_id"], r["turn"])))
            for r in self.records("turn", since=since)
        ]


@contextmanager
def run_bot(
    *, env: dict[str, str] | None = None, profile: Path | None = None, timeout_s: float = 300
) -> Iterator[BotProcess]:
    """Start ``switchboard run`` on a free port; stop it after (SIGTERM: drain; a second
    SIGTERM 5 s later: at once; SIGKILL if it still runs 15 s after that). ``timeout_s``
    bounds the start: about 40 s alone on 2 cores, over 3 minutes for a profile of its own
    (its phrases not in the speech cache) beside three busy test processes."""
    port = free_udp_port()
    data_dir = tempfile.TemporaryDirectory(prefix="switchboard-bench-")
    full_env = {
        **os.environ,
        "SWITCHBOARD_LOG_FORMAT": "json",
        "SWITCHBOARD_LOG_TRANSCRIPTS": "true",
        "SWITCHBOARD_SIP__RTP_PORT_START": str(20000 + (port % 20) * 1000),
        # a call log of its own (SQLite) unless the caller names a database
        "SWITCHBOARD_DATA_DIR": data_dir.name,
        # the admin API on a free port (several test bots run at once)
        "SWITCHBOARD_ADMIN__PORT": "0",
        # Every test caller dials from 127.0.0.1: several at once are one address's burst,
        # as a trunk's would be (a trunk is listed among the peers or upstreams).
        "SWITCHBOARD_SIP__LIMITS__MAX_UNCONFIRMED_PER_SOURCE": "64",
        **(env or {}),
    }
    if SPEECH_CACHE_VARIABLE not in full_env:
        full_env[SPEECH_CACHE_VARIABLE] = shared_speech_cache()
    if profile is not None:
        full_env["SWITCHBOARD_PROFILE"] = str(profile)
    cmd = [sys.executable, "-m", "node.cli", "run", "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=full_env, stderr=subprocess.PIPE)
    bot = BotProcess(proc=proc, port=port, data_dir=Path(full_env["SWITCHBOARD_DATA_DIR"]))
    ready = threading.Event()

    def pump() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode(errors="replace").rstrip("\n")
            bot.lines.append(line)
            if "ready: answering SIP" in line:
                ready.set()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + timeout_s
        while not ready.wait(0.2):
            if proc.poll() is not None or time.monotonic() > deadline:
                # The worker processes' own errors come before the node's traceback.
                tail = "\n".join(bot.lines[-80:])
                raise RuntimeError(f"bot did not become ready (rc={proc.poll()}):\n{tail}")
        yield bot
    finally:
        if proc.poll() is None:
            # SIGTERM drains (live calls may go on); a second one stops at once.
            for sig, wait_s in ((signal.SIGTERM, 5), (signal.SIGTERM, 15)):
                proc.send_signal(sig)
                try:
                    proc.wait(timeout=wait_s)
                    break
                except subprocess.TimeoutExpired:
                    pass
            else:
                proc.kill()
                proc.wait()
        reader.join(timeout=5)
        if proc.stderr is not None:
            proc.stderr.close()
        data_dir.cleanup()
