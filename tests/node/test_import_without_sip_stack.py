"""The telephony contract, the bot, admin and the node load without the SIP stack.

Only the worker processes need pjsua2; a module that imports events, settings or counter
names from telephony must not drag it in (it used to: ``telephony/__init__`` imported the
endpoint). Checked in a fresh interpreter in which ``import pjsua2`` fails.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

MODULES = (
    "telephony",
    "telephony.events",
    "telephony.config",
    "telephony.stats",
    "telephony.remote_call",
    "telephony.server",
    "bot.pipeline.session",
    "bot.pipeline.stages.call_control",
    "bot.queue.lobby",
    "bot.recording.recorder",
    "bot.intents.cache",
    "admin.app",
    "admin.metrics",
    "telephony.webrtc",
    "node.settings",
    "node.app",
)


def test_the_product_imports_without_pjsua2() -> None:
    script = textwrap.dedent(
        f"""
        import importlib, sys
        sys.modules["pjsua2"] = None  # 'import pjsua2' now raises ImportError
        for name in {MODULES!r}:
            importlib.import_module(name)
        from telephony import EndpointConfig, SipServer, CallEnded, EndpointError
        assert "pjsua2" in sys.modules and sys.modules["pjsua2"] is None
        loaded = [m for m in ("telephony.endpoint", "telephony.call", "telephony.bridge",
                              "telephony.media_port") if m in sys.modules]
        print("loaded:", loaded)
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip() == "loaded: []", run.stdout


def test_the_endpoint_still_needs_it() -> None:
    """The check above is real: the pjsua2 modules do fail to import in that interpreter."""
    script = 'import sys; sys.modules["pjsua2"] = None; import telephony.endpoint'
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert run.returncode != 0
    assert "pjsua2" in run.stderr
