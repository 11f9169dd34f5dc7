"""The one registry of language servers and checkers: what a name in `servers=[...]` means.

A name is looked up in the specs the project's and the user's files configure (config.py),
then in the built-in ones (specs.py); a `ServerSpec` or a jupyter-lsp dict passes as itself.
Names of disk-bound checkers (checkers.py: mypy, tsc, go vet, ...) are no language servers:
`split` hands them to whoever runs them (workspace/checkers.py runs them sandboxed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ArgumentError, NotFound
from .checkers import CHECKERS
from .config import configured_specs
from .specs import ServerSpec, builtin_specs, find_program


def known_specs(project: Path | None = None, user: Path | None = None) -> dict[str, ServerSpec]:
    """Built-in specs, with what the user's file and the project's files add or change."""
    known = builtin_specs()
    return {**known, **configured_specs(project, known, user)}


def split(servers: Sequence[Any], project: Path | None = None) -> tuple[list[Any], list[str]]:
    """(language servers, checker names): a name is a checker's only when no server has it."""
    _check_list(servers)
    names = set(known_specs(project)) if any(isinstance(s, str) for s in servers) else set()
    checkers = [s for s in servers if isinstance(s, str) and s in CHECKERS and s not in names]
    return [s for s in servers if s not in checkers], checkers


def resolve_specs(
    servers: Sequence[str | ServerSpec | Mapping[str, Any]], project: Path | None = None
) -> list[ServerSpec]:
    """Names of known servers, specs, or {"name": ..., **jupyter-lsp dict} -> specs."""
    _check_list(servers)
    known = known_specs(project) if any(isinstance(s, str) for s in servers) else {}
    specs: list[ServerSpec] = []
    for server in servers:
        spec = _resolve_spec(server, known)
        if any(s.name == spec.name for s in specs):
            raise ArgumentError(f"servers: {spec.name!r} is listed twice; give each server once")
        specs.append(spec)
    return specs


def _check_list(servers: object) -> None:
    if isinstance(servers, str | Mapping | ServerSpec):
        raise ArgumentError(f"servers={servers!r}: give a list of servers, e.g. [{servers!r}]")


def _resolve_spec(server: object, known: Mapping[str, ServerSpec]) -> ServerSpec:
    if isinstance(server, ServerSpec):
        return server
    if isinstance(server, str):
        if server not in known:
            raise NotFound(f"servers: unknown language server {server!r}; known: "
                           f"{', '.join(sorted(known))}; checkers: {', '.join(CHECKERS)}; "
                           "or pass a ServerSpec, or configure it in shadowkernel.toml "
                           "(see shadowkernel.lsp.config)")  # fmt: skip
        return known[server]
    if isinstance(server, Mapping) and "name" in server:
        return ServerSpec.from_dict(str(server["name"]), server)
    raise ArgumentError(f"servers: {server!r} is not a server; give a built-in server's name, "
                        "a ServerSpec, or a jupyter-lsp dict with a 'name'")  # fmt: skip


def available_servers(project: Path | None = None) -> dict[str, bool]:
    """Known server name -> whether its command is installed here."""
    return {
        name: find_program(spec.argv[0], spec.search, spec.search_only) is not None
        for name, spec in known_specs(project).items()
    }
