from pathlib import Path

import pytest

from bot.app import endpoint_config, model_spec
from bot.profile import IntentConfig, IntentMatchingConfig, ProfileError, load_profile
from bot.settings import DEFAULT_PROFILE, Settings


def test_environment_reaches_the_endpoint_and_the_models(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWITCHBOARD_SIP__PORT", "5070")
    monkeypatch.setenv("SWITCHBOARD_SIP__MAX_CALLS", "7")
    monkeypatch.setenv("SWITCHBOARD_MODELS__ASR", "whisper")
    settings = Settings()
    config = endpoint_config(settings)
    assert (config.port, config.max_calls, config.sample_rate) == (5070, 7, 8000)
    assert model_spec(settings).asr == "whisper"


def test_a_bad_setting_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWITCHBOARD_SIP__PORT", "70000")
    with pytest.raises(ValueError, match="port"):
        Settings()


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
