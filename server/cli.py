"""Command line: `agentls` (serve LSP on stdio), `--socket [PATH]` (a Unix
socket only this user can reach), `--tcp` (with a token), `--version`,
`agentls check`, `agentls trust` (trust the workspace's .agentls.toml),
`agentls eval` (inline completion quality on real code; agentls/eval).

Imports are lazy: editors spawn this process on every start, and pygls
alone costs a few hundred milliseconds to import.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from agentls import __version__

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentls",
        description="agentls: a language server that hosts an AI agent core inside the editor. "
        "With no command it serves LSP on stdio.",
        epilog="Commands: `agentls` or `agentls serve` runs the server; `agentls check` validates "
        "the configuration and probes the provider; `agentls trust` shows the workspace's "
        ".agentls.toml keys that wait for trust and trusts that content after you confirm; "
        "`agentls pull MODEL` downloads a local model (hf:<owner>/<repo>[:<quant>]) with a "
        "progress bar; `agentls eval --help` measures inline completions on real code.",
    )
    parser.add_argument("command", nargs="?", choices=["serve", "check", "trust", "pull", "acp"],
                        default="serve", help="serve (default), check, trust, pull or acp (the "
                        "agent over the Agent Client Protocol on stdio, for Zed, JetBrains, "
                        "Emacs and the Neovim agent plugins)")
    parser.add_argument("models", nargs="*", metavar="MODEL",
                        help="`pull`: models to download: hf:<owner>/<repo>[:<quant or file>] "
                        "(also a packaged model id or a .gguf path, which need no download)")
    parser.add_argument("--recommended", action="store_true",
                        help="`pull`: download the recommended chat and completion models "
                        "for this machine's memory (docs/local-model.md)")
    parser.add_argument("--yes", action="store_true",
                        help="`trust`: do not ask for confirmation")
    parser.add_argument("--version", action="version", version=f"agentls {__version__}")
    transport = parser.add_mutually_exclusive_group()
    transport.add_argument("--stdio", action="store_true",
                           help="serve LSP on stdin/stdout (the default)")
    transport.add_argument("--socket", nargs="?", const="", default=None, metavar="PATH",
                           help="serve LSP on a Unix socket only you can reach (mode 0600 in a "
                           "0700 folder); default PATH: $XDG_RUNTIME_DIR/agentls/agentls.sock. "
                           "One client at a time; a client leaving does not stop the server")
    transport.add_argument("--tcp", action="store_true",
                           help="serve LSP on TCP; the client must send the token in "
                           "initializationOptions.agentlsToken (from $AGENTLS_TOKEN, or a new "
                           "one written to the token file, mode 0600; see docs/security.md)")
    parser.add_argument("--copilot", action="store_true",
                        help="speak the Copilot language server's dialect to every client, for "
                        "a Copilot plugin that sends no editorPluginInfo "
                        "(docs/copilot-plugins.md)")
    parser.add_argument("--host", default="127.0.0.1", help="TCP host (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=2087,
                        help="TCP port (default 2087; 0 picks a free one, printed on stderr)")
    parser.add_argument("--token-file", type=Path, default=None,
                        help="`--tcp`: where to write the token (default: "
                        "$XDG_RUNTIME_DIR/agentls/tcp-PORT.token)")
    parser.add_argument("--log-file", type=Path, help="write the server log to this file")
    parser.add_argument("--log-level", default="INFO",
                        choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="log level")
    parser.add_argument("--workspace", type=Path, default=None,
                        help="workspace folder for `check` and `trust` (default: the current "
                        "directory)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["eval"]:  # its own options: see agentls/eval/cli.py
        from agentls.eval.cli import main as run_eval

        return run_eval(arguments[1:])
    args = build_parser().parse_args(arguments)
    if args.command == "check":
        _configure_logging(args.log_file, "WARNING")
        return run_check(args.workspace or Path.cwd())
    if args.command == "pull":
        _configure_logging(args.log_file, "WARNING")
        return run_pull(args.models, recommended=args.recommended)
    if args.models:
        build_parser().error(f"unexpected arguments: {' '.join(args.models)}")
    if args.command == "trust":
        _configure_logging(args.log_file, "WARNING")
        return run_trust(args.workspace or Path.cwd(), assume_yes=args.yes)
    if args.command == "acp":  # stdout is ACP's: logs go to stderr or --log-file
        _configure_logging(args.log_file, args.log_level)
        from agentls.acp.server import run as run_acp

        return run_acp()
    _configure_logging(args.log_file, args.log_level)
    return serve(tcp=args.tcp, host=args.host, port=args.port, socket_path=args.socket,
                 token_file=args.token_file, copilot=args.copilot)


def _configure_logging(log_file: Path | None, level: str) -> None:
    # Never log to stdout: in stdio mode it is the LSP channel.
    from agentls.core.support.log_redaction import REDACTOR, register_environment

    handler: logging.Handler | None = None
    if log_file is not None:
        handler = _private_log_handler(log_file)
    if handler is None:
        handler = logging.StreamHandler(sys.stderr)
        level = "WARNING" if level in ("DEBUG", "INFO") else level
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    # Secrets never reach the log, whichever library writes the record.
    register_environment()
    handler.addFilter(REDACTOR)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # pygls logs every message body it sends at INFO ("Sending data: ..."),
    # file text and tool results included: only its warnings are kept.
    logging.getLogger("pygls").setLevel("WARNING")


def _private_log_handler(log_file: Path) -> logging.Handler | None:
    """The log holds file names, prompts and errors: its file is created
    0600 (an existing one readable by others is tightened, and stderr says
    so). None, with the reason on stderr, when the file is not the user's own
    regular file (a link or another user's file in a shared folder)."""
    from agentls.core.support.state_dir import open_private_log

    try:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        stream, tightened = open_private_log(log_file)
    except OSError as exc:
        print(f"agentls: not logging to {log_file}: {exc}; logging warnings to stderr "
              "instead", file=sys.stderr)
        return None
    if tightened:
        print(f"agentls: the log file {log_file} was readable by other users; it is now "
              "0600", file=sys.stderr)
    return logging.StreamHandler(stream)


def serve(*, tcp: bool = False, host: str = "127.0.0.1", port: int = 2087,
          socket_path: str | None = None, token_file: Path | None = None,
          copilot: bool = False) -> int:
    """Serve LSP: on stdio, on a Unix socket (`socket_path`, "" for the
    default path) or on TCP with a token (agentls.lsp.wire.transport)."""
    token: str | None = None
    if tcp or socket_path is not None:
        from agentls.lsp.wire import transport as lsp_transport

        try:
            if socket_path is not None:
                where = (Path(socket_path).expanduser() if socket_path
                         else lsp_transport.default_socket_path())
                where = lsp_transport.prepare_socket_path(where, chosen=bool(socket_path))
            else:
                token = lsp_transport.load_token()
                if token is None:
                    lsp_transport.check_token_folder(token_file)
        except (ValueError, OSError) as exc:
            print(f"agentls: {exc}", file=sys.stderr)
            return 2

    # Everything alive after an import or set-up step (pygls, lsprotocol's
    # ~560 classes, our modules, the server) lives as long as the process.
    # gc.freeze() moves it out of the collector's sight, so a later full
    # collection does not walk it again: one pass over lsprotocol costs
    # 17-35 ms, and one fell in create_server and one before the first
    # completion (bench/bench_startup.py).
    gc.freeze()

    # httpx's package __init__ imports its command-line client (httpx._main:
    # click, pygments) whenever those happen to be installed, as they are next
    # to llama-cpp-python's server; the language server never runs it. Marking
    # it absent makes that import fail at once, as on a machine without them:
    # -14 ms and -2.3 MiB at the first completion (bench/bench_startup.py).
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

    # The handler modules are imported here, after the freeze: before it, their
    # allocations would set off a full collection over lsprotocol (~17 ms).
    from agentls.lsp.handlers import create_server

    server = create_server()
    server.copilot_forced = copilot
    gc.freeze()
    try:
        if socket_path is not None:
            server.start_socket(where, chosen=bool(socket_path))
        elif tcp:
            server.start_tcp(host, port, token=token, token_file=token_file)
        else:
            server.start_io()
    except OSError as exc:  # the address is taken, the folder is not ours, ...
        if not (tcp or socket_path is not None):
            raise
        print(f"agentls: cannot serve: {exc}", file=sys.stderr)
        return 1
    return 0


def run_check(workspace: Path) -> int:
    """Print the effective configuration, its problems, and whether the
    provider answers. Exit status 1 when anything needs fixing."""
    from agentls.app import build_agent, probe_provider
    from agentls.core.plugins.registry import PluginRegistry
    from agentls.core.settings.load import load_settings
    from agentls.core.types.errors import AgentlsError

    out = sys.stdout
    registry = PluginRegistry.discover()
    loaded = load_settings(workspace_root=workspace, provider_names=registry.names("provider"))
    settings = loaded.settings
    failed = False
    print(f"agentls {__version__}", file=out)
    print(f"workspace: {workspace}", file=out)
    print("configuration:", file=out)
    for key in ("provider", "model", "baseUrl", "apiKeyEnv"):
        value = settings.to_wire().get(key)
        source = loaded.sources.get(key, "default")
        print(f"  {key} = {value!r}  ({source})", file=out)
    trust = loaded.workspace_trust
    if trust is not None and trust.pending:
        why = ("you chose not to trust it" if trust.state == "refused"
               else "it is not trusted yet")
        print(f"workspace trust: {trust.file} sets {', '.join(trust.pending)}; they are "
              f"ignored because {why}. Review the file, then run `agentls trust` (or answer "
              "Trust in the editor).", file=out)
    elif trust is not None and trust.state == "trusted":
        print(f"workspace trust: {trust.file} is trusted (this content)", file=out)
    if loaded.problems:
        failed = True
        print("problems:", file=out)
        for problem in loaded.problems:
            print(f"  - {problem.message}", file=out)
    key_env = settings.api_key_env_name()
    if key_env:
        present = settings.api_key() is not None
        print(f"api key: {key_env} is {'set' if present else 'NOT set'}", file=out)
    print(f"provider: {settings.provider}", file=out)
    if settings.provider == "local":
        _print_local_downloads(settings, out)
    try:
        # The agent as the editor would get it (without the editor's channels).
        agent = build_agent(settings, registry, workspace_folders=[workspace])
    except AgentlsError as exc:
        print(f"  error: {exc}", file=out)
        _check_mcp(settings, workspace, out)
        return 1
    provider = agent.provider
    report = asyncio.run(probe_provider(provider))
    if report.ok:
        names = ", ".join(m.id for m in report.models[:8]) or "(the provider lists no models)"
        print(f"  ok: {report.info.display_name if report.info else settings.provider} "
              f"answered; models: {names}", file=out)
        if settings.provider == "local":
            _print_local_tool_calling(getattr(provider, "default_model", None), report.models, out)
            _print_local_processes(report.status, out)
        _print_fim_plan(provider, settings.inline_completion.model or settings.model, out)
    else:
        failed = True
        print(f"  error [{report.error_code}]: {report.error}", file=out)
    tool_names = [d.tool_name for d in agent.tools.descriptors]
    hidden = agent.reply_editor.hidden_tools() if agent.reply_editor is not None else frozenset()
    offered = [name for name in tool_names if name not in hidden]
    print(f"agent tools: {', '.join(offered) or '(none)'}", file=out)
    if hidden & set(tool_names):
        kept = ", ".join(name for name in tool_names if name in hidden)
        print(f"  file changes: written whole in the model's reply (session.editFormat "
              f"file-blocks); {kept} run for them, not offered to the model", file=out)
    if _check_mcp(settings, workspace, out):
        failed = True
    print("result: " + ("FAILED, fix the items above" if failed else "OK"), file=out)
    return 1 if failed else 0


def _print_local_downloads(settings: Any, out: Any) -> None:
    """Whether the `hf:` models the settings name are downloaded yet."""
    names = [n for n in (settings.model, settings.inline_completion.model) if n]
    try:
        from agentls.providers.local.models import hub
    except ImportError:
        return
    for name in names:
        if not hub.is_hf_reference(name):
            continue
        try:
            path = hub.cached_path(hub.parse_hf_reference(name))
        except Exception as exc:  # a malformed reference: say so, do not stop the check
            print(f"  model {name}: {exc}", file=out)
            continue
        if path is not None:
            print(f"  model {name}: downloaded ({path})", file=out)
        else:
            print(f"  model {name}: not downloaded yet; run `agentls pull {name}` (or the "
                  "editor downloads it, with progress, when it starts)", file=out)


def _print_local_tool_calling(chat_model: str | None, models: list[Any], out: Any) -> None:
    """Whether the chat model calls tools natively (docs/local-model.md)."""
    entry = next((m for m in models if m.id == chat_model), None)
    tool_format = entry.defaults.get("tool_format") if entry is not None else None
    if tool_format == "grammar":
        print(f"  tools: {chat_model} has no native tool calling; its tool calls go through a "
              "JSON grammar (one per reply, often misjudged by a small model). For a local "
              "agent that edits code: `agentls pull --recommended`", file=out)
    elif tool_format:
        print(f"  tools: {chat_model} calls tools natively ({tool_format} format)", file=out)


def _print_local_processes(status: Mapping[str, Any], out: Any) -> None:
    """Each running model child: its memory, and whether the user's other
    agentls share it through the model host (docs/local-model.md)."""
    for entry in status.get("localModels", ()):
        if not entry.get("running"):
            continue
        rss = entry.get("rssBytes")
        memory = f", RSS {rss / (1 << 20):.0f} MiB" if rss else ""
        if entry.get("shared"):
            how = (f"shared through the model host by {entry.get('clients')} agentls "
                   "(this check included)")
        elif entry.get("sharedError"):
            how = f"this process's own (not shared: {entry['sharedError']})"
        else:
            how = "this process's own (local.shared is false)"
        print(f"  model process: {entry['model']} (pid {entry['pid']}{memory}): {how}", file=out)
        if entry.get("engineCounters"):
            _print_engine_recent(str(entry["engineCounters"]), out)
    shown = {entry.get("pid") for entry in status.get("localModels", ())}
    try:
        from agentls.providers.local.shared.link import running_children, socket_path

        others = [c for c in asyncio.run(running_children(socket_path())) if c["pid"] not in shown]
    except Exception as exc:  # the check goes on: this is about the editors' models
        print(f"  model host: could not list its models ({exc})", file=out)
        return
    for child in others:  # loaded by the user's editors, not by this check
        print(f"  model process: {child['alias']} (pid {child['pid']}): shared through the "
              f"model host by {child['clients']} agentls", file=out)
        _print_engine_recent(f"http://127.0.0.1:{child['port']}/agentls/engine", out)


def _print_engine_recent(url: str, out: Any) -> None:
    """What the model's engine did for its newest requests (its own counters,
    providers/local/engine_work.py): with the model host, the user's editors'."""
    import json
    import statistics
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=3) as answer:
            records = json.load(answer).get("requests", [])
    except (OSError, ValueError) as exc:
        print(f"    engine counters: not readable ({exc})", file=out)
        return
    recent = records[-50:]
    # Background requests: next edits and the warm-ups at a resting cursor.
    answered = [r for r in recent if r.get("generated") and r.get("ms") is not None
                and not r.get("background")]
    superseded = sum(1 for r in recent if r.get("outcome") == "skipped")
    background = [r for r in recent if r.get("background")]
    if background:
        preempted = sum(r.get("outcome") == "preempted" for r in background)
        print(f"    background requests (next edits, warm-ups at a resting cursor): "
              f"{len(background)}, {preempted} preempted by a completion", file=out)
    if not answered:
        print("    recent requests: none answered yet", file=out)
        return
    wall = statistics.median(r["ms"] for r in answered)
    evaluated = statistics.median(r.get("prompt_evaluated", 0) for r in answered)
    kept = statistics.median(r.get("prompt_kept", 0) for r in answered)
    print(f"    recent requests: {len(answered)} answered, p50 {wall:.0f} ms in the engine, "
          f"prompt tokens evaluated p50 {evaluated:.0f} (kept from the cache p50 {kept:.0f}); "
          f"{superseded} superseded before they started", file=out)


