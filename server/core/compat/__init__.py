"""The autogen surface: autogen_core.models types and the ChatCompletionClient protocol."""
