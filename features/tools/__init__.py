"""Built-in tool plugins (entry-point group `agentls.tools`).

Read-only: `read_file`, `list_files`, `search_text`. Shared path rules
(confinement to the workspace folders, open buffers first, ignore rules)
live in `workspace`.
"""

from agentls.features.tools.readonly import ListFilesTool, ReadFileTool, SearchTextTool

__all__ = ["ListFilesTool", "ReadFileTool", "SearchTextTool"]
