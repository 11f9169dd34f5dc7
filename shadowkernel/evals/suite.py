"""Task suites: a folder of small projects, and tasks whose hidden tests decide success.

    suite/
      suite.toml                  name, description
      pytest.ini                  how the tests run (optional)
      projects/                   the workspace root: what the shadow shows
        ruff.toml                 lint configuration (optional)
        <project>/...             a small Python project, with its visible tests in tests/
      tasks/<task-id>/
        task.toml                 project, kind, statement, files, [[solution]] edits
        repro/test_*.py           visible: shown to agents in conditions with run output
        hidden/test_*.py          hidden: decide success; never shown to an agent

Hidden tests live outside the workspace root, so nothing in the shadow reveals them; they run
inside the shadow through `branch.run`. Task paths (`files`, solution paths) are relative to
the task's project; `Task` holds them relative to the workspace root, as branches want them.

Suites made from a repository (`mutation_suite`, `swebench_suite`) have no folder: their
tasks name their hidden tests by pytest id (`fail_to_pass`, `pass_to_pass`), start from a
version staged on top of the checkout (`start`: the mutant, or the base commit's files), and
may carry a `test_patch` applied only when grading; `Suite.environments` says, per project,
which interpreter runs the tests and how (`Environment`).

A task whose folder cannot be read is loaded anyway, with `problem` saying what is wrong:
the experiment records it as a failed cell instead of stopping (caveat: nothing but the
folder layout and task.toml is checked at load time; a wrong hidden test shows up as a failed
check).
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ..agents.edits import AgentOutputError, Edit, from_json, to_json
from ..errors import ArgumentError, NotFound

BUILTIN = Path(__file__).with_name("suite")


@dataclass(frozen=True)
class Task:
    id: str
    project: str  # the project's folder under the workspace root
    statement: str
    files: tuple[str, ...]  # focus files, relative to the workspace root
    solution: tuple[Edit, ...]  # a reference solution (paths relative to the workspace root)
    hidden: str  # absolute folder of the hidden tests
    repro: str | None  # absolute folder of the visible repro tests, if any
    kind: str = "bug"
    folder: str = ""
    problem: str | None = None  # why the task is malformed (it then always fails)
    digest: str = ""  # of task.toml and the tests: part of the cache key
    # Tasks made from a repository (empty for a suite folder's tasks):
    start: tuple[tuple[str, str | None], ...] = ()  # staged first: path -> text (None: gone)
    fail_to_pass: tuple[str, ...] = ()  # pytest ids that fail at the start, pass when solved
    pass_to_pass: tuple[str, ...] = ()  # pytest ids that pass at the start and must go on so
    visible_tests: tuple[str, ...] = ()  # what the agent's test run runs (conditions with run)
    test_patch: str = ""  # a unified diff staged only for grading (SWE-bench's test_patch)
    origin: str = ""  # what the task was made from, for the record

    @property
    def ok(self) -> bool:
        return self.problem is None

    @property
    def by_test_ids(self) -> bool:
        """True when the hidden tests are pytest ids rather than a folder."""
        return bool(self.fail_to_pass)


@dataclass(frozen=True)
class Environment:
    """How a project's tests run inside the shadow.

    `python`: the interpreter (absolute, e.g. a venv's `bin/python`; it needs pytest);
    `options`: pytest arguments before the test ids; `setup`: a shell command run first in
    every check (e.g. building an extension), its writes kept only for that run; `env`:
    extra environment variables; `autoload`: let pytest load installed plugins."""

    python: str
    options: tuple[str, ...] = ("-p", "no:cacheprovider", "-q", "--tb=short")
    setup: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    autoload: bool = False


@dataclass(frozen=True)
class Suite:
    name: str
    root: str  # the suite folder
    workspace_root: str  # projects/: the folder the Workspace shadows
    tasks: tuple[Task, ...]
    description: str = ""
    pytest_ini: str | None = None
    extra: dict[str, str] = field(default_factory=dict)
    environments: dict[str, Environment] = field(default_factory=dict)  # project -> its tests
    # CPU seconds each test may take when graded (measured on this machine, so not part of
    # the suite's identity: equal suites may carry other budgets)
    budgets: dict[str, float] = field(default_factory=dict, compare=False, repr=False)

    def __len__(self) -> int:
        return len(self.tasks)

    def __iter__(self) -> Iterator[Task]:
        return iter(self.tasks)

    def __getitem__(self, task_id: str) -> Task:
        for task in self.tasks:
            if task.id == task_id:
                return task
        raise NotFound(f"suite {self.name!r} has no task {task_id!r}; its tasks: "
                       f"{', '.join(t.id for t in self.tasks[:20])}")  # fmt: skip

    def select(self, ids: str | Sequence[str] | None = None, *, first: int | None = None
               ) -> Suite:  # fmt: skip
        """A suite with only the tasks named (one id, or ids in the order given), or the
        first few."""
        if isinstance(ids, str):
            ids = [ids]  # one task's id, not its characters
        tasks = self.tasks if ids is None else tuple(self[i] for i in ids)
        return replace(self, tasks=tasks[:first] if first is not None else tasks)

    def with_tasks(self, tasks: Sequence[Task]) -> Suite:
        return replace(self, tasks=tuple(tasks))

    def frame(self):  # -> pd.DataFrame
        import pandas as pd

        return pd.DataFrame(
            [{"task": t.id, "project": t.project, "kind": t.kind, "files": ", ".join(t.files),
              "fail_to_pass": len(t.fail_to_pass), "pass_to_pass": len(t.pass_to_pass),
              "problem": t.problem, "statement": " ".join(t.statement.split())} for t in self]
        )  # fmt: skip

    def to_json(self) -> str:
        """The suite's identity as canonical JSON: equal for equal suites, byte for byte
        (timings and the measured `budgets` are left out)."""
        return json.dumps(suite_record(self), sort_keys=True, indent=1, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str, root: str | os.PathLike[str]) -> Suite:
        """A suite that `to_json()` wrote, its projects' checkout at `root` (the JSON leaves
        out where it was, and the budgets measured on the machine that made it: tests are then
        graded without CPU budgets, under the run's wall-clock timeout)."""
        try:
            data = json.loads(text)
            tasks = tuple(task_from_record(r) for r in data["tasks"])
            environments = {k: environment_from_record(v)
                            for k, v in data["environments"].items()}  # fmt: skip
            name, description, extra = data["name"], data["description"], data["extra"]
        except (ValueError, KeyError, TypeError, AgentOutputError) as error:
            raise ArgumentError(f"text: not a suite written by Suite.to_json() "
                                f"({type(error).__name__}: {error})") from error  # fmt: skip
        folder = Path(root).resolve()
        if not folder.is_dir():
            raise ArgumentError(f"root={os.fspath(root)!r}: give the folder of the checkout "
                                "the suite was made from")  # fmt: skip
        return cls(name=name, root=str(folder), workspace_root=str(folder), tasks=tasks,
                   description=description, extra=extra, environments=environments)  # fmt: skip

    def validate(self, workspace: Any = None, timeout: float = 120):  # -> pd.DataFrame
        """Run every task's hidden tests for real: at its start (they must fail) and with
        its reference solution staged (they must pass). One row per task."""
        from .validate import validate

        return validate(self, workspace, timeout)


def builtin_suite() -> Suite:
    """The suite shipped with shadowkernel: 20 bugs and features in 5 small projects."""
    return load_suite(BUILTIN)


def load_suite(path: str | os.PathLike[str] | None = None) -> Suite:
    """A suite from its folder (None: the built-in suite)."""
    root = Path(path) if path is not None else BUILTIN
    if not (root / "projects").is_dir() or not (root / "tasks").is_dir():
        raise FileNotFoundError(f"suite folder {os.fspath(root)!r} needs projects/ and tasks/ "
                                "folders (see shadowkernel.evals.suite)")  # fmt: skip
    meta = _read_toml(root / "suite.toml") if (root / "suite.toml").is_file() else {}
    tasks = tuple(load_task(d) for d in sorted((root / "tasks").iterdir()) if d.is_dir())
    ini = root / "pytest.ini"
    return Suite(
        name=str(meta.get("name", root.name)), root=str(root.resolve()),
        workspace_root=str((root / "projects").resolve()), tasks=tasks,
        description=str(meta.get("description", "")),
        pytest_ini=str(ini.resolve()) if ini.is_file() else None,
    )  # fmt: skip


def load_task(folder: str | os.PathLike[str]) -> Task:
    """One task from its folder; a malformed one comes back with `problem` set."""
    folder = Path(folder).resolve()
    projects = folder.parent.parent / "projects"
    try:
        return _load_task(folder, projects)
    except (OSError, ValueError, KeyError, TypeError, tomllib.TOMLDecodeError) as e:
        message = f"{type(e).__name__}: {e}" if not isinstance(e, ValueError) else str(e)
        return Task(id=folder.name, project="", statement="", files=(), solution=(),
                    hidden=str(folder / "hidden"), repro=None, folder=str(folder),
                    problem=f"task {folder.name!r} is malformed: {message}")  # fmt: skip


def _load_task(folder: Path, projects: Path) -> Task:
    data = _read_toml(folder / "task.toml")
    project = _field(data, "project", str)
    statement = _field(data, "statement", str).strip()
    if not (projects / project).is_dir():
        raise ValueError(f"project {project!r} is not a folder under {projects}")
    if not (folder / "hidden").is_dir() or not any((folder / "hidden").glob("test_*.py")):
        raise ValueError("hidden/ has no test_*.py: nothing would decide success")
    prefix = project + "/"
    files = tuple(prefix + f for f in _field(data, "files", list))
    try:
        solution = tuple(_prefixed(from_json(e), prefix) for e in data.get("solution", []))
    except AgentOutputError as e:
        raise ValueError(f"solution: {e}") from None
    repro = folder / "repro"
    return Task(
        id=str(data.get("id", folder.name)), project=project, statement=statement, files=files,
        solution=solution, hidden=str(folder / "hidden"),
        repro=str(repro) if repro.is_dir() else None, kind=str(data.get("kind", "bug")),
        folder=str(folder), digest=_digest(folder),
    )  # fmt: skip


def _read_toml(path: Path) -> dict:
    with open(path, "rb") as f:
        return tomllib.load(f)


def _field(data: dict, name: str, kind: type) -> Any:
    if name not in data:
        raise ValueError(f"task.toml has no {name!r}")
    if not isinstance(data[name], kind):
        raise ValueError(f"task.toml: {name!r} must be a {kind.__name__}")
    return data[name]


def _prefixed(edit: Edit, prefix: str) -> Edit:
    from ..agents.edits import Patch

    if isinstance(edit, Patch):
        return edit  # a patch names its own paths (relative to the workspace root)
    return replace(edit, path=prefix + edit.path)


def _digest(folder: Path) -> str:
    h = hashlib.blake2b(digest_size=8)
    for path in sorted(folder.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            h.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def suite_record(suite: Suite) -> dict[str, Any]:
    """A suite as plain JSON values, without what depends on the machine or the clock."""
    return {
        "name": suite.name, "description": suite.description,
        "extra": {k: v for k, v in suite.extra.items() if not k.startswith("seconds_")},
        "environments": {k: asdict(v) for k, v in sorted(suite.environments.items())},
        "tasks": [task_record(t) for t in suite.tasks],
    }  # fmt: skip


def task_record(task: Task) -> dict[str, Any]:
    record = {f.name: getattr(task, f.name) for f in fields(task)}
    record["solution"] = [to_json(e) for e in task.solution]
    return record


def task_from_record(record: dict[str, Any]) -> Task:
    """The inverse of `task_record` (JSON gave lists where the task holds tuples)."""
    values = {**record, "solution": tuple(from_json(e) for e in record["solution"]),
              "start": tuple((path, text) for path, text in record.get("start", ()))}  # fmt: skip
    for name in ("files", "fail_to_pass", "pass_to_pass", "visible_tests"):
        values[name] = tuple(record.get(name, ()))
    return Task(**values)


def environment_from_record(record: dict[str, Any]) -> Environment:
    return Environment(**{**record, "options": tuple(record["options"]),
                          "env": tuple((k, v) for k, v in record["env"])})  # fmt: skip
