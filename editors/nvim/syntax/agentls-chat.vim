" Highlighting of the agentls chat buffer (filetype agentls-chat).
if exists('b:current_syntax')
  finish
endif

syntax match agentlsChatYou /^## You$/
syntax match agentlsChatAgent /^## agentls$/
syntax match agentlsChatTool /^[▶◀] .*$/ contains=agentlsChatOk,agentlsChatFail
syntax match agentlsChatOk /✓/ contained
syntax match agentlsChatFail /✗.*$/ contained
syntax match agentlsChatHook /^ℹ hook.*$/
syntax match agentlsChatNote /^↳ .*$/
syntax match agentlsChatError /^✗ .*$/
syntax match agentlsChatCancelled /^⏹ .*$/
syntax match agentlsChatThinking /^> .*$/
syntax region agentlsChatCode start=/^\s*```/ end=/^\s*```/
syntax match agentlsChatInline /`[^`]\+`/
syntax match agentlsChatMention /@file:\S\+/

highlight default link agentlsChatYou Title
highlight default link agentlsChatAgent Function
highlight default link agentlsChatTool Special
highlight default link agentlsChatOk DiagnosticOk
highlight default link agentlsChatFail DiagnosticError
highlight default link agentlsChatHook Comment
highlight default link agentlsChatNote Comment
highlight default link agentlsChatError DiagnosticError
highlight default link agentlsChatCancelled DiagnosticWarn
highlight default link agentlsChatThinking Comment
highlight default link agentlsChatCode String
highlight default link agentlsChatInline String
highlight default link agentlsChatMention Identifier

let b:current_syntax = 'agentls-chat'
