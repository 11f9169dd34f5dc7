"""Task suites and lint-feedback experiments on top of the agent loop."""

from .check import make_checker
from .experiment import episode, experiment, reproducible, steps
from .plots import plot
from .stats import Summary, bootstrap_diff, mcnemar, summary
from .suite import Suite, Task, builtin_suite, load_suite, load_task

__all__ = [
    "Suite",
    "Summary",
    "Task",
    "bootstrap_diff",
    "builtin_suite",
    "episode",
    "experiment",
    "load_suite",
    "load_task",
    "make_checker",
    "mcnemar",
    "plot",
    "reproducible",
    "steps",
    "summary",
]
