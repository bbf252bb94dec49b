"""agentls as an autogen ChatCompletionClient, and the conversion of autogen's messages."""
