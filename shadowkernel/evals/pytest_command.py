"""The user's pytest command line, read once: the interpreter, the options to keep for every
run, and what it selects (a mutation suite's baseline runs that selection).

Verbosity and early-exit options are dropped (the driver decides them, and every test must
run); an option that takes a value keeps it.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import ArgumentError
from .suite import Environment

VALUE_OPTIONS = {"-k", "-m", "-p", "-c", "-o", "--rootdir", "--deselect", "--ignore",
                 "--confcutdir", "-W"}  # fmt: skip


@dataclass(frozen=True)
class Command:
    python: str
    options: tuple[str, ...]  # pytest options the user gave (kept for every run)
    paths: tuple[str, ...]  # what the user's command selects (the baseline runs these)


def parse_command(test_command: str | Sequence[str], root: str, python: str | None) -> Command:
    """The interpreter and pytest arguments of a pytest command line."""
    argv = shlex.split(test_command) if isinstance(test_command, str) else list(test_command)
    at = _pytest_at(argv)
    if at is None:
        raise ArgumentError(f"test_command={test_command!r}: give a pytest command, e.g. "
                            "'python -m pytest tests' or 'pytest -q' (the tasks need pytest's "
                            "test ids and per-test coverage)")  # fmt: skip
    head, args = argv[:at], argv[at + 1 :]
    interpreter = python or (head[0] if head else sys.executable)
    if re.fullmatch(r"python[0-9.]*", interpreter):
        interpreter = sys.executable  # a bare `python`: the one running shadowkernel
    if not os.path.isabs(interpreter) and "/" in interpreter:
        interpreter = os.path.join(root, interpreter)
    options, paths = _split_args(args)
    return Command(interpreter, options, paths)


def _pytest_at(argv: list[str]) -> int | None:
    for i, arg in enumerate(argv):
        if os.path.basename(arg) in ("pytest", "py.test"):
            return i if i == 0 or argv[i - 1] == "-m" else None
    return None


def _split_args(args: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    options: list[str] = []
    paths: list[str] = []
    value_next = False
    for arg in args:
        if value_next:
            options.append(arg)
            value_next = False
        elif arg.startswith("-"):
            if arg in ("-q", "-v", "-x", "--exitfirst", "-s") or arg.startswith("--tb"):
                continue  # the driver decides verbosity and tracebacks; every test must run
            options.append(arg)
            value_next = arg in VALUE_OPTIONS
        else:
            paths.append(arg)
    return tuple(options), tuple(paths)


def environment_for(command: Command, autoload: bool, setup: str | None) -> Environment:
    options = ("-p", "no:cacheprovider", "-q", "--tb=short", *command.options)
    return Environment(command.python, options, setup=setup, autoload=autoload)
