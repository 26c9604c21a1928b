"""The RFC 4475 SIP torture messages, from the project's shared material."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def rfc4475_dir() -> Path:
    """The corpus folder: ``../shared/corpus/rfc4475`` beside the project, or
    ``SWITCHBOARD_RFC4475_DIR``. Missing is a failure, not a skip: the bad-input tests
    must not vanish silently."""
    path = Path(os.environ.get("SWITCHBOARD_RFC4475_DIR", ROOT.parent / "shared/corpus/rfc4475"))
    if not any(path.glob("TC_*.dat")):
        pytest.fail(f"RFC 4475 corpus not found at {path} (set SWITCHBOARD_RFC4475_DIR)")
    return path
