"""The text core: pure functions from texts to texts, at the bottom of the layers.

Positions with the one line-break rule and LSP's UTF-8/16/32 column units (`positions`), the
content checks for staged text (`content`), unified diffs (`patches`), SEARCH/REPLACE blocks
(`blocks`), range edits and WorkspaceEdit JSON (`ranges`), file URIs (`uris`), what two
texts share at their ends (`ends`) and the three-way merge of accept (`merge`). Nothing here
does I/O. It may import only the standard library, `shadowkernel.errors` and
`shadowkernel.paths` (tests/test_text_layer.py holds that); lsp/ converts lsprotocol values
to and from these plain ones.
"""
