"""Task suites and lint-feedback experiments on top of the agent loop."""

from .check import make_checker
from .suite import Suite, Task, builtin_suite, load_suite, load_task

__all__ = ["Suite", "Task", "builtin_suite", "load_suite", "load_task", "make_checker"]
