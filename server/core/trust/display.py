"""How a trust question shows what a workspace file asks for: every value
whole, nothing that would not show as itself, and each variable of yours
that a value sends named as such.

Used by the settings loader (the `.agentls.toml` listing), the MCP
feature (`.mcp.json`), the MCP tool approval and `agentls trust`. The rule
(docs/security.md): a question never hides a byte that changes the answer.

- Characters that would not show as themselves (control characters,
  format characters such as the bidi overrides U+202E / U+2066, zero-width
  spaces, line and paragraph separators, spaces other than U+0020) are
  written as `<U+202E>`.
- Strings are JSON-quoted, so where a value starts and ends is visible; a
  command line is shell-quoted (`shlex.join`), one argument each.
- `${env:NAME}` / `${NAME}` in a server's env or header values is read
  from your environment when the server starts: the line says "sends your
  NAME". The variable's value itself is never shown.
"""

from __future__ import annotations

import json
import re
import shlex
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "env_references",
    "server_block_lines",
    "setting_lines",
    "shown_argv",
    "shown_text",
    "shown_value",
    "visible",
]

_REF = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)\}")
# Unicode categories that never show as themselves: control, format (bidi
# overrides, zero-width), surrogate, private use, unassigned, separators.
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
# Variables that change how any program starts (a loader preload, a
# runtime's options): worth a word even when their value looks harmless.
_STARTUP_VARIABLES = frozenset({
    "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "DYLD_INSERT_LIBRARIES",
    "DYLD_LIBRARY_PATH", "NODE_OPTIONS", "NODE_PATH", "PYTHONPATH", "PYTHONSTARTUP",
    "PYTHONHOME", "PERL5OPT", "PERL5LIB", "RUBYOPT", "RUBYLIB", "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS", "BASH_ENV", "ENV", "PATH", "GIT_SSH_COMMAND", "PROMPT_COMMAND",
})


_MODEL_KEYS = frozenset({"model", "inlineCompletion.model", "nextEdit.model"})


def _hides(char: str) -> bool:
    category = unicodedata.category(char)
    return category in _HIDDEN or (category == "Zs" and char != " ")


def visible(text: str) -> str:
    """`text` with every character that would not show as itself written
    as <U+XXXX>."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(f"<U+{ord(c):04X}>" if _hides(c) else c for c in text)


def shown_text(text: str) -> str:
    """A string as a quoted literal with nothing hidden."""
    return visible(json.dumps(text, ensure_ascii=False))


def shown_value(value: Any) -> str:
    """Any settings value, whole, as JSON with nothing hidden."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return visible(text)


def shown_argv(argv: Iterable[Any]) -> str:
    """A command line as a shell would read it, one quoted word per
    argument where needed, with nothing hidden."""
    return visible(shlex.join(str(arg) for arg in argv))


def env_references(value: Any) -> list[str]:
    """The variables `${env:NAME}` / `${NAME}` references in value name."""
    found: list[str] = []
    if isinstance(value, str):
        found += _REF.findall(value)
    elif isinstance(value, Mapping):
        for item in value.values():
            found += env_references(item)
    elif isinstance(value, list | tuple):
        for item in value:
            found += env_references(item)
    return list(dict.fromkeys(found))


def _sends(value: Any) -> str:
    names = env_references(value)
    return f"   <- sends your {', '.join(names)}" if names else ""


def server_block_lines(name: str, block: Any, note: str = "") -> list[str]:
    """One MCP server block (`.mcp.json` or `mcpServers`) as question lines:
    its command line or URL, folder, every env entry and header (with the
    variables of yours they send), and any other key, all whole."""
    head = f"  {visible(name)}{note}:"
    if not isinstance(block, Mapping):
        return [head, f"      {shown_value(block)}"]
    lines = [head]
    command, args = block.get("command"), block.get("args")
    if isinstance(command, str) and (args is None or isinstance(args, list)):
        lines.append(f"      runs: {shown_argv([command, *(args or [])])}")
    else:
        for key in ("command", "args"):
            if key in block:
                lines.append(f"      {key}: {shown_value(block[key])}")
    if "url" in block:
        lines.append(f"      connects to: {shown_value(block['url'])}")
    if "cwd" in block:
        lines.append(f"      in folder: {shown_value(block['cwd'])}")
    for title, key in (("env", "env"), ("header", "headers")):
        entries = block.get(key)
        if isinstance(entries, Mapping):
            for k, v in entries.items():
                startup = (" (changes how programs start)"
                           if key == "env" and str(k) in _STARTUP_VARIABLES else "")
                lines.append(f"      {title} {shown_text(str(k))} = {shown_value(v)}"
                             f"{_sends(v)}{startup}")
        elif key in block:
            lines.append(f"      {key}: {shown_value(entries)}{_sends(entries)}")
    for key, value in block.items():
        if key not in ("command", "args", "url", "cwd", "env", "headers"):
            lines.append(f"      {shown_text(str(key))}: {shown_value(value)}")
    return lines


def setting_lines(wire: str, value: Any) -> list[str]:
    """One dangerous settings key as question lines, whole."""
    if wire == "mcpServers" and isinstance(value, Mapping):
        lines = ["mcpServers: starts these MCP servers:"]
        for name, block in value.items():
            lines += server_block_lines(str(name), block)
        return lines
    if wire.startswith("mcpServers.") and wire.count(".") == 1:
        return [f"{wire}: starts this MCP server:", *server_block_lines(wire[11:], value)]
    if wire == "apiKeyEnv" and isinstance(value, str):
        return [f"apiKeyEnv = {shown_text(value)}   <- sends your {visible(value)} as the "
                "model provider's API key"]
    if wire == "runCommand.passEnv" and isinstance(value, list):
        names = ", ".join(visible(str(v)) for v in value)
        return [f"runCommand.passEnv = {shown_value(value)}   <- passes your {names} to every "
                "command the agent runs"]
    if wire == "linters" and isinstance(value, list) and value:
        lines = ["linters: runs after every edit:"]
        for linter in value:
            command = linter.get("command") if isinstance(linter, Mapping) else None
            if isinstance(command, list):
                languages = shown_value(linter.get("languages"))
                rest = {k: v for k, v in linter.items() if k not in ("command", "languages")}
                extra = f" {shown_value(rest)}" if rest else ""
                lines.append(f"  for {languages}: {shown_argv(command)}{extra}")
            else:
                lines.append(f"  {shown_value(linter)}")
        return lines
    if wire in _MODEL_KEYS and isinstance(value, str):
        if value.startswith(("hf:", "hf.co/", "huggingface.co/")):
            what = "downloads it from the Hugging Face hub (sending your HF_TOKEN when set)"
        elif value.lower().endswith(".gguf") or "/" in value or "\\" in value:
            what = "loads this file into agentls' own process"
        else:
            what = "uses this model"
        return [f"{wire} = {shown_text(value)}   <- {what}"]
    return [f"{wire} = {shown_value(value)}{_sends(value) if wire.startswith('mcp') else ''}"]
