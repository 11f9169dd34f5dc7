"""The one error family of shadowkernel.

Inside the package everything raises a `ShadowError` subclass; each edge translates
it once (FUSEError in the overlay, UsageError in magics, a JSON-RPC error for LSP).
Messages name the offending argument and say what to do about it.
"""

from __future__ import annotations

import errno as _errno


class ShadowError(Exception):
    """Base of every error shadowkernel raises on purpose."""

    errno: int = _errno.EIO


class ArgumentError(ShadowError, ValueError):
    """An argument the public API does not accept; the message names it and what it accepts."""

    errno = _errno.EINVAL


class ClosedError(ShadowError):
    """The workspace was closed or the branch dropped; open or fork a new one."""

    errno = _errno.ESHUTDOWN


WORKSPACE_CLOSED = "this Workspace is closed; open a new one"  # every call after close() hears it


class PathError(ShadowError, ValueError):
    """A path that is not a plain relative path inside the workspace."""

    errno = _errno.EINVAL


class NotFound(ShadowError, LookupError):
    """A path, branch, version or server that does not exist."""

    errno = _errno.ENOENT


class StagingError(ShadowError, ValueError):
    """An edit that cannot be applied (malformed patch, ambiguous replace, binary text)."""

    errno = _errno.EINVAL


class ConflictError(ShadowError):
    """Accepting a branch would overwrite changes the user made meanwhile."""

    errno = _errno.EBUSY

    def __init__(self, message: str, paths: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.paths = paths


class OverlayError(ShadowError):
    """The overlay process failed or is unreachable; the branch data is intact."""


class ServerError(ShadowError):
    """A language server is missing, crashed or answered with an error."""


class RunError(ShadowError):
    """A command could not be started inside the shadow."""
