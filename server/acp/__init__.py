"""`agentls acp`: the agent over the Agent Client Protocol (ACP, JSON-RPC on
stdio, protocol version 1), for Zed, the JetBrains IDEs, Emacs
(agent-shell), the Neovim agent plugins and terminal clients (acpx).

Run it as the client's agent command:

    agentls acp [--log-file PATH] [--log-level LEVEL]

stdout carries ACP only (fd 1 is pointed at stderr for everything else);
logs go to stderr, or to `--log-file`.

The public entry point is `agentls.acp.server.run(log_file=None)`, which
`agentls.cli` calls; it imports the `acp` SDK (agent-client-protocol), so
nothing here is imported by the language server. A thin translation layer
like `agentls.lsp`: the agent is assembled by `agentls.app.build_agent`
with this front's EditorChannels (workspace.py), the core's approval gate
asks through `session/request_permission` (channels.py), files are read
and written through the client's `fs/*` methods when it offers them
(files.py), and agent.py maps each ACP request onto the core.

`run_command` does not use the client's `terminal/*`: a client terminal runs
with the editor's whole environment, while run_command gives its child an
allow-list environment (features/tools/command_env.py: no API keys, tokens
or agent sockets) and reaps its process group. Commands run as in the
language server; their output streams to the client as the tool call's
content while they run (ToolContext.output).
"""
