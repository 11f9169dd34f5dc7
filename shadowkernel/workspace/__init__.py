"""The public API behind `import shadowkernel`: a `Workspace` over the user's folder and its
`Branch`es.

One concept per module: `bridge` (callers' threads to the services' event loop), `folder`
(the user's folder: reads, and accept's atomic writes), `staging` (versions and their
overrides, pure), `arguments` (checks of what callers pass), `checkers` (disk-bound checkers
as sandboxed runs at a version, cached per content), `baselints` (the base-lint cache
behind the `new` column), `scratch` (what runs wrote, and what `keep=True` keeps, pure),
`runs` (a branch's runs through the scheduler), `diff` (a version against its base), `accept`
(the accept plan and three-way merges, pure), `identity` (values kept by a bytes object's
identity), `state` (a branch's state: versions, bases,
scratch, lock), `statedir` and `durable` (branches on disk, restored on open), `gitexport`
(a branch as a git commit), then `branch` and `workspace`. This layer may
import everything below it (the scheduler, runs, language servers, the overlay, the text
core); nothing below imports it.
"""

from .accept import Accepted
from .branch import Branch, LintTable
from .diff import Diff
from .staging import Version
from .workspace import Workspace, open_workspaces

__all__ = ["Accepted", "Branch", "Diff", "LintTable", "Version", "Workspace", "open_workspaces"]
