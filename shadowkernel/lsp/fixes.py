"""Fix sources: where a server's quick fixes for its diagnostics come from.

Most servers answer `textDocument/codeAction` (`CodeActionFixes`); ruff also puts each fix
in its diagnostic's `data`, which saves a round trip per linted file (`RuffDataFixes`). A
`ServerSpec` names its source (`quick_fixes=RuffDataFixes()`, or a source's `name`); the
pool asks it for the code actions of each diagnostic and turns them into `Fix` values with
`fix_from_action`, whatever the source.
"""

from __future__ import annotations

import abc
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from lsprotocol import types as lsp

from ..paths import RelPath
from ..text.ranges import TextEdit
from .documents import TextIndex
from .lints import Fix, text_digest
from .navigation import Resolver

if TYPE_CHECKING:
    from .client import LanguageClient

Actions = list[list[lsp.CodeAction]]


class FixSource(abc.ABC):
    """One way to get the quick fixes of a file's diagnostics."""

    name: ClassVar[str]  # what a ServerSpec or a jupyter-lsp dict may call it

    @abc.abstractmethod
    async def quick_fixes(
        self, client: LanguageClient, path: RelPath, diagnostics: Sequence[lsp.Diagnostic]
    ) -> Actions:
        """The code actions fixing each of `diagnostics` (one list per diagnostic, in order)."""


@dataclass(frozen=True)
class CodeActionFixes(FixSource):
    """Asks the server: one request for the whole file when every action says which
    diagnostics it fixes (ruff and pyright do), else one request per diagnostic."""

    name: ClassVar[str] = "code-actions"

    async def quick_fixes(
        self, client: LanguageClient, path: RelPath, diagnostics: Sequence[lsp.Diagnostic]
    ) -> Actions:
        if len(diagnostics) > 1:
            actions = await client.code_actions(path, diagnostics)
            if all(a.diagnostics for a in actions):
                fixed = [{_diagnostic_key(d) for d in a.diagnostics or ()} for a in actions]
                pairs = list(zip(actions, fixed, strict=True))
                return [[a for a, keys in pairs if _diagnostic_key(d) in keys] for d in diagnostics]
        return [await client.code_actions(path, [d]) for d in diagnostics]


@dataclass(frozen=True)
class RuffDataFixes(FixSource):
    """Reads ruff's fixes from each diagnostic's `data`: the same actions its server answers
    (tested against them), without asking."""

    name: ClassVar[str] = "ruff-data"

    async def quick_fixes(
        self, client: LanguageClient, path: RelPath, diagnostics: Sequence[lsp.Diagnostic]
    ) -> Actions:
        return [ruff_data_fixes(d, client.uri(path)) for d in diagnostics]


SOURCES: dict[str, type[FixSource]] = {s.name: s for s in (CodeActionFixes, RuffDataFixes)}


def ruff_data_fixes(diagnostic: lsp.Diagnostic, uri: str) -> list[lsp.CodeAction]:
    """The quick fixes ruff's server would answer for `diagnostic`, built from its `data`
    (`edits` + `title`: the fix; `noqa_edit`: "Disable for this line")."""
    data = diagnostic.data if isinstance(diagnostic.data, dict) else {}
    code = data.get("code") or diagnostic.code
    found = []
    if data.get("edits"):
        found.append((f"Ruff ({code}): {data.get('title', 'Fix')}", data["edits"]))
    if data.get("noqa_edit"):
        found.append((f"Ruff ({code}): Disable for this line", [data["noqa_edit"]]))
    return [
        lsp.CodeAction(
            title,
            kind=lsp.CodeActionKind.QuickFix,
            diagnostics=[diagnostic],
            edit=lsp.WorkspaceEdit(changes={uri: [_text_edit(e) for e in edits]}),
        )  # fmt: skip
        for title, edits in found
    ]


def fix_from_action(resolve: Resolver, action: lsp.CodeAction) -> Fix:
    """A code action as a `Fix`: its edits in 1-based positions of the files they change,
    and the digest of each file's text they were computed against (`Fix.against`)."""
    edits, against = [], {}
    for uri, text_edits in _text_edits(action.edit):
        path, _, index = resolve(uri)
        against[path] = _digest(index)
        for edit in text_edits:
            edits.append(TextEdit(path, *index.span(edit.range), edit.new_text))  # type: ignore[arg-type]
    return Fix(action.title, tuple(edits), tuple(against.items()))  # type: ignore[arg-type]


# A document's digest, once per text index (a file's many fixes share its open document's).
_DIGESTS: weakref.WeakKeyDictionary[TextIndex, str] = weakref.WeakKeyDictionary()


def _digest(index: TextIndex) -> str:
    digest = _DIGESTS.get(index)
    if digest is None:
        digest = _DIGESTS[index] = text_digest(index.text)
    return digest


def _text_edit(raw: Mapping[str, Any]) -> lsp.TextEdit:
    start, end = raw["range"]["start"], raw["range"]["end"]
    span = lsp.Range(lsp.Position(start["line"], start["character"]),
                     lsp.Position(end["line"], end["character"]))  # fmt: skip
    return lsp.TextEdit(span, raw["newText"])


def _text_edits(edit: lsp.WorkspaceEdit | None) -> list[tuple[str, Sequence[Any]]]:
    if edit is None:
        return []
    found: list[tuple[str, Sequence[Any]]] = list((edit.changes or {}).items())
    for change in edit.document_changes or ():
        if isinstance(change, lsp.TextDocumentEdit):
            found.append((change.text_document.uri, change.edits))
    return found


def _diagnostic_key(d: lsp.Diagnostic) -> tuple[object, ...]:
    """What identifies a diagnostic echoed back in a code action (servers re-encode the rest)."""
    r = d.range
    return (r.start.line, r.start.character, r.end.line, r.end.character, str(d.code), d.message)
