"""The one language table: which file extensions a language has, and their LSP languageId.

A `ServerSpec`'s `languages` pick its file patterns from here, and every document sent to a
server (didOpen) gets its languageId from here: a row added teaches both. Extensions are
matched on the base name only, case-sensitively, as the servers themselves do.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from typing import NamedTuple


class FileKind(NamedTuple):
    language: str  # what `ServerSpec.languages` names
    language_id: str  # the languageId its documents are opened with


EXTENSIONS: dict[str, FileKind] = {
    ".py": FileKind("python", "python"),
    ".pyi": FileKind("python", "python"),
    ".ts": FileKind("typescript", "typescript"),
    ".tsx": FileKind("typescript", "typescriptreact"),
    ".mts": FileKind("typescript", "typescript"),
    ".cts": FileKind("typescript", "typescript"),
    ".js": FileKind("javascript", "javascript"),
    ".jsx": FileKind("javascript", "javascriptreact"),
    ".mjs": FileKind("javascript", "javascript"),
    ".cjs": FileKind("javascript", "javascript"),
    ".go": FileKind("go", "go"),
    ".rs": FileKind("rust", "rust"),
}


def patterns(languages: Iterable[str]) -> tuple[str, ...]:
    """Base-name globs of the files of `languages` ('*.py', ...), in table order."""
    return tuple(
        f"*{extension}"
        for language in languages
        for extension, kind in EXTENSIONS.items()
        if kind.language == language
    )


def language_id(path: str) -> str:
    """The LSP languageId for a file name ('plaintext' when unknown)."""
    kind = EXTENSIONS.get(posixpath.splitext(path)[1])
    return kind.language_id if kind else "plaintext"
