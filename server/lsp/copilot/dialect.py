"""Which clients speak the Copilot dialect, and its account, version and
model methods (docs/copilot-plugins.md).

A client is a Copilot plugin when its initializationOptions carry
`editorPluginInfo` (copilot.lua, copilot.vim and copilot.el send it), or
when agentls was started with `--copilot` (LSP-copilot, which sends none).
Only then are the dialect's methods answered; any other client gets -32601
for them, as before. The user is always a local one,
signed in: no plugin asks anyone to sign in, and nothing is sent to GitHub.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from pygls.exceptions import JsonRpcInvalidParams, JsonRpcMethodNotFound

from agentls import __version__
from agentls.lsp.wire.convert import params_object, to_plain

if TYPE_CHECKING:
    from lsprotocol import types

    from agentls.lsp.server import AgentlsLanguageServer

log = logging.getLogger("agentls.lsp.copilot.dialect")

# initializationOptions keys the Copilot plugins send about themselves
# (docs/copilot-plugins.md): never agentls settings, so never reported as unknown.
CLIENT_OWN_KEYS = frozenset({"editorInfo", "editorPluginInfo", "copilotIntegrationId",
                             "networkProxy"})
PLUGIN_INFO = "editorPluginInfo"


def own_keys_removed(options: Mapping[str, Any]) -> dict[str, Any]:
    """initializationOptions without the keys a client sends about itself."""
    return {key: value for key, value in options.items() if key not in CLIENT_OWN_KEYS}


def prepare(ls: AgentlsLanguageServer, params: types.InitializeParams) -> None:
    """At initialize: does this client speak the dialect?"""
    options = to_plain(params.initialization_options)
    plugin = options.get(PLUGIN_INFO) if isinstance(options, Mapping) else None
    ls.copilot_plugin = _plugin_name(plugin)
    ls.copilot_dialect = ls.copilot_forced or isinstance(plugin, Mapping)
    if ls.copilot_dialect:
        log.info("Copilot dialect on for %s", ls.copilot_plugin or "a client (--copilot)")


def _plugin_name(plugin: Any) -> str | None:
    if not isinstance(plugin, Mapping):
        return None
    name, version = plugin.get("name"), plugin.get("version")
    if not isinstance(name, str):
        return None
    return f"{name} {version}" if isinstance(version, str) else name


def require(ls: AgentlsLanguageServer, method: str) -> None:
    """-32601 for a client that does not speak the dialect: what it got
    before the dialect existed."""
    if not ls.copilot_dialect:
        raise JsonRpcMethodNotFound(
            f"Unknown method {method!r}: it belongs to the Copilot dialect, which agentls "
            "speaks to clients whose initializationOptions carry editorPluginInfo, or when "
            "started with --copilot."
        )


def completion_model(ls: AgentlsLanguageServer) -> str:
    """The model inline completion uses, as the user would name it."""
    settings = ls.state.host.settings
    named = settings.inline_completion.model or settings.model
    if named:
        return named
    from agentls.core.types.errors import AgentlsError

    try:
        provider = ls.state.host.provider()
    except AgentlsError:  # no provider can be built: announce() says why
        return "default model"
    for attribute in ("default_completion_model", "default_model"):
        value = getattr(provider, attribute, None)
        if isinstance(value, str) and value:
            return value
    return "default model"


def local_user(ls: AgentlsLanguageServer) -> str:
    """The signed-in user every account method reports: agentls itself,
    naming the provider and the completion model."""
    return f"agentls ({ls.state.host.settings.provider}: {completion_model(ls)})"


# statusNotification's status -> didChangeStatus's kind (the newer servers' name).
_KINDS = {"Normal": "Normal", "InProgress": "Normal", "Warning": "Warning", "Error": "Error"}


def tell_status(ls: AgentlsLanguageServer, status: str, message: str = "") -> None:
    """agentls's state (loading, downloading, a backend error, working
    again) as the Copilot plugins show it: `statusNotification`
    ({status, message}) and `didChangeStatus` ({kind, message, busy}), to
    dialect clients only; a repeat is not sent."""
    if not ls.copilot_dialect:
        return
    message = message or "agentls: ready"
    if ls.copilot_status == (status, message):
        return
    ls.copilot_status = (status, message)
    ls.protocol.notify("statusNotification", {"status": status, "message": message})
    changed = {"kind": _KINDS.get(status, "Normal"), "message": message,
               "busy": status == "InProgress"}
    ls.last_status = changed  # lsp/status.py's turn statuses compare with it
    ls.protocol.notify("didChangeStatus", changed)


def announce(ls: AgentlsLanguageServer) -> None:
    """Once the settings are read: ready, naming the model, or the reason
    there is no provider."""
    if not ls.copilot_dialect:
        return
    from agentls.core.types.errors import AgentlsError

    try:
        ls.state.host.provider()
    except AgentlsError as exc:
        tell_status(ls, "Error", f"agentls: {exc}")
        return
    tell_status(ls, "Normal", f"agentls: ready ({local_user(ls)})")


_SIGN_IN = {"checkStatus": "OK", "signInInitiate": "AlreadySignedIn", "signInConfirm": "OK",
            "signIn": "AlreadySignedIn", "signOut": "OK"}


def _signed_in(method: str, status: str) -> Callable[..., Awaitable[dict[str, Any]]]:
    async def answer(ls: AgentlsLanguageServer, params: Any = None) -> dict[str, Any]:
        require(ls, method)
        _options(params, method)
        await ls.wait_settings()
        return {"status": status, "user": local_user(ls)}

    return answer


def register(server: AgentlsLanguageServer) -> None:
    # Sign-in as a local user who is signed in: nothing to sign in to or out
    # of (no account, no token), so every plugin goes straight to work.
    for method, status in _SIGN_IN.items():
        server.feature(method)(_signed_in(method, status))

    @server.feature("getVersion")
    def get_version(ls: AgentlsLanguageServer, params: Any = None) -> dict[str, Any]:
        require(ls, "getVersion")
        _options(params, "getVersion")
        return {"version": __version__, "buildType": "agentls", "runtimeVersion": "agentls"}

    @server.feature("copilot/models")
    async def models(ls: AgentlsLanguageServer, params: Any = None) -> list[dict[str, Any]]:
        require(ls, "copilot/models")
        _options(params, "copilot/models")
        await ls.wait_settings()
        return configured_models(ls)

    @server.feature("checkFileStatus")
    def check_file_status(ls: AgentlsLanguageServer, params: Any = None) -> dict[str, Any]:
        require(ls, "checkFileStatus")
        uri = _options(params, "checkFileStatus").get("uri")
        if not isinstance(uri, str) or not uri:
            raise JsonRpcInvalidParams("checkFileStatus needs `uri`, the file's URI (a string).")
        # No content exclusions here: agentls's secret-file rule applies to what is sent.
        return {"status": "Included"}

    @server.feature("setEditorInfo")
    def set_editor_info(ls: AgentlsLanguageServer, params: Any = None) -> str:
        require(ls, "setEditorInfo")
        _options(params, "setEditorInfo")
        return "OK"  # older plugins say who they are here; nothing in it is a setting

    @server.feature("notifyChangeConfiguration")
    def notify_change_configuration(ls: AgentlsLanguageServer, params: Any = None) -> None:
        # Older plugins' didChangeConfiguration for the Copilot server's own
        # settings (telemetry, proxy, ...): none of them is agentls's.
        log.debug("Copilot plugin settings ignored: %s", to_plain(params))


def configured_models(ls: AgentlsLanguageServer) -> list[dict[str, Any]]:
    """copilot/models: the models agentls is configured to use, the
    completion model first (a Copilot plugin's model choice is not taken:
    agentls's settings decide)."""
    settings = ls.state.host.settings
    models: dict[str, dict[str, Any]] = {}

    def add(model: str | None, scopes: list[str], *, default: bool = False) -> None:
        if not model:
            return
        entry = models.setdefault(model, {"id": model, "modelName": model, "scopes": [],
                                          "preview": False, "default": default,
                                          "provider": settings.provider})
        entry["scopes"] += [scope for scope in scopes if scope not in entry["scopes"]]

    add(completion_model(ls), ["completion"], default=True)
    add(settings.model, ["chat-panel", "edit-panel", "agent-panel"])
    return list(models.values())


def _options(params: Any, method: str) -> dict[str, Any]:
    """The params as an object; -32602 naming the method otherwise."""
    try:
        return params_object(params)
    except JsonRpcInvalidParams:
        raise JsonRpcInvalidParams(f"{method}: params must be an object (or omitted).") from None
