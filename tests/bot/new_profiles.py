"""The development and held-out profiles of new operators (``bench/intent_eval/new_profiles``),
written as a business new to the bot writes one: few examples an intent, no negatives."""

from __future__ import annotations

from pathlib import Path

from bot.profile import DEFAULT_PROFILE

NEW_PROFILES = DEFAULT_PROFILE.parents[2] / "bench" / "intent_eval" / "new_profiles"


def new_profile(name: str) -> Path:
    """The profile file of the new operator ``name`` (``brightwave``, ``harbor_dental``...)."""
    path = NEW_PROFILES / name / "profile.toml"
    assert path.is_file(), path
    return path
