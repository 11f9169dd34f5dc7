"""shadowkernel: a private, writable shadow of a project for AI agents.

The public names are imported on first use: the overlay process and the CLI import this
package too, and must not pay for pandas, the LSP client and the scheduler they never use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import (
    ArgumentError,
    ClosedError,
    ConflictError,
    NotFound,
    OverlayError,
    PathError,
    RunError,
    ServerError,
    ShadowError,
    StagingError,
)

__version__ = "0.1.0"

# public name -> module that defines it
_LAZY = {
    "Accepted": ".workspace",
    "Branch": ".workspace",
    "Diff": ".workspace",
    "LintTable": ".workspace",
    "Version": ".workspace",
    "Workspace": ".workspace",
    "Event": ".sched.timeline",
    "Timeline": ".sched.timeline",
    "Lint": ".lsp",
    "LintReport": ".lsp",
    "Fix": ".lsp",
    "Hover": ".lsp",
    "Location": ".lsp",
    "Symbol": ".lsp",
    "ServerSpec": ".lsp",
    "RunResult": ".run",
    "experiment": ".evals",
    "summary": ".evals",
    "builtin_suite": ".evals",
    "load_suite": ".evals",
    "mutation_suite": ".evals",
    "swebench_suite": ".evals",
    "Observation": ".agents",
    "ScriptedAgent": ".agents",
    "SimulatedAgent": ".agents",
    "OpenAIChatAgent": ".agents",
    "OpenAIToolAgent": ".agents",
    "AnthropicToolAgent": ".agents",
    "CommandAgent": ".agents",
    "tasks_needed": ".evals",
}

__all__ = [
    "Accepted",
    "ArgumentError",
    "Branch",
    "ClosedError",
    "ConflictError",
    "Diff",
    "Event",
    "Fix",
    "Hover",
    "Lint",
    "LintReport",
    "LintTable",
    "Location",
    "NotFound",
    "OverlayError",
    "PathError",
    "RunError",
    "RunResult",
    "ServerError",
    "ServerSpec",
    "ShadowError",
    "StagingError",
    "Symbol",
    "Timeline",
    "Version",
    "Workspace",
    "__version__",
    "experiment",
    "summary",
    "builtin_suite",
    "load_suite",
    "mutation_suite",
    "swebench_suite",
    "Observation",
    "ScriptedAgent",
    "SimulatedAgent",
    "OpenAIChatAgent",
    "OpenAIToolAgent",
    "AnthropicToolAgent",
    "CommandAgent",
    "tasks_needed",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'shadowkernel' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:
    from .agents import (
        AnthropicToolAgent,
        CommandAgent,
        Observation,
        OpenAIChatAgent,
        OpenAIToolAgent,
        ScriptedAgent,
        SimulatedAgent,
    )
    from .evals.experiment import experiment
    from .evals.mutation_suite import mutation_suite
    from .evals.stats import summary, tasks_needed
    from .evals.suite import builtin_suite, load_suite
    from .evals.swebench import swebench_suite
    from .lsp import Fix, Hover, Lint, LintReport, Location, ServerSpec, Symbol
    from .run import RunResult
    from .sched.timeline import Event, Timeline
    from .workspace import Accepted, Branch, Diff, LintTable, Version, Workspace


def load_ipython_extension(shell: Any) -> None:
    """`%load_ext shadowkernel`: the magics and rich display in any IPython kernel."""
    from .kernel import load_ipython_extension as load

    load(shell)


def unload_ipython_extension(shell: Any) -> None:
    """`%unload_ext shadowkernel`: the magics and display taken back, the shadow closed."""
    from .kernel import unload_ipython_extension as unload

    unload(shell)
