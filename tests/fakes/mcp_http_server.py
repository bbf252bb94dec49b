"""A streamable-HTTP MCP server written with the SDK's MCPServer (FastMCP
in SDK 1.x), for the tests: a tool, a prompt and a resource.

    python mcp_http_server.py PORT
"""

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("notes")


@server.tool(description="Add two integers")
def add(a: int, b: int) -> int:
    return a + b


@server.prompt(description="Review a file carefully")
def review(path: str) -> str:
    return f"Please review {path} for bugs and style problems."


@server.resource("notes://today", name="today", description="Today's notes")
def today() -> str:
    return "Buy milk. Ship the MCP client."


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
