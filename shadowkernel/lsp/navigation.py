"""Navigation results as plain values, converted from lsprotocol types.

Paths inside the workspace are RelPaths; a target outside it (a stub in typeshed, a file in
site-packages) keeps its absolute path with `in_workspace=False`. Positions are 1-based,
columns in code points, ends exclusive.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from lsprotocol import types as lsp

from .documents import TextIndex

# (uri) -> (path, in_workspace, index of the file's text)
Resolver = Callable[[str], tuple[str, bool, TextIndex]]


@dataclass(frozen=True)
class Location:
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    in_workspace: bool = True


@dataclass(frozen=True)
class Hover:
    text: str
    line: int | None = None
    column: int | None = None
    end_line: int | None = None
    end_column: int | None = None


@dataclass(frozen=True)
class Symbol:
    name: str
    kind: str
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    container: str | None = None
    detail: str | None = None


def location(resolve: Resolver, uri: str, range_: lsp.Range) -> Location:
    path, inside, index = resolve(uri)
    return Location(path, *index.span(range_), in_workspace=inside)


def locations(resolve: Resolver, result: object) -> list[Location]:
    """Definition/references results (Location, [Location], [LocationLink], None)."""
    if result is None:
        return []
    items = result if isinstance(result, list | tuple) else [result]
    found = []
    for item in items:
        if isinstance(item, lsp.LocationLink):
            found.append(location(resolve, item.target_uri, item.target_selection_range))
        elif isinstance(item, lsp.Location):
            found.append(location(resolve, item.uri, item.range))
    return found


def hover_text(contents: object) -> str:
    if isinstance(contents, lsp.MarkupContent):
        return contents.value
    if isinstance(contents, str):
        return contents
    if isinstance(contents, lsp.MarkedStringWithLanguage):
        return f"```{contents.language}\n{contents.value}\n```"
    if isinstance(contents, list | tuple):
        return "\n\n".join(hover_text(part) for part in contents)
    return ""


def hover(index: TextIndex, result: lsp.Hover | None) -> Hover | None:
    if result is None or not hover_text(result.contents).strip():
        return None
    span = index.span(result.range) if result.range else (None, None, None, None)
    return Hover(hover_text(result.contents), *span)


def symbols(resolve: Resolver, uri: str, result: object) -> list[Symbol]:
    """Document symbols, hierarchical ones flattened in document order with their container."""
    path, _, index = resolve(uri)
    items = result if isinstance(result, list) else []  # None: no symbols
    return list(_flatten(resolve, path, index, items, None))


def _flatten(
    resolve: Resolver, path: str, index: TextIndex, items: Iterable[object], container: str | None
) -> Iterable[Symbol]:
    for item in items:
        if isinstance(item, lsp.DocumentSymbol):
            kind = lsp.SymbolKind(item.kind).name.lower()
            yield Symbol(item.name, kind, path, *index.span(item.selection_range),
                         container=container, detail=item.detail)  # fmt: skip
            yield from _flatten(resolve, path, index, item.children or (), item.name)
        elif isinstance(item, lsp.SymbolInformation):
            where = location(resolve, item.location.uri, item.location.range)
            yield Symbol(item.name, lsp.SymbolKind(item.kind).name.lower(), where.path,
                         where.line, where.column, where.end_line, where.end_column,
                         container=item.container_name)  # fmt: skip


def workspace_symbols(resolve: Resolver, result: object) -> list[Symbol]:
    """workspace/symbol results; a WorkspaceSymbol without a range (which would need
    workspaceSymbol/resolve) is left out."""
    found = []
    for item in result or []:  # type: ignore[attr-defined]
        where = item.location
        if not isinstance(where, lsp.Location):
            continue
        at = location(resolve, where.uri, where.range)
        found.append(Symbol(item.name, lsp.SymbolKind(item.kind).name.lower(), at.path, at.line,
                            at.column, at.end_line, at.end_column,
                            container=item.container_name))  # fmt: skip
    return found