def _print_fim_plan(provider: Any, model: str | None, out: Any) -> None:
    """Which prompt form inline completion sends the model, and why (a
    provider that finds it out: fim_probe.py; the embedded model: its GGUF)."""
    plan_of = getattr(provider, "fim_plan", None)
    if not callable(plan_of):
        return

    async def ask() -> Any:
        try:
            return await asyncio.wait_for(plan_of(model), 90)
        finally:
            closing = provider.aclose()
            if asyncio.iscoroutine(closing):
                await closing

    try:
        plan = asyncio.run(ask())
    except Exception as exc:  # the check goes on: the provider answered above
        print(f"  inline completion: could not find out the FIM prompt form ({exc})", file=out)
        return
    family = f" ({plan.family})" if plan.family else ""
    print(f"  inline completion prompts: {plan.form}{family}: {plan.why}", file=out)


def run_pull(models: list[str], *, recommended: bool) -> int:
    """Download local models on the terminal (providers/local/models/pull.py)."""
    try:
        from agentls.providers.local.models.pull import run_pull as pull
    except ImportError as exc:
        print(f"agentls pull needs the local model support: {exc}", file=sys.stderr)
        return 1
    return pull(models, recommended=recommended)


def _check_mcp(settings: Any, workspace: Path, out: TextIO) -> bool:
    """Start each MCP server once and print its tools or its error; True
    when one failed."""
    from agentls.core.trust.workspace import TrustStore
    from agentls.features.mcp.check import check_servers

    reports = asyncio.run(check_servers(settings, workspace, TrustStore.default()))
    if not reports:
        return False
    print("mcp servers:", file=out)
    failed = False
    for report in reports:
        where = " (.mcp.json)" if report.origin == "workspace" else ""
        if report.state == "ready":
            tools = ", ".join(report.tools) or "(no tools)"
            print(f"  {report.name}{where}: ok, {len(report.tools)} tools: {tools}", file=out)
            continue
        failed = failed or report.state == "failed"
        label = "error" if report.state == "failed" else "skipped"
        print(f"  {report.name}{where}: {label}: {report.target}", file=out)
        for line in (report.error or "").splitlines():
            print(f"      {line}", file=out)
    return failed


