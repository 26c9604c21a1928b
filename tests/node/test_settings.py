"""The node's settings: composed from each part's own model, strict about what it reads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from node.cli import main
from node.settings import Settings, SettingsError, load_settings
from serve.registry import ModelSpec
from telephony.config import SAMPLE_RATE, EndpointConfig

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # The suite's own SWITCHBOARD_ variables (if any) must not leak into these checks.
    for key in list(os.environ):
        if key.upper().startswith("SWITCHBOARD_"):
            monkeypatch.delenv(key)


def test_the_sections_are_the_parts_own_models(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWITCHBOARD_SIP__PORT", "5070")
    monkeypatch.setenv("SWITCHBOARD_SIP__MAX_CALLS", "7")
    monkeypatch.setenv("SWITCHBOARD_SIP__STRICT_RTP_SOURCE", "false")
    monkeypatch.setenv("SWITCHBOARD_SIP__USER_AGENT", "Acme IVR")
    monkeypatch.setenv("SWITCHBOARD_SIP__ANSWER_DELAY_MS", "250")
    monkeypatch.setenv("SWITCHBOARD_SIP__CODECS", "pcmu, PCMA")
    monkeypatch.setenv("SWITCHBOARD_SIP__SRTP", "Mandatory")
    monkeypatch.setenv("SWITCHBOARD_SIP__AGENT_SRTP", "optional")
    monkeypatch.setenv("SWITCHBOARD_MODELS__ASR", "whisper")
    settings = load_settings()
    assert isinstance(settings.sip, EndpointConfig)
    assert isinstance(settings.models, ModelSpec)
    sip = settings.sip
    assert (sip.port, sip.max_calls, sip.sample_rate) == (5070, 7, SAMPLE_RATE)
    assert (sip.strict_rtp_source, sip.user_agent, sip.answer_delay_ms) == (False, "Acme IVR", 250)
    assert sip.codecs == ("PCMU", "PCMA")
    assert (sip.srtp, sip.agent_srtp) == ("mandatory", "optional")
    assert settings.models.asr == "whisper"


def test_each_default_is_the_parts_own() -> None:
    settings = Settings()
    assert settings.sip == EndpointConfig()
    assert (settings.sip.srtp, settings.sip.agent_srtp) == ("optional", "off")
    assert settings.models == ModelSpec()
    assert (settings.models.asr, settings.models.embedder) == ("whisper-window+base", "minilm")


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        (
            "SWITCHBOARD_SIP__PORTT",
            "5070",
            "SWITCHBOARD_SIP__PORTT: unknown setting (did you mean SWITCHBOARD_SIP__PORT?)",
        ),
        ("SWITCHBOARD_BOGUS", "1", "SWITCHBOARD_BOGUS: unknown setting"),
        ("SWITCHBOARD_SIP", "x", "SWITCHBOARD_SIP: is a section; set its fields"),
        (
            "SWITCHBOARD_SIP__PORT__X",
            "1",
            "SWITCHBOARD_SIP__PORT__X: SWITCHBOARD_SIP__PORT has no sub-settings",
        ),
        (
            "SWITCHBOARD_SIP__CODECS",
            "OPUS",
            "SWITCHBOARD_SIP__CODECS: unknown codec 'OPUS'; known: G722, PCMU, PCMA (got 'OPUS')",
        ),
        (
            "SWITCHBOARD_SIP__CODECS",
            "PCMU,PCMU",
            "SWITCHBOARD_SIP__CODECS: a codec is listed twice",
        ),
        (
            "SWITCHBOARD_SIP__SRTP",
            "yes",
            "SWITCHBOARD_SIP__SRTP: Input should be 'optional', 'mandatory' or 'off' (got 'yes')",
        ),
        (
            "SWITCHBOARD_SIP__PORT",
            "70000",
            "SWITCHBOARD_SIP__PORT: Input should be less than or equal to 65535 (got '70000')",
        ),
        (
            "SWITCHBOARD_SIP__RTP_PORT_START",
            "65000",
            "SWITCHBOARD_SIP: RTP ports 65000-65999 pass 65535",
        ),
        ("SWITCHBOARD_MODELS__LLM", "gpt", "SWITCHBOARD_MODELS__LLM: unknown llm backend 'gpt'"),
        (
            "SWITCHBOARD_MODELS__LLM",
            "vllm",
            "SWITCHBOARD_MODELS: llm backend 'vllm' needs llm_model_path",
        ),
        (
            "SWITCHBOARD_LOG_FORMAT",
            "xml",
            "SWITCHBOARD_LOG_FORMAT: Input should be 'json' or 'text' (got 'xml')",
        ),
        (
            "SWITCHBOARD_CALL_ACTIONS",
            "maybe",
            "SWITCHBOARD_CALL_ACTIONS: Input should be a valid boolean",
        ),
    ],
)
def test_a_bad_variable_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    variable: str,
    value: str,
    message: str,
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert len(err.value.problems) == 1
    assert err.value.problems[0].startswith(message)
    # The command refuses to start with the same line, exit status 2.
    assert main(["db", "current"]) == 2
    stderr = capsys.readouterr().err
    assert stderr.startswith(f"switchboard: {message}")
    assert stderr.count("\n") == 1


def test_a_flag_passes_the_same_validation_and_is_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["run", "--port", "70000", "--profile", str(tmp_path / "p.toml")]) == 2
    assert capsys.readouterr().err == (
        "switchboard: --port: Input should be less than or equal to 65535 (got 70000)\n"
    )


def test_a_flag_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWITCHBOARD_SIP__PORT", "5070")
    monkeypatch.setenv("SWITCHBOARD_SIP__HOST", "127.0.0.2")
    settings = load_settings({"sip": {"port": 5080}}, flags={("sip", "port"): "--port"})
    assert (settings.sip.host, settings.sip.port) == ("127.0.0.2", 5080)


def test_install_variables_are_not_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWITCHBOARD_TORCH_INDEX", "https://example.invalid/simple")
    assert load_settings().sip.port == 5060


def _switchboard(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.upper().startswith("SWITCHBOARD_")}
    return subprocess.run(
        [sys.executable, "-m", "node.cli", *args],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_command_stops_with_exit_2_and_no_traceback(tmp_path: Path) -> None:
    bad_var = _switchboard("run", env={"SWITCHBOARD_SIP__PORTT": "5070"})
    assert bad_var.returncode == 2
    assert bad_var.stderr == (
        "switchboard: SWITCHBOARD_SIP__PORTT: unknown setting "
        "(did you mean SWITCHBOARD_SIP__PORT?)\n"
    )
    profile = tmp_path / "latin1.toml"
    profile.write_bytes('name = "Caf\u00e9"\n'.encode("latin-1"))
    bad_profile = _switchboard(
        "run", "--profile", str(profile), env={"SWITCHBOARD_DATA_DIR": str(tmp_path)}
    )
    assert bad_profile.returncode == 2
    assert "Traceback" not in bad_profile.stderr
    assert f"switchboard: bot profile {profile} is not UTF-8 text" in bad_profile.stderr


def test_the_model_tier_is_in_process_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings().tier.backend == "in-process"
    monkeypatch.setenv("SWITCHBOARD_TIER__BACKEND", "ray")
    monkeypatch.setenv("SWITCHBOARD_TIER__ADDRESS", "10.0.0.5:6379")
    monkeypatch.setenv("SWITCHBOARD_TIER__LLM__MAX_REPLICAS", "6")
    tier = load_settings().tier
    assert (tier.backend, tier.address, tier.llm.max_replicas) == ("ray", "10.0.0.5:6379", 6)
    assert tier.deployment("llm") is tier.llm
    monkeypatch.setenv("SWITCHBOARD_TIER__LLM__MIN_REPLICAS", "7")
    with pytest.raises(SettingsError, match=r"SWITCHBOARD_TIER__LLM: .*below min_replicas"):
        load_settings()
    monkeypatch.delenv("SWITCHBOARD_TIER__LLM__MIN_REPLICAS")
    monkeypatch.setenv("SWITCHBOARD_TIER__BACKEND", "gpu")
    with pytest.raises(SettingsError, match="SWITCHBOARD_TIER__BACKEND"):
        load_settings()


def test_the_embedded_node_does_not_import_ray() -> None:
    # What `switchboard run` imports before it starts (settings, the node, its models'
    # registry): Ray is loaded only with SWITCHBOARD_TIER__BACKEND=ray.
    code = (
        "import sys, node.cli, node.app, node.settings, serve, serve.scale.settings;"
        "node.settings.load_settings();"
        "print('ray' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("SWITCHBOARD_")}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False", out.stderr


def test_serve_commands_need_a_cluster_address() -> None:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("SWITCHBOARD_")}
    done = _switchboard("serve", "status", env=env)
    assert done.returncode == 2
    assert "SWITCHBOARD_TIER__ADDRESS" in done.stderr
