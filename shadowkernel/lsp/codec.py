"""lsprotocol's converter between raw JSON-RPC values and lsprotocol types, in one place.

The client and the diagnostics strategies decode what servers send through `structure`
(results) and `structure_params` (what servers send us), and encode with `unstructure`.
"""

from __future__ import annotations

from typing import Any

import attrs
from lsprotocol import types as lsp
from lsprotocol.converters import get_converter


def _converter() -> Any:
    """lsprotocol's converter plus the hook it misses with cattrs >= 25: the optional
    notebook filter of NotebookDocumentFilterWithCells (ruff's initialize result has one)."""
    converter = get_converter()
    cells = attrs.fields(lsp.NotebookDocumentFilterWithCells).notebook.type
    notebook: Any = attrs.fields(lsp.NotebookDocumentFilterWithNotebook).notebook.type
    converter.register_structure_hook(
        cells, lambda obj, _: None if obj is None else converter.structure(obj, notebook)
    )
    return converter


converter = _converter()


def structure(method: str, result: Any) -> Any:
    """Decode a raw result of `method` into lsprotocol types (through its Response type)."""
    response_type = lsp.METHOD_TO_TYPES[method][1]
    message = {"jsonrpc": "2.0", "id": 0, "result": result}
    return converter.structure(message, response_type).result


def structure_params(method: str, params: Any) -> Any:
    """Decode the raw params of a request or notification a server sent."""
    params_type = lsp.METHOD_TO_TYPES[method][2]
    return converter.structure(params, params_type)


def unstructure(value: Any) -> Any:
    return converter.unstructure(value)