def run_trust(workspace: Path, *, assume_yes: bool = False) -> int:
    """Show what the workspace file would set and record trust for this
    content after the user confirms (or with --yes). Exit 1 when nothing
    was trusted."""
    from agentls.core.settings.load import load_settings
    from agentls.core.trust.workspace import TrustStore

    store = TrustStore.default()
    trust = load_settings(workspace_root=workspace, trust_store=store).workspace_trust
    if trust is None:
        print(f"{workspace} has no .agentls.toml; nothing to trust.")
        return 1
    if trust.state == "none":
        print(f"{trust.file} sets no key that needs trust; nothing to do.")
        return 0
    if trust.link_target is not None:
        print(f"Note: {trust.file} is a symbolic link to {trust.link_target}"
              + (", outside this workspace." if trust.outside else "."))
    print(f"{trust.file} sets keys that can send your data, run commands or load models:")
    for line in trust.lines:
        print(f"    {line}")
    if trust.state == "trusted":
        print("This content is already trusted.")
        return 0
    if not assume_yes:
        if not sys.stdin.isatty():
            print("Not a terminal: run `agentls trust --yes` to trust it without asking.")
            return 1
        answer = input("Trust this content of the file? [y/N] ").strip().lower()
        if answer not in ("y", "yes"):
            print("Not trusted.")
            return 1
    store.record(trust.file, trust.digest, "trusted")
    print(f"Trusted (sha256 {trust.digest[:12]}...). A changed file asks again.")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
