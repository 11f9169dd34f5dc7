"""The one language table: which file extensions a language has, and their LSP languageId.

A `ServerSpec`'s `languages` pick its file patterns from here, and every document sent to a
server (didOpen) gets its languageId from here: a row added teaches both. Extensions are
matched on the base name only, case-sensitively, as the servers themselves do.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping
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
    # A header is C unless its project says otherwise; clangd decides by the compile command.
    ".c": FileKind("c", "c"),
    ".h": FileKind("c", "c"),
    ".cc": FileKind("cpp", "cpp"),
    ".cpp": FileKind("cpp", "cpp"),
    ".cxx": FileKind("cpp", "cpp"),
    ".c++": FileKind("cpp", "cpp"),
    ".hh": FileKind("cpp", "cpp"),
    ".hpp": FileKind("cpp", "cpp"),
    ".hxx": FileKind("cpp", "cpp"),
    ".sh": FileKind("shell", "shellscript"),
    ".bash": FileKind("shell", "shellscript"),
}


def patterns(languages: Iterable[str]) -> tuple[str, ...]:
    """Base-name globs of the files of `languages` ('*.py', ...), in table order."""
    return tuple(
        f"*{extension}"
        for language in languages
        for extension, kind in EXTENSIONS.items()
        if kind.language == language
    )


def extension(path: str) -> str:
    """The extension the table is keyed by ('.c'; '' for none)."""
    return posixpath.splitext(path)[1]


def language_id(path: str, overrides: Mapping[str, str] | None = None) -> str:
    """The LSP languageId for a file name: a server's own map first (`.lsp.json`'s
    extensionToLanguage), then the table; 'plaintext' when neither knows it."""
    suffix = extension(path)
    if overrides and suffix in overrides:
        return overrides[suffix]
    kind = EXTENSIONS.get(suffix)
    return kind.language_id if kind else "plaintext"


def known_languages() -> list[str]:
    return list(dict.fromkeys(kind.language for kind in EXTENSIONS.values()))
