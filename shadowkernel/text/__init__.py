"""The text core: pure functions from texts to texts, at the bottom of the layers.

Positions (the one line-break rule, code-point columns and LSP's UTF-8/16/32 units), the
content checks for staged text, unified diffs (parse, apply, render), SEARCH/REPLACE blocks,
range edits and WorkspaceEdit JSON, file URIs, and the three-way merge of accept. Nothing
here does I/O. It may import only the standard library, `shadowkernel.errors` and
`shadowkernel.paths`; lsp/ converts its lsprotocol types to and from these plain values.
"""
