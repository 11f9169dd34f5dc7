"""Language servers rooted at the shadow: version-exact diagnostics, navigation, delta lints.

`lsp/` starts language servers as child processes with their root
at the shadow mount, keeps their open documents equal to a branch's staged texts, and turns
their answers into plain values (`Lint`, `Location`, `Hover`, `Symbol`) with 1-based
positions. It is generic over servers: each server is a `ServerSpec` (specs.py) that names
its quirks as strategy values, a `DiagnosticsMode` (diagnostics.py) and a `FixSource`
(fixes.py), so adding a server is one spec, in Python or in a project's configuration
(config.py; registry.py says what a name means); supervision (start, restart, idle stop) is
in supervisor.py, the file-extension table in languages.py. Disk-bound checkers (mypy, go
vet) are data and pure parsers here (checkers.py); workspace/ runs them sandboxed. It may
import the text core,
`shadowkernel.errors` and `shadowkernel.paths` and nothing above them: not the overlay (it
sees the shadow only as a folder), nor run/, sched/, workspace/ or the faces.

    pool = LspPool(root, ["ruff", "pyright"])
    await pool.sync(documents, changed)  # the branch's staged texts, paths changed on disk
    lints = await pool.lint()  # final for exactly those texts
    table = lint_table(lints, "a", 3, mark_new(lints, base_lints, base_texts, new_texts))
"""

from .checkers import CHECKERS
from .diagnostics import (
    AutoDiagnostics,
    DiagnosticsMode,
    NoDiagnostics,
    PullDiagnostics,
    PushDiagnostics,
    TsserverDiagnostics,
)
from .fixes import CodeActionFixes, FixSource, RuffDataFixes
from .linemap import LineMap, line_map
from .lints import COLUMNS, Fix, Lint, LintReport, flag_new, lint_table, mark_new
from .navigation import Hover, Location, Symbol
from .pool import LspPool
from .registry import available_servers, known_specs
from .specs import ServerSpec, builtin_specs
from .supervisor import ServerStatistics

__all__ = [
    "CHECKERS",
    "COLUMNS",
    "AutoDiagnostics",
    "CodeActionFixes",
    "DiagnosticsMode",
    "Fix",
    "FixSource",
    "Hover",
    "LineMap",
    "Lint",
    "LintReport",
    "Location",
    "LspPool",
    "NoDiagnostics",
    "PullDiagnostics",
    "PushDiagnostics",
    "RuffDataFixes",
    "ServerSpec",
    "ServerStatistics",
    "Symbol",
    "TsserverDiagnostics",
    "available_servers",
    "builtin_specs",
    "flag_new",
    "known_specs",
    "line_map",
    "lint_table",
    "mark_new",
]
