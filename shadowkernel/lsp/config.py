"""Servers by configuration: language servers a project or its user adds without Python.

Read, later files winning per server name:

- the user's `~/.config/shadowkernel/servers.toml` (`$XDG_CONFIG_HOME` honoured): `[servers.NAME]`;
- the project's `.lsp.json`, Claude Code's format: `{"NAME": {"command": "gopls", "args": [],
  "extensionToLanguage": {".go": "go"}, "env": {}, "initializationOptions": {},
  "settings": {}}}` (also wrapped in `{"lspServers": {...}}`, as a plugin.json has it);
- the project's `pyproject.toml` (`[tool.shadowkernel.servers.NAME]`), then its
  `shadowkernel.toml` (`[servers.NAME]`).

A TOML table takes `command` (a list, or a string split like a shell would), `languages`
(names in languages.py), `extensions` (a list, or a table extension -> languageId),
`diagnostics` ("auto", "pull", "push", "tsserver", "none"), `initialization_options`,
`settings`, `pulls_settings`, `env`, `recheck_open`, `reads_disk`, `watch`, `request_timeout`,
`install`. A table named like a built-in server changes only the keys it gives (e.g. clangd's
`command`; jedi-language-server's lints need `diagnostics = "push"` and
`initialization_options = {}`, since the built-in turns them off). Anything else is an
ArgumentError naming the file and the key.
"""

from __future__ import annotations

import json
import shlex
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from .. import userdirs
from ..errors import ArgumentError
from .languages import language_id
from .specs import RECHECKS, ServerSpec, diagnostics_mode

PROJECT_FILES = (".lsp.json", "pyproject.toml", "shadowkernel.toml")


def user_file() -> Path:
    return userdirs.config_home() / "servers.toml"


def configured_specs(
    project: Path | None, known: Mapping[str, ServerSpec], user: Path | None = None
) -> dict[str, ServerSpec]:
    """The specs the user's file and the project's files add or change, by name."""
    files = [user or user_file(), *(project / name for name in PROJECT_FILES if project)]
    found: dict[str, ServerSpec] = {}
    for file in files:
        for name, table in _tables(file).items():
            where = f"{file}: server {name!r}"
            base = found.get(name) or known.get(name)
            found[name] = _spec(where, name, table, base, file.name == ".lsp.json")
    return found


def _tables(file: Path) -> dict[str, Any]:
    """The server tables a file holds ({} when it does not exist or names none)."""
    try:
        text = file.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return {}
    except OSError as error:
        raise ArgumentError(f"{file}: cannot be read ({error.strerror})") from None
    try:
        data = json.loads(text) if file.suffix == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as error:
        raise ArgumentError(f"{file}: not valid {file.suffix[1:].upper()}: {error}") from None
    if file.name == "pyproject.toml":
        data = data.get("tool", {}).get("shadowkernel", {})
    elif file.name == ".lsp.json":
        data = {"servers": data.get("lspServers", data) if isinstance(data, dict) else data}
    servers = data.get("servers", {}) if isinstance(data, dict) else None
    if not isinstance(servers, dict) or not all(isinstance(t, dict) for t in servers.values()):
        raise ArgumentError(f"{file}: 'servers' must be a table of server tables, "
                            "e.g. [servers.clangd] (in pyproject.toml: "
                            "[tool.shadowkernel.servers.clangd])")  # fmt: skip
    return servers


def _spec(
    where: str, name: str, table: dict[str, Any], base: ServerSpec | None, claude: bool
) -> ServerSpec:
    fields = _claude_fields(where, table) if claude else _toml_fields(where, table)
    if base is not None:
        if "languages" in fields or "language_ids" in fields:
            fields["patterns"] = ()  # derived again from the new languages
        return attrs.evolve(base, name=name, **fields)
    if "argv" not in fields:
        key = "command" if claude else "command (a list such as ['clangd'])"
        raise ArgumentError(f"{where}: no {key}; a server shadowkernel does not know needs one")
    if not fields.get("languages") and not fields.get("language_ids"):
        raise ArgumentError(f"{where}: give 'languages' or 'extensions' (which files it serves)")
    return ServerSpec(name=name, **fields)


# -- the TOML format ---------------------------------------------------------------------------


def _strings(where: str, key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str) and key == "command":
        value = shlex.split(value)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ArgumentError(f"{where}: {key!r} must be a list of strings, not {value!r}")
    return tuple(value)


