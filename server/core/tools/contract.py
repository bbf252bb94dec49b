"""What a tool receives and what it declares (the typed tool contract).

- `ToolNeed`: what a tool call will do, declared by the tool before it runs
  (`tool_need`; `prepare_call` adds what the user is shown). The turn hands
  it to the approval policy and the gate (core/approval/gate.py): the one place
  that decides whether the call runs, needs the user, or is refused. A tool
  that declares nothing gets `default_need` (kind "call": asks, paths found
  in its arguments confined to the workspace).
- `ToolContext`: what a running tool may use, frozen (workspace folders,
  session id, document lookups, the edit applier, a progress callback).
  No orchestrator object and no approval verdict: a tool cannot read or
  change what was decided about it.
- `ToolRefused`: a tool's typed failure (message for the model, code).
- `TypedTool` and its parts (`DeclaresNeed`, `RunsTool`, `PreparesCall`,
  `DynamicTools`): what an agentls tool plugin implements besides
  agent_core's schema methods; the executor asks for each part on its own.

Third-party tools with agent_core's signature (`execute_tool_async(...,
context=dict)`) get `ToolContext.as_seed_context()`: the one adapter.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from agentls.core.editor.edits import DocumentLookup, EditApplier

__all__ = [
    "PATH_KEYS",
    "DeclaresNeed",
    "DynamicTools",
    "NeedKind",
    "PreparesCall",
    "PreparingTool",
    "RunsTool",
    "ToolContext",
    "ToolNeed",
    "ToolRefused",
    "TypedTool",
    "default_need",
    "failure_result",
    "path_arguments",
]

# "none": nothing to approve (paths are still confined); "read": reads files
# (secret files ask every time); "edit": changes files (protected files ask
# every time); "run": runs a command (asks unless a rule allows the exact
# command line); "call": anything else, e.g. an MCP server's tool (asks).
NeedKind = Literal["none", "read", "edit", "run", "call"]

# Argument names read as paths for a tool that declares nothing itself.
PATH_KEYS = ("path", "new_path", "old_path", "file_path", "cwd", "directory")
PATH_LIST_KEYS = ("paths",)


@dataclass(frozen=True)
class ToolNeed:
    """What one tool call will do, as the tool declares it."""

    kind: NeedKind = "call"
    # Every path the call touches, as given (relative to the first workspace
    # folder, or absolute); the policy resolves and confines them.
    paths: tuple[str, ...] = ()
    command: str | None = None  # "run": the exact command line (shlex.join(argv))
    cwd: str = "."  # "run": the working folder, as given
    timeout: float | None = None  # "run": the command's own time limit, shown
    remember: bool = False  # "Allow for session" may answer the question
    by_user: bool = False  # the user asked for it (a checkpoint restore)
    title: str = ""  # "edit": one line naming the change ("agentls: edit_file a.py")
    preview: str = ""  # "edit": the whole diff the user approves
    question: str = ""  # the tool's own words for the question (an MCP call), whole
    # Its short form (a few lines naming the tool), for when `question` is
    # too long for a message and is sent as a document (core/approval/gate.py).
    summary: str = ""
    # What prepare_call computed (the edit); execute gets this very need
    # back in ToolContext.need, so the change approved is the change applied.
    prepared: object = None


class ToolRefused(Exception):
    """A tool call that cannot run: `message` tells the model what to change."""

    def __init__(self, message: str, code: str = "invalid_arguments") -> None:
        super().__init__(message)
        self.message = message
        self.code = code

    def result(self) -> dict[str, Any]:
        return failure_result(self.message, self.code)


def failure_result(message: str, code: str) -> dict[str, Any]:
    """The result dict of a failed tool call."""
    return {"success": False, "error": {"message": message, "code": code}}


Progress = Callable[[str], Awaitable[None]]


@dataclass(frozen=True)
class ToolContext:
    """What a running tool may use (built by the turn for each call)."""

    session_id: str = ""
    workspace_folders: tuple[str, ...] = ()
    # path -> the open buffer's text (None: not open); the tools read open
    # buffers before the disk.
    documents: Callable[[Any], str | None] | None = None
    snapshots: DocumentLookup | None = None  # versioned, for edits
    editor: EditApplier | None = None  # applies WorkspaceEdits in the editor
    progress: Progress | None = None  # a long call reports how far it got
    # A running tool's output as it arrives (a command's stdout and stderr),
    # for the front to show live; None: nobody watches.
    output: Progress | None = None
    trigger_source: str = "core"
    need: ToolNeed | None = None  # what the call was cleared for
    # Caller-supplied keys (run_turn's context), passed to agent_core-style tools as is.
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], **fields: Any) -> ToolContext:
        """From the composition's tool context keys (workspace_folders,
        documents, snapshots, editor) and `fields`; other keys go to extra,
        never the reserved ones."""
        known = {"workspace_folders", "documents", "snapshots", "editor"}
        documents = values.get("documents")
        snapshots = values.get("snapshots")
        base: dict[str, Any] = {
            "workspace_folders": tuple(str(f) for f in values.get("workspace_folders") or ()),
            "documents": documents if callable(documents) else None,
            "snapshots": snapshots if callable(snapshots) else None,
            "editor": values.get("editor"),
        }
        extra = {k: v for k, v in values.items() if k not in known and k not in _RESERVED}
        return cls(**{**base, "extra": extra, **fields})

    def as_seed_context(self) -> dict[str, Any]:
        """agent_core's context dict for third-party tools (no `core`, no
        approval: those were decided before the call)."""
        return {
            **self.extra,
            "session_id": self.session_id,
            "workspace_folders": list(self.workspace_folders),
            "documents": self.documents,
            "snapshots": self.snapshots,
            "editor": self.editor,
            "progress": self.progress,
            "trigger_source": self.trigger_source,
        }


# Keys a caller's context can never set (they were how approval and the
# orchestrator reached tools before the typed context).
_RESERVED = frozenset({"core", "approval", "session_id", "progress", "trigger_source", "need"})


def default_need(arguments: Mapping[str, Any]) -> ToolNeed:
    """The need of a tool that declares none: a call to ask about, with
    every path-like argument confined. ToolRefused for a path argument that
    is not a string."""
    return ToolNeed("call", path_arguments(arguments))


def path_arguments(arguments: Mapping[str, Any], keys: Sequence[str] = PATH_KEYS,
                   list_keys: Sequence[str] = PATH_LIST_KEYS) -> tuple[str, ...]:
    """The paths among `arguments` (`keys` hold one, `list_keys` a list), to
    confine. ToolRefused for one that is not a string."""
    paths: list[str] = []
    for key in keys:
        value = arguments.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise ToolRefused(f"The argument {key!r} must be a string path, not "
                              f"{type(value).__name__}.")
        paths.append(value)
    for key in list_keys:
        values = arguments.get(key)
        if values is None:
            continue
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise ToolRefused(f"The argument {key!r} must be a list of string paths.")
        paths.extend(values)
    return tuple(paths)


# -- what a tool plugin implements ---------------------------------------------

@runtime_checkable
class DeclaresNeed(Protocol):
    def tool_need(self, tool_name: str, arguments: Mapping[str, Any],
                  state: dict[str, Any]) -> ToolNeed:
        """What the call will do (kind, paths, command); cheap, from the
        arguments only. ToolRefused for arguments it cannot run with."""
        ...


@runtime_checkable
class RunsTool(Protocol):
    async def run_tool(self, tool_name: str, arguments: dict[str, Any], state: dict[str, Any],
                       context: ToolContext) -> dict[str, Any]:
        """Run the call the gate cleared; agent_core's result dict."""
        ...


@runtime_checkable
class PreparesCall(Protocol):
    async def prepare_call(self, tool_name: str, arguments: dict[str, Any],
                           state: dict[str, Any], context: ToolContext,
                           need: ToolNeed) -> ToolNeed:
        """`need` with what the user is shown (title, preview) and what
        run_tool will apply (prepared). ToolRefused when it cannot be done."""
        ...


@runtime_checkable
class DynamicTools(Protocol):
    def tools_version(self, state: dict[str, Any]) -> int:
        """A number that changes whenever the plugin's tools do."""
        ...


class TypedTool(DeclaresNeed, RunsTool, Protocol):
    """What an agentls tool plugin implements besides agent_core's schema
    methods (`get_tool_schemas`, `format_tool_result`, ...). The executor
    asks for each part on its own (offers(plugin, DeclaresNeed), ...): a
    plugin without tool_need gets the default need, one without run_tool
    runs through the agent_core adapter."""


class PreparingTool(TypedTool, PreparesCall, Protocol):
    """A TypedTool that works out what it will do before it is asked about
    (the file tools: the edit and its diff)."""
