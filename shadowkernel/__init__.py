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

__version__ = "0.1.0"

__all__ = [
    "ConflictError",
    "NotFound",
    "OverlayError",
    "PathError",
    "RunError",
    "ServerError",
    "ShadowError",
    "StagingError",
    "__version__",
]
