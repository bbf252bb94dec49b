"""Settings: docs/protocol.md "Configuration" — defaults, six sources, per-key fallback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentls.core.settings.load import LoadedSettings, load_settings
from agentls.core.settings.schema import AgentlsSettings, ApprovalRule, default_settings
from agentls.core.settings.sources import user_config_path
from agentls.core.trust.workspace import TrustDecision, TrustStore, digest


@pytest.fixture
def no_user_config(tmp_path: Path) -> Path:
    """A user config path that does not exist, so the real one is never read."""
    return tmp_path / "user" / "config.toml"


class TrustEverything(TrustStore):
    """These tests are about layering, not trust (tests/test_workspace_trust.py
    is): the workspace file counts as trusted."""

    def __init__(self) -> None:
        super().__init__(None)

    def decision(self, file: Path | str, content_digest: str, kind: str = "settings"
                 ) -> TrustDecision | None:
        return "trusted"


def load(user_config: Path, **kwargs: Any) -> LoadedSettings:
    kwargs.setdefault("environ", {})
    kwargs.setdefault("trust_store", TrustEverything())
    return load_settings(user_config_file=user_config, **kwargs)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------- defaults


def test_defaults_match_protocol_table(no_user_config: Path) -> None:
    s = default_settings()
    assert s.provider == "local"
    assert s.model is None and s.base_url is None and s.api_key_env is None
    assert s.provider_options == {}
    assert s.request_timeout_seconds == 60 and s.connect_timeout_seconds == 10
    ic = s.inline_completion
    assert (ic.enabled, ic.model, ic.debounce_ms, ic.max_prefix_chars, ic.max_suffix_chars,
            ic.max_tokens) == (True, None, 50, 6000, 2000, 128)
    assert (s.approval.mode, s.approval.timeout_seconds, s.approval.default) == (
        "auto", 300, "deny")
    assert (s.session.injection_size_limit, s.session.injection_budget_per_turn,
            s.session.max_iterations) == (10240, 10000, 25)
    assert s.linters is None
    assert s.features.disabled == []

    loaded = load(no_user_config)
    assert loaded.settings == s
    assert loaded.problems == []
    assert set(loaded.sources.values()) == {"default"}


def test_no_user_rules_by_default_the_policy_holds_the_built_in_ones() -> None:
    # One table of built-in actions by the kind of call a tool declares
    # (features/policy/rules.py BUILTIN_ACTIONS), after the user's rules; the
    # settings default is just "no rules of your own".
    from agentls.features.policy.rules import BUILTIN_ACTIONS

    assert default_settings().approval.rules == []
    assert BUILTIN_ACTIONS == {"none": "allow", "read": "allow", "edit": "ask", "run": "ask",
                               "call": "ask"}


def test_to_wire_is_camel_case_json() -> None:
    wire = default_settings().to_wire()
    assert json.loads(json.dumps(wire)) == wire
    assert wire["inlineCompletion"]["debounceMs"] == 50
    assert wire["approval"]["timeoutSeconds"] == 300
    assert wire["session"]["injectionSizeLimit"] == 10240
    assert {"baseUrl", "apiKeyEnv", "providerOptions", "requestTimeoutSeconds"} <= set(wire)
    assert "base_url" not in wire


def test_models_are_frozen() -> None:
    s = default_settings()
    with pytest.raises(AttributeError):
        s.provider = "openai"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        s.approval.mode = "message"  # type: ignore[misc]


# --------------------------------------------------------------------------- precedence

LAYERS = ["initializationOptions", "workspace/configuration", "environment",
          ".agentls.toml", "user config"]


@pytest.mark.parametrize("top", range(len(LAYERS)))
def test_each_source_outranks_the_ones_below(top: int, tmp_path: Path) -> None:
    # Every layer from `top` down sets `model` to its own name; the top one must win.
    present = LAYERS[top:]
    user = write(tmp_path / "user.toml", 'model = "user config"\n')
    # `model` from a workspace file needs the user's trust (docs/security.md): trusted here.
    store = TrustStore(tmp_path / "trust.json")
    if ".agentls.toml" in present:
        ws_file = write(tmp_path / "ws" / ".agentls.toml", 'model = ".agentls.toml"\n')
        store.record(ws_file, digest(ws_file.read_bytes()), "trusted")
    loaded = load_settings(
        trust_store=store,
        init_options={"model": "initializationOptions"} if "initializationOptions" in present
        else None,
        workspace_config={"model": "workspace/configuration"}
        if "workspace/configuration" in present else None,
        environ={"AGENTLS_MODEL": "environment"} if "environment" in present else {},
        workspace_root=tmp_path / "ws",
        user_config_file=user,
    )
    assert loaded.problems == []
    assert loaded.settings.model == LAYERS[top]
    assert loaded.sources["model"].startswith(LAYERS[top])


def test_source_names(tmp_path: Path) -> None:
    user = write(tmp_path / "user.toml", "[session]\nmax_iterations = 5\n")
    ws = write(tmp_path / ".agentls.toml", "[session]\ninjectionBudgetPerTurn = 7\n")
    loaded = load_settings(
        init_options={"model": "m"},
        workspace_config={"provider": "openai"},
        environ={"AGENTLS_BASE_URL": "http://localhost:1/v1"},
        workspace_root=tmp_path,
        user_config_file=user,
    )
    assert loaded.sources["model"] == "initializationOptions"
    assert loaded.sources["provider"] == "workspace/configuration"
    assert loaded.sources["baseUrl"] == "environment (AGENTLS_BASE_URL)"
    assert loaded.sources["session.injectionBudgetPerTurn"] == f".agentls.toml ({ws})"
    assert loaded.sources["session.maxIterations"] == f"user config ({user})"
    assert loaded.sources["approval.mode"] == "default"


def test_nested_objects_merge_key_by_key_across_all_sources(tmp_path: Path) -> None:
    user = write(tmp_path / "user.toml", '[approval]\ndefault = "allow"\n')
    write(tmp_path / ".agentls.toml", "[approval]\nrules = []\n")
    loaded = load_settings(
        init_options={"approval": {"mode": "message"}},
        workspace_config={"approval": {}},
        environ={"AGENTLS_APPROVAL__TIMEOUT_SECONDS": "5"},
        workspace_root=tmp_path,
        user_config_file=user,
        trust_store=TrustEverything(),
    )
    approval = loaded.settings.approval
    assert (approval.mode, approval.timeout_seconds, approval.default, approval.rules) == (
        "message", 5.0, "allow", [])
    assert loaded.problems == []


def test_lists_replace_rather_than_merge(tmp_path: Path, no_user_config: Path) -> None:
    write(tmp_path / ".agentls.toml",
          '[features]\ndisabled = ["b", "c"]\n'
          '[[approval.rules]]\ntool = "run_command"\naction = "deny"\n')
    loaded = load(no_user_config, init_options={"features": {"disabled": ["a"]}},
                  workspace_root=tmp_path)
    assert loaded.settings.features.disabled == ["a"]
    assert loaded.settings.approval.rules == [ApprovalRule(tool="run_command", action="deny")]


def test_user_config_file_defaults_to_platformdirs_and_can_be_overridden(
        tmp_path: Path) -> None:
    assert user_config_path({}).name == "config.toml"
    assert user_config_path({}).parent.name == "agentls"
    override = write(tmp_path / "cfg.toml", 'provider = "ollama"\n')
    assert user_config_path({"AGENTLS_CONFIG_FILE": str(override)}) == override
    loaded = load_settings(environ={"AGENTLS_CONFIG_FILE": str(override)})
    assert loaded.settings.provider == "ollama"
    assert loaded.sources["provider"] == f"user config ({override})"


# --------------------------------------------------------------------------- environment


def test_environment_variable_names_as_protocol_spells_them(no_user_config: Path) -> None:
    environ = {
        "AGENTLS_PROVIDER": "openai",
        "AGENTLS_MODEL": "gpt-x",
        "AGENTLS_BASE_URL": "http://127.0.0.1:8080/v1",
        "AGENTLS_API_KEY_ENV": "MY_KEY",
        "AGENTLS_APPROVAL__MODE": "annotation",
        "AGENTLS_INLINE_COMPLETION__DEBOUNCE_MS": "120",
        "AGENTLS_INLINE_COMPLETION__ENABLED": "false",
        "AGENTLS_SESSION__MAX_ITERATIONS": "3",
        "AGENTLS_SESSION__INJECTION_SIZE_LIMIT": "null",
        "AGENTLS_FEATURES__DISABLED": "templates, mentions",
        "AGENTLS_REQUEST_TIMEOUT_SECONDS": "2.5",
        "AGENTLS_PROVIDER_OPTIONS": '{"script": "s.json"}',
        "AGENTLS_LINTERS": '[{"languages": ["python"], "command": ["ruff", "{file}"]}]',
    }
    loaded = load(no_user_config, environ=environ)
    assert loaded.problems == []
    s = loaded.settings
    assert (s.provider, s.model, s.base_url, s.api_key_env) == (
        "openai", "gpt-x", "http://127.0.0.1:8080/v1", "MY_KEY")
    assert s.approval.mode == "annotation"
    assert (s.inline_completion.debounce_ms, s.inline_completion.enabled) == (120, False)
    assert s.session.max_iterations == 3
    assert s.session.injection_size_limit is None
    assert s.features.disabled == ["templates", "mentions"]
    assert s.request_timeout_seconds == 2.5
    assert s.provider_options == {"script": "s.json"}
    assert s.linters is not None and s.linters[0].command == ["ruff", "{file}"]
    assert loaded.sources["approval.mode"] == "environment (AGENTLS_APPROVAL__MODE)"


def test_environment_lists_as_json_and_objects_as_json(no_user_config: Path) -> None:
    loaded = load(no_user_config, environ={
        "AGENTLS_FEATURES__DISABLED": '["x", "y"]',
        "AGENTLS_APPROVAL": '{"mode": "message", "timeoutSeconds": 9}',
        # the more specific variable wins over the object
        "AGENTLS_APPROVAL__TIMEOUT_SECONDS": "4",
        "AGENTLS_APPROVAL__RULES": '[{"tool": "*", "action": "deny"}]',
    })
    s = loaded.settings
    assert loaded.problems == []
    assert s.features.disabled == ["x", "y"]
    assert (s.approval.mode, s.approval.timeout_seconds) == ("message", 4.0)
    assert s.approval.rules == [ApprovalRule(tool="*", action="deny")]


def test_empty_environment_variables_are_unset(no_user_config: Path) -> None:
    loaded = load(no_user_config, environ={"AGENTLS_PROVIDER": "", "AGENTLS_MODEL": ""})
    assert loaded.settings == default_settings()
    assert loaded.problems == []


def test_unknown_environment_variables(no_user_config: Path) -> None:
    loaded = load(no_user_config, environ={
        "AGENTLS_PROVDER": "openai",  # typo of a setting: reported
        "AGENTLS_APPROVAL__MODDE": "message",  # under a settings object: reported
        "AGENTLS_STATE_DIR": "/tmp/x",  # belongs to the session store
        "AGENTLS_CONFIG_FILE": str(no_user_config),
        "AGENTLS_SOMETHING_ELSE_ENTIRELY": "1",  # another tool's variable
        "PATH": "/bin",
    })
    keys = {p.key for p in loaded.problems}
    assert keys == {"AGENTLS_PROVDER", "AGENTLS_APPROVAL__MODDE"}
    typo = next(p for p in loaded.problems if p.key == "AGENTLS_PROVDER")
    assert "AGENTLS_PROVIDER" in typo.message
    assert loaded.settings == default_settings()


def test_bad_json_in_environment_falls_back(tmp_path: Path, no_user_config: Path) -> None:
    write(tmp_path / ".agentls.toml", '[[approval.rules]]\ntool = "x"\naction = "allow"\n')
    loaded = load(no_user_config, environ={"AGENTLS_APPROVAL__RULES": "[{not json"},
                  workspace_root=tmp_path)
    assert loaded.settings.approval.rules == [ApprovalRule(tool="x", action="allow")]
    (problem,) = loaded.problems
    assert problem.key == "approval.rules"
    assert problem.source == "environment (AGENTLS_APPROVAL__RULES)"
    assert "not valid JSON" in problem.message


# --------------------------------------------------------------------------- spelling


def test_camel_case_and_snake_case_input(tmp_path: Path, no_user_config: Path) -> None:
    camel = {"baseUrl": "https://example.com/v1", "inlineCompletion": {"maxTokens": 64},
             "session": {"maxIterations": 7}, "apiKeyEnv": "K"}
    snake = {"base_url": "https://example.com/v1", "inline_completion": {"max_tokens": 64},
             "session": {"max_iterations": 7}, "api_key_env": "K"}
    a = load(no_user_config, init_options=camel)
    b = load(no_user_config, workspace_config=snake)
    assert a.problems == b.problems == []
    assert a.settings == b.settings
    assert a.settings.inline_completion.max_tokens == 64

    write(tmp_path / ".agentls.toml",
          'base_url = "https://example.com/v1"\napiKeyEnv = "K"\n'
          "[inlineCompletion]\nmax_tokens = 64\n[session]\nmaxIterations = 7\n")
    c = load(no_user_config, workspace_root=tmp_path)
    assert c.problems == []
    assert c.settings == a.settings


def test_python_construction_accepts_both_spellings() -> None:
    assert AgentlsSettings(base_url="http://a/v1") == AgentlsSettings.model_validate(
        {"baseUrl": "http://a/v1"})


# --------------------------------------------------------------------------- fallback


def test_bad_value_falls_back_for_that_key_only(no_user_config: Path) -> None:
    loaded = load(
        no_user_config,
        init_options={"approval": {"mode": "bogus"}, "model": "from-init"},
        workspace_config={"approval": {"mode": "message"}, "model": "from-workspace"},
    )
    assert loaded.settings.approval.mode == "message"
    assert loaded.settings.model == "from-init"
    assert loaded.sources["approval.mode"] == "workspace/configuration"
    (problem,) = loaded.problems
    assert problem.key == "approval.mode"
    assert problem.source == "initializationOptions"
    assert problem.message.startswith(
        "approval.mode: 'bogus' is not valid (from initializationOptions); "
        "accepted values: 'auto', 'annotation', 'message'.")
    assert "Using 'message'" in problem.message


def test_problem_message_names_key_value_accepted_values_and_fallback(
        no_user_config: Path) -> None:
    loaded = load(no_user_config, init_options={"approval": {"mode": "bogus"}})
    assert loaded.settings.approval.mode == "auto"
    (problem,) = loaded.problems
    assert problem.message == (
        "approval.mode: 'bogus' is not valid (from initializationOptions); "
        "accepted values: 'auto', 'annotation', 'message'. Using 'auto' instead.")
    assert str(problem) == problem.message


@pytest.mark.parametrize(
    ("options", "key", "accepted"),
    [
        ({"inlineCompletion": {"debounceMs": 5000}}, "inlineCompletion.debounceMs",
         "an integer from 0 to 2000"),
        ({"inlineCompletion": {"maxTokens": 0}}, "inlineCompletion.maxTokens",
         "an integer from 1 to 4096"),
        ({"inlineCompletion": {"enabled": "maybe"}}, "inlineCompletion.enabled", "true, false"),
        ({"session": {"maxIterations": True}}, "session.maxIterations", "from 1 to 1000"),
        ({"requestTimeoutSeconds": 0}, "requestTimeoutSeconds", "greater than 0"),
        ({"approval": {"timeoutSeconds": float("inf")}}, "approval.timeoutSeconds",
         "greater than 0"),
        ({"approval": {"default": "ask"}}, "approval.default", "'allow', 'deny'"),
        ({"provider": "has space"}, "provider", "openai"),
        ({"provider": ""}, "provider", "openai"),
        ({"model": ""}, "model", "model id"),
        ({"baseUrl": "ftp://example.com"}, "baseUrl", "http:// or https://"),
        ({"baseUrl": "localhost:11434"}, "baseUrl", "http:// or https://"),
        ({"apiKeyEnv": "NOT A NAME"}, "apiKeyEnv", "environment variable"),
        ({"approval": {"rules": [{"tool": "x", "command": "(", "action": "deny"}]}},
         "approval.rules", "regular expression"),
        ({"approval": {"rules": [{"tool": "x"}]}}, "approval.rules", "action"),
        ({"linters": [{"languages": [], "command": ["x"]}]}, "linters", "languages"),
        ({"linters": [{"languages": ["py"], "command": []}]}, "linters", "command"),
        ({"features": {"disabled": "templates"}}, "features.disabled", "list of plugin names"),
        ({"providerOptions": [1]}, "providerOptions", "object"),
        ({"contextWindow": 100}, "contextWindow", "512 or more"),
        ({"contextWindow": True}, "contextWindow", "number of tokens"),
        ({"instructions": {"files": ["../outside.md"]}}, "instructions.files",
         "relative to a folder"),
        ({"instructions": {"files": ["/etc/rules.md"]}}, "instructions.files",
         "relative to a folder"),
    ],
)
def test_invalid_values_are_reported_and_replaced_by_the_default(
        options: dict[str, Any], key: str, accepted: str, no_user_config: Path) -> None:
    loaded = load(no_user_config, init_options=options)
    assert loaded.settings == default_settings()
    (problem,) = loaded.problems
    assert problem.key == key
    assert problem.message.startswith(f"{key}: ")
    assert accepted in problem.message
    assert "instead." in problem.message
    assert loaded.sources[key] == "default"


def test_long_bad_values_are_truncated(no_user_config: Path) -> None:
    loaded = load(no_user_config, init_options={"approval": {"mode": "x" * 500}})
    (problem,) = loaded.problems
    assert "x" * 81 not in problem.message
    assert "..." in problem.message


def test_shadowed_bad_values_are_reported_too(tmp_path: Path) -> None:
    user = write(tmp_path / "user.toml", "[session]\nmax_iterations = -1\n")
    loaded = load_settings(init_options={"session": {"maxIterations": 9}}, environ={},
                           user_config_file=user)
    assert loaded.settings.session.max_iterations == 9
    (problem,) = loaded.problems
    assert problem.source == f"user config ({user})"
    assert "Using 9 (from initializationOptions) instead." in problem.message


def test_null_is_a_value_only_where_null_is_accepted(tmp_path: Path, no_user_config: Path
                                                     ) -> None:
    write(tmp_path / ".agentls.toml",
          'model = "m"\nprovider = "ollama"\n[session]\ninjection_size_limit = 5\n')
    loaded = load(no_user_config, workspace_root=tmp_path,
                  init_options={"model": None, "provider": None, "approval": None,
                                "session": {"injectionSizeLimit": None}})
    assert loaded.problems == []
    assert loaded.settings.model is None  # explicit: the provider's default
    assert loaded.settings.session.injection_size_limit is None  # explicit: no limit
    assert loaded.settings.provider == "ollama"  # null provider: not set


# --------------------------------------------------------------------------- unknown / broken


def test_unknown_keys_are_reported_and_ignored(no_user_config: Path) -> None:
    loaded = load(no_user_config, init_options={"foo": 1, "provider": "openai",
                                                "approval": {"mdoe": "message"}})
    assert loaded.settings.provider == "openai"
    assert loaded.settings.approval.mode == "auto"
    by_key = {p.key: p for p in loaded.problems}
    assert set(by_key) == {"foo", "approval.mdoe"}
    assert "unknown setting 'foo'" in by_key["foo"].message
    assert "known keys: provider, model, baseUrl" in by_key["foo"].message
    assert "did you mean 'mode'?" in by_key["approval.mdoe"].message
    assert by_key["foo"].source == "initializationOptions"


def test_objects_of_the_wrong_shape_are_reported(no_user_config: Path) -> None:
    loaded = load(no_user_config, init_options={"approval": "message"})
    (problem,) = loaded.problems
    assert problem.key == "approval"
    assert "mode, timeoutSeconds, default, rules" in problem.message

    loaded = load(no_user_config, init_options=["not", "a", "mapping"])
    (problem,) = loaded.problems
    assert problem.source == "initializationOptions"
    assert loaded.settings == default_settings()


def test_broken_toml_is_one_problem_and_the_rest_still_loads(tmp_path: Path) -> None:
    broken = write(tmp_path / "ws" / ".agentls.toml", 'provider = "openai"\nmodel = \n')
    user = write(tmp_path / "user.toml", 'model = "from-user"\n[approval]\nmode = "message"\n')
    loaded = load_settings(environ={"AGENTLS_PROVIDER": "anthropic"},
                           workspace_root=tmp_path / "ws", user_config_file=user)
    (problem,) = loaded.problems
    assert str(broken) in problem.source and str(broken) in problem.message
    assert "line 2" in problem.message
    assert loaded.settings.provider == "anthropic"
    assert loaded.settings.model == "from-user"
    assert loaded.settings.approval.mode == "message"


def test_unreadable_config_file_is_reported(tmp_path: Path) -> None:
    not_a_file = tmp_path / "config.toml"
    not_a_file.mkdir()
    loaded = load_settings(environ={}, user_config_file=not_a_file)
    (problem,) = loaded.problems
    assert problem.source == f"user config ({not_a_file})"
    assert loaded.settings == default_settings()


def test_toml_values_that_are_not_json_are_rejected(tmp_path: Path, no_user_config: Path
                                                    ) -> None:
    write(tmp_path / ".agentls.toml", "[providerOptions]\nwhen = 1979-05-27\n")
    loaded = load(no_user_config, workspace_root=tmp_path)
    assert loaded.settings.provider_options == {}
    (problem,) = loaded.problems
    assert problem.key == "providerOptions"
    json.dumps(loaded.settings.to_wire())


# --------------------------------------------------------------------------- secrets

SECRET = "sk-test-0123456789abcdef"


def test_api_key_is_read_from_the_environment_when_asked() -> None:
    env = {"OPENAI_API_KEY": SECRET, "ANTHROPIC_API_KEY": "a-key", "MINE": " mine \n"}
    assert AgentlsSettings(provider="openai").api_key(env) == SECRET
    assert AgentlsSettings(provider="anthropic").api_key(env) == "a-key"
    assert AgentlsSettings(provider="openai", api_key_env="MINE").api_key(env) == "mine"
    assert AgentlsSettings(provider="local").api_key(env) is None
    assert AgentlsSettings(provider="ollama").api_key_env_name() is None
    assert AgentlsSettings(provider="openai").api_key({}) is None


def test_api_key_never_appears_in_repr_wire_or_problems(no_user_config: Path) -> None:
    environ = {"OPENAI_API_KEY": SECRET, "AGENTLS_PROVIDER": "openai",
               # a key pasted where a variable name belongs
               "AGENTLS_API_KEY_ENV": SECRET}
    loaded = load(no_user_config, environ=environ,
                  init_options={"providerOptions": {"apiKey": SECRET},
                                "apiKeyEnv": SECRET + "!"})
    s = loaded.settings
    assert s.api_key(environ) == SECRET
    assert s.provider_options == {}  # secrets are refused as settings
    everything = repr(s) + str(s) + json.dumps(s.to_wire()) + repr(loaded)
    assert SECRET not in everything
    assert {p.key for p in loaded.problems} == {"apiKeyEnv", "providerOptions"}
    assert all("<redacted>" in p.message for p in loaded.problems)


def test_secret_looking_entries_are_redacted_in_nested_values(no_user_config: Path) -> None:
    loaded = load(no_user_config, init_options={
        "providerOptions": {"headers": {"Authorization": f"Bearer {SECRET}"}}})
    (problem,) = loaded.problems
    assert SECRET not in problem.message
    assert "<redacted>" in problem.message


def test_max_tokens_is_not_mistaken_for_a_secret(no_user_config: Path) -> None:
    loaded = load(no_user_config, init_options={"inlineCompletion": {"maxTokens": "lots"}})
    (problem,) = loaded.problems
    assert "'lots'" in problem.message


# --------------------------------------------------------------------------- round trip


def test_to_wire_round_trips_through_load_settings(no_user_config: Path) -> None:
    custom = AgentlsSettings.model_validate({
        "provider": "scripted", "model": "m", "baseUrl": "https://h/v1", "apiKeyEnv": "K",
        "providerOptions": {"script": "s.json", "nested": {"n": [1, 2.5, None, True]}},
        "requestTimeoutSeconds": 1.5, "connectTimeoutSeconds": 2,
        "inlineCompletion": {"enabled": False, "model": "small", "debounceMs": 0,
                             "maxPrefixChars": 0, "maxSuffixChars": 1, "maxTokens": 4096},
        "approval": {"mode": "message", "timeoutSeconds": 1, "default": "allow",
                     "rules": [{"tool": "run_command", "command": "^git ", "action": "allow"},
                               {"path": "**/.env", "action": "deny"}]},
        "session": {"injectionSizeLimit": None, "injectionBudgetPerTurn": 0,
                    "maxIterations": 1000},
        "linters": [{"languages": ["python"], "command": ["ruff", "check", "{file}"],
                     "timeoutSeconds": 3}],
        "features": {"disabled": ["mentions"]},
    })
    wire = custom.to_wire()
    loaded = load(no_user_config, init_options=json.loads(json.dumps(wire)))
    assert loaded.problems == []
    assert loaded.settings == custom
    assert loaded.settings.to_wire() == wire


def test_settings_do_not_alias_the_callers_dicts(no_user_config: Path) -> None:
    options: dict[str, Any] = {"providerOptions": {"list": [1]}}
    loaded = load(no_user_config, init_options=options)
    options["providerOptions"]["list"].append(2)
    assert loaded.settings.provider_options == {"list": [1]}


def test_core_settings_import_neither_pygls_nor_httpx() -> None:
    code = ("import sys, agentls.core.settings.load; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pygls', 'httpx')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_settings_load_without_pydantic(tmp_path: Path) -> None:
    """The first inline completion reads the settings; pydantic's import would
    cost it ~73 ms and ~6 MiB (bench/bench_startup.py), so the settings layer must not need it."""
    code = (
        "import sys, pathlib, agentls.core.settings.load as s\n"
        "loaded = s.load_settings(init_options={'model': 'm', 'inlineCompletion': "
        "{'debounceMs': 'x'}, 'approval': {'rules': [{'tool': 'read_*', 'action': 'allow'}]}}, "
        "environ={'AGENTLS_INLINE_COMPLETION__MAX_TOKENS': '64', 'AGENTLS_PROVIDER': 'openai', "
        f"'AGENTLS_FEATURES__DISABLED': 'a,b'}}, "
        f"user_config_file=pathlib.Path({str(tmp_path / 'c.toml')!r}))\n"
        "assert loaded.settings.inline_completion.max_tokens == 64, loaded\n"
        "assert [p.key for p in loaded.problems] == ['inlineCompletion.debounceMs'], loaded\n"
        "loaded.settings.to_wire()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pydantic', 'pydantic_core', 'pydantic_settings')))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_python_construction_validates_like_the_wire() -> None:
    """Settings built by hand are checked and converted as loaded ones are."""
    built = AgentlsSettings(approval={"rules": [{"tool": "x", "action": "ask"}],  # type: ignore[arg-type]
                                      "timeout_seconds": 7})
    assert built.approval.rules == [ApprovalRule(tool="x", action="ask")]
    assert built.approval.timeout_seconds == 7.0
    for bad in ({"base_url": "ftp://x"}, {"provider_options": {"apiKey": "k"}},
                {"request_timeout_seconds": float("inf")}, {"api_key_env": "K\n"},
                {"session": {"max_iterations": True}}):
        with pytest.raises(ValueError, match=r"[a-z]+[A-Z]?\w*"):
            AgentlsSettings(**bad)
    with pytest.raises(ValueError, match=r"^approval\.rules\[0\]\.action: "):
        AgentlsSettings.model_validate({"approval": {"rules": [{"action": "maybe"}]}})


# --------------------------------------------------------------------------- properties

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


def _garbage_for(model_wire: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Garbage values under every known key (and its nested keys)."""
    children = {
        key: (_garbage_for(value) | JSON) if isinstance(value, dict) and value else JSON
        for key, value in model_wire.items()
    }
    return st.fixed_dictionaries({}, optional=children)


