"""shadowkernel: a private, writable shadow of a project for AI agents."""

from .errors import (
    ConflictError,
    NotFound,
    OverlayError,
    PathError,
    RunError,
    ServerError,
    ShadowError,
    StagingError,
)
from .lsp import Lint
from .run import RunResult
from .sched.timeline import Event, Timeline
from .workspace import Accepted, Branch, Diff, LintTable, Version, Workspace

__version__ = "0.1.0"

__all__ = [
    "Accepted",
    "Branch",
    "Diff",
    "Event",
    "Lint",
    "LintTable",
    "Timeline",
    "Version",
    "Workspace",
    "ConflictError",
    "NotFound",
    "OverlayError",
    "PathError",
    "RunError",
    "RunResult",
    "ServerError",
    "ShadowError",
    "StagingError",
    "__version__",
]
