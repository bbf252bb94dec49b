"""`agentls acp`: serve the ACP agent on stdio until the client goes."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from acp.interfaces import Agent

__all__ = ["run", "serve"]

log = logging.getLogger("agentls.acp")


def run() -> int:
    """Serve ACP on stdin/stdout (logging is set up by the caller)."""
    from agentls.acp.stdio import claim_stdout

    out_fd = claim_stdout()
    try:
        asyncio.run(serve(out_fd))
    except KeyboardInterrupt:
        return 130
    except (OSError, ValueError) as exc:  # stdin or stdout is no pipe, socket or terminal
        log.error("agentls acp needs stdin and stdout connected to the ACP client (pipes): %s",
                  exc)
        return 2
    return 0


async def serve(out_fd: int) -> None:
    from acp.agent.connection import AgentSideConnection

    from agentls.acp.agent import AgentlsAcpAgent
    from agentls.acp.stdio import GuardedTransport, open_streams

    reader, writer = await open_streams(out_fd)
    transport = GuardedTransport(reader, writer)
    agent = AgentlsAcpAgent(transport)
    # The SDK routes the methods the agent has; the ones it lacks (modes,
    # fork, the unstable ones) answer "method not found".
    # Unstable routes on: session/resume and session/close (the only
    # unstable methods the agent has).
    conn = AgentSideConnection(cast("Agent", agent), transport, listening=False,
                               use_unstable_protocol=True)
    try:
        await conn.listen()
    except Exception:
        log.exception("The ACP connection failed")
    finally:
        log.info("The ACP client is gone; shutting down")
        try:
            await agent.shutdown()
        finally:
            await conn.close()
