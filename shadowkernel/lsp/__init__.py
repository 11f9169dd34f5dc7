"""Language servers rooted at the shadow: version-exact diagnostics, navigation, delta lints.

    pool = LspPool(root, ["ruff", "pyright"])
    await pool.sync(documents, changed)      # the branch's staged texts, paths changed on disk
    lints = await pool.lint()                # final for exactly those texts
    table = lint_table(lints, "a", 3, mark_new(lints, base_lints, base_texts, new_texts))
"""

from .checkers import CHECKERS, run_checker
from .lints import COLUMNS, Edit, Fix, Lint, lint_table, mark_new
from .navigation import Hover, Location, Symbol
from .pool import LspPool
from .specs import ServerSpec, available_servers, builtin_specs
from .supervisor import ServerStatistics

__all__ = [
    "CHECKERS",
    "COLUMNS",
    "Edit",
    "Fix",
    "Hover",
    "Lint",
    "Location",
    "LspPool",
    "ServerSpec",
    "ServerStatistics",
    "Symbol",
    "available_servers",
    "builtin_specs",
    "lint_table",
    "mark_new",
    "run_checker",
]
