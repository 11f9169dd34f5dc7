"""Task suites and lint-feedback experiments on top of the agent loop.

Suites: the built-in folder suite, `mutation_suite` (bugs made from any repository with a
pytest suite) and `swebench_suite` (SWE-bench instances over local checkouts); `experiment`
runs agents over a suite under paired conditions, `summary` reads the results. evals/ may
import agents/, the public API and what lies below; only the faces import it.
"""

from .check import make_checker
from .experiment import episode, experiment, reproducible, steps
from .mutation_suite import mutation_suite
from .plots import plot
from .stats import (
    Summary,
    bootstrap_diff,
    mcnemar,
    minimum_detectable_effect,
    pairs_needed,
    summary,
    tasks_needed,
)
from .suite import Environment, Suite, Task, builtin_suite, load_suite, load_task
from .swebench import load_instances, swebench_suite

__all__ = [
    "Environment",
    "Suite",
    "Summary",
    "Task",
    "bootstrap_diff",
    "builtin_suite",
    "episode",
    "experiment",
    "load_instances",
    "load_suite",
    "load_task",
    "make_checker",
    "mcnemar",
    "minimum_detectable_effect",
    "mutation_suite",
    "pairs_needed",
    "plot",
    "reproducible",
    "steps",
    "summary",
    "swebench_suite",
    "tasks_needed",
]
