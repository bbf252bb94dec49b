"""agentls as an autogen ChatCompletionClient, and the conversion of
autogen's messages. The public face: `AgentlsChatCompletionClient` and the
abstract `ChatCompletionClient` protocol (autogen_core.models)."""

from agentls.core.compat.chat_completion_client import ChatCompletionClient
from agentls.providers.autogen.client import AgentlsChatCompletionClient

__all__ = ["AgentlsChatCompletionClient", "ChatCompletionClient"]
