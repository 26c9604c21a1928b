"""The RFC 4475 SIP torture messages, kept byte-exact in ``tests/corpus/rfc4475``."""

from __future__ import annotations

from pathlib import Path

import pytest

RFC4475_DIR = Path(__file__).resolve().parents[1] / "corpus" / "rfc4475"


def rfc4475_dir() -> Path:
    """The corpus folder. Missing is a failure, not a skip: the bad-input tests must not
    vanish silently."""
    if not any(RFC4475_DIR.glob("TC_*.dat")):
        pytest.fail(f"RFC 4475 corpus not found at {RFC4475_DIR}")
    return RFC4475_DIR
