"""A stand-in language server for the client half of the approval flow.

It sends exactly what docs/protocol.md says agentls sends for approvals, so the
VS Code side (the extension's language client) is tested even before the
real server's tool edits land:

- opening `edit-me.txt` -> `workspace/applyEdit` whose change carries a
  ChangeAnnotation with needsConfirmation (VS Code shows its refactor
  preview); the outcome is reported with window/showMessage;
- opening `ask-me.txt` -> `window/showMessageRequest` with the actions
  Allow once / Allow for session / Deny; the choice is reported likewise.
"""

from __future__ import annotations

from lsprotocol import types as t
from pygls.lsp.server import LanguageServer

server = LanguageServer("agentls-approval-stub", "0.0.1")


def _report(ls: LanguageServer, text: str) -> None:
    ls.window_show_message(t.ShowMessageParams(type=t.MessageType.Info, message=text))


@server.feature(t.TEXT_DOCUMENT_DID_OPEN)
async def did_open(ls: LanguageServer, params: t.DidOpenTextDocumentParams) -> None:
    doc = params.text_document
    if doc.uri.endswith("/edit-me.txt"):
        annotation = t.ChangeAnnotation(
            label="agentls: edit_file edit-me.txt",
            needs_confirmation=True,
            description="edit_file edit-me.txt: replace 'old line' with 'new line'",
        )
        document = t.OptionalVersionedTextDocumentIdentifier(uri=doc.uri, version=doc.version)
        first_word = t.Range(start=t.Position(line=0, character=0),
                             end=t.Position(line=0, character=8))
        edit = t.WorkspaceEdit(
            document_changes=[
                t.TextDocumentEdit(
                    text_document=document,
                    edits=[
                        t.AnnotatedTextEdit(
                            range=first_word,
                            new_text="new line",
                            annotation_id="agentls-edit",
                        )
                    ],
                )
            ],
            change_annotations={"agentls-edit": annotation},
        )
        result = await ls.workspace_apply_edit_async(
            t.ApplyWorkspaceEditParams(edit=edit, label="agentls: edit_file edit-me.txt")
        )
        _report(ls, f"stub: applied={str(result.applied).lower()}")
    elif doc.uri.endswith("/ask-me.txt"):
        choice = await ls.window_show_message_request_async(
            t.ShowMessageRequestParams(
                type=t.MessageType.Warning,
                message="agentls wants to run: pytest -q",
                actions=[
                    t.MessageActionItem(title="Allow once"),
                    t.MessageActionItem(title="Allow for session"),
                    t.MessageActionItem(title="Deny"),
                ],
            )
        )
        _report(ls, f"stub: chose={choice.title if choice else 'nothing'}")


@server.command("agentls.inlineCompletionAccepted")
def accepted(ls: LanguageServer, args: list[object]) -> None:
    return None


if __name__ == "__main__":
    server.start_io()
