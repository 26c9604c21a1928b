from pathlib import Path

import pytest

from bot.profile import (
    DEFAULT_PROFILE,
    IntentConfig,
    IntentMatchingConfig,
    ProfileError,
    load_profile,
)


def test_the_packaged_profile_loads() -> None:
    profile = load_profile(DEFAULT_PROFILE)
    assert profile.greeting and profile.endpointing.end_silence_ms > 0


def test_a_broken_profile_names_the_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('name = "x"\ngreeting = ""\napology = "a"\nsystem_prompt = "s"\n')
    with pytest.raises(ProfileError, match=r"(?s)p\.toml.*greeting"):
        load_profile(path)
    path.write_text("name = [")
    with pytest.raises(ProfileError, match="not valid TOML"):
        load_profile(path)


def test_a_profile_that_is_not_utf8_is_a_profile_error(tmp_path: Path) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes('name = "Caf\u00e9"\n'.encode("latin-1"))
    with pytest.raises(ProfileError, match=r"latin1\.toml is not UTF-8 text \(byte 11"):
        load_profile(path)


def test_the_voice_section_is_refused_with_where_the_voice_is_chosen(tmp_path: Path) -> None:
    text = DEFAULT_PROFILE.read_text(encoding="utf-8") + '\n[voice]\nname = "x"\n'
    path = tmp_path / "old.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ProfileError, match="SWITCHBOARD_MODELS__TTS_VOICE_PATH"):
        load_profile(path)


def test_intent_actions_are_checked() -> None:
    profile = load_profile(DEFAULT_PROFILE)
    actions = {i.name: (i.action, i.transfer_to) for i in profile.intents if i.action}
    assert actions["goodbye"] == ("hangup", None)
    assert actions["talk_to_person"][0] == "transfer"
    assert str(actions["talk_to_person"][1]).startswith("sip:")
    base = {"name": "x", "examples": ["a"], "answer": "b"}
    with pytest.raises(ValueError, match="needs transfer_to"):
        IntentConfig.model_validate({**base, "action": "transfer"})
    with pytest.raises(ValueError, match="without action"):
        IntentConfig.model_validate({**base, "transfer_to": "sip:a@b"})
    with pytest.raises(ValueError, match="transfer_to"):
        IntentConfig.model_validate({**base, "action": "transfer", "transfer_to": "agents"})


def test_the_action_threshold_is_read_under_its_earlier_name_too() -> None:
    assert IntentMatchingConfig.model_validate({"hangup_threshold": 0.7}).action_threshold == 0.7
    assert IntentMatchingConfig.model_validate({"action_threshold": 0.6}).action_threshold == 0.6
    with pytest.raises(ValueError, match="action_threshold"):
        IntentMatchingConfig.model_validate({"action_threshold": 1.5})
