"""Running commands inside the shadow: the sandbox, limits, and the harvest of what a run wrote.

A run sees the whole machine read-only through bubblewrap, the branch's view of the project
at the project's own path (a kept overlayfs view, the FUSE mount, or in fallback mode a private
copy), copy-on-write layers over $HOME, /tmp and `writable=` paths, its own user, PID and
network namespaces, and cgroup limits; what it wrote in the project comes back as overrides.
run/ may import the overlay (the store and its overlayfs translation), the text core and
errors; the scheduler and the public API above it call `run_in_shadow`.
"""

from .result import RunResult
from .runner import run_in_shadow

__all__ = ["RunResult", "run_in_shadow"]