def _table(where: str, key: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ArgumentError(f"{where}: {key!r} must be a table, not {value!r}")
    return value


def _flag(where: str, key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ArgumentError(f"{where}: {key!r} must be true or false, not {value!r}")
    return value


def _seconds(where: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ArgumentError(f"{where}: {key!r} must be a positive number of seconds")
    return float(value)


def _text(where: str, key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ArgumentError(f"{where}: {key!r} must be a string, not {value!r}")
    return value


def _recheck(where: str, key: str, value: Any) -> str:
    if value not in RECHECKS:
        raise ArgumentError(f"{where}: {key!r} must be one of {RECHECKS}, not {value!r}")
    return str(value)


def _mode(where: str, key: str, value: Any) -> Any:
    try:
        return diagnostics_mode(value)
    except ArgumentError as error:
        raise ArgumentError(f"{where}: {error}") from None


def _extensions(where: str, key: str, value: Any) -> dict[str, str]:
    pairs = value if isinstance(value, dict) else {e: "" for e in _strings(where, key, value)}
    for extension, language in pairs.items():
        if not extension.startswith(".") or not isinstance(language, str):
            raise ArgumentError(f"{where}: {key!r} names extensions with their dot ('.c'), "
                                f"each with a languageId string; got {extension!r}")  # fmt: skip
    return {e: language or language_id(f"file{e}") for e, language in pairs.items()}


# key -> (ServerSpec field, check)
_TOML: dict[str, tuple[str, Callable[[str, str, Any], Any]]] = {
    "command": ("argv", _strings),
    "languages": ("languages", _strings),
    "extensions": ("language_ids", _extensions),
    "diagnostics": ("diagnostics", _mode),
    "initialization_options": ("initialization_options", _table),
    "settings": ("settings", _table),
    "pulls_settings": ("pulls_settings", _flag),
    "env": ("env", _table),
    "recheck_open": ("recheck_open", _recheck),
    "reads_disk": ("reads_disk", _flag),
    "watch": ("watch", _strings),
    "request_timeout": ("request_timeout", _seconds),
    "install": ("install", _text),
}


def _toml_fields(where: str, table: dict[str, Any]) -> dict[str, Any]:
    fields = {}
    for key, value in table.items():
        if key not in _TOML:
            raise ArgumentError(f"{where}: unknown key {key!r}; known: {', '.join(_TOML)}")
        field, check = _TOML[key]
        fields[field] = check(where, key, value)
    if "language_ids" in fields and "languages" not in fields:
        fields["languages"] = ()
    return fields


# -- Claude Code's .lsp.json --------------------------------------------------------------------

# Keys of that format with no meaning here (shadowkernel supervises servers its own way).
_CLAUDE_IGNORED = {"workspaceFolder", "startupTimeout", "shutdownTimeout", "restartOnCrash",
                   "maxRestarts"}  # fmt: skip
_CLAUDE = {"command", "args", "extensionToLanguage", "env", "initializationOptions",
           "settings", "transport", *_CLAUDE_IGNORED}  # fmt: skip


def _claude_fields(where: str, table: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(table) - _CLAUDE)
    if unknown:
        raise ArgumentError(
            f"{where}: unknown key {unknown[0]!r}; known: {', '.join(sorted(_CLAUDE))}"
        )
    if table.get("transport", "stdio") != "stdio":
        raise ArgumentError(
            f"{where}: 'transport' {table['transport']!r}: only 'stdio' is supported"
        )
    if "command" not in table or "extensionToLanguage" not in table:
        missing = "command" if "command" not in table else "extensionToLanguage"
        raise ArgumentError(
            f"{where}: no {missing!r}; .lsp.json needs command and extensionToLanguage"
        )
    extensions = _table(where, "extensionToLanguage", table["extensionToLanguage"])
    fields: dict[str, Any] = {
        "argv": (_text(where, "command", table["command"]),
                 *_strings(where, "args", table.get("args", []))),
        "languages": (),
        "language_ids": _extensions(where, "extensionToLanguage", extensions),
        "env": _table(where, "env", table.get("env", {})),
        "settings": _table(where, "settings", table.get("settings", {})),
    }  # fmt: skip
    if "initializationOptions" in table:
        fields["initialization_options"] = _table(where, "initializationOptions",
                                                  table["initializationOptions"])  # fmt: skip
    return fields