GARBAGE = _garbage_for(default_settings().to_wire())


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(init=GARBAGE, workspace=GARBAGE | JSON, extra=st.dictionaries(JSON.filter(
    lambda v: isinstance(v, str)), JSON, max_size=3))
def test_garbage_never_raises_and_always_yields_valid_settings(
        init: dict[str, Any], workspace: Any, extra: dict[str, Any], no_user_config: Path
) -> None:
    loaded = load(no_user_config, init_options={**init, **extra}, workspace_config=workspace)
    wire = loaded.settings.to_wire()
    # Valid: the effective settings survive a strict re-validation and JSON.
    assert AgentlsSettings.model_validate(json.loads(json.dumps(wire))) == loaded.settings
    for problem in loaded.problems:
        assert problem.message and problem.source


ENV_NAMES = st.sampled_from([
    "AGENTLS_PROVIDER", "AGENTLS_MODEL", "AGENTLS_BASE_URL", "AGENTLS_API_KEY_ENV",
    "AGENTLS_APPROVAL", "AGENTLS_APPROVAL__MODE", "AGENTLS_APPROVAL__RULES",
    "AGENTLS_INLINE_COMPLETION__DEBOUNCE_MS", "AGENTLS_SESSION__INJECTION_SIZE_LIMIT",
    "AGENTLS_FEATURES__DISABLED", "AGENTLS_LINTERS", "AGENTLS_PROVIDER_OPTIONS",
    "AGENTLS_SESSION", "AGENTLS_X__Y", "agentls_model",
])


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(environ=st.dictionaries(ENV_NAMES, st.text(max_size=30)
                               | JSON.map(json.dumps), max_size=6))
def test_garbage_environment_never_raises(environ: dict[str, str], no_user_config: Path
                                          ) -> None:
    loaded = load(no_user_config, environ=environ)
    json.dumps(loaded.settings.to_wire())
