"""MCP client: Model Context Protocol servers' tools, prompts and resources
inside the agent (docs/mcp.md). The SDK is imported only once a server is
configured."""

from agentls.features.mcp.feature import McpFeature

__all__ = ["McpFeature"]
