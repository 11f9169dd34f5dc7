"""`swebench_suite`: SWE-bench instances over local git checkouts, one branch per task.

    suite = sk.swebench_suite("swe-bench-lite.jsonl",
                              {"astropy/astropy": {"path": "~/repos/astropy",
                                                   "venv": "~/repos/astropy/.venv"}})

Each instance (SWE-bench's own fields: `instance_id`, `repo`, `base_commit`,
`problem_statement`, `patch`, `test_patch`, `FAIL_TO_PASS`, `PASS_TO_PASS`; from a JSON list,
a JSONL file or any iterable of mappings, e.g. a `datasets` split) becomes a task whose
starting version is its base commit *shown through the shadow*: `git diff --name-status
BASE` lists what differs between the checkout's files and the base commit, and `git
cat-file --batch` gives the base's bytes, which are staged as overrides (a deleted file
where the base has none). No copy of the repository is made per task. `test_patch` is
staged only in the branch that grades a version, never in the agent's. The focus files are
those the reference `patch` touches (SWE-bench's "oracle" file setting).

A repository's environment is a venv (`venv`: its `bin/python` runs the tests), an
interpreter (`python`), and optionally a `setup` shell command run before every check.
Several repositories are served by one shadow over their common parent folder (put the
checkouts side by side); a task's paths are then prefixed with its checkout's folder.

Caveats: the SWE-bench data set is not downloaded here (this machine reaches only package
registries); load it where it is (notebooks/04 shows how). Test ids must be pytest ids (as
in most SWE-bench repositories; django's and sympy's own runners are not supported).
Untracked files of the checkout stay visible (ignored build outputs and venvs are what the
tests need); binary files that differ from the base, symlinks and submodules are not staged
(the task says so in `problem`). A checkout far from the base commit makes a large starting
version: keep it close (a `git worktree` per era).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..agents.edits import Patch
from ..errors import ArgumentError
from ..text import positions
from .suite import Environment, Suite, Task

FIELDS = ("instance_id", "repo", "base_commit", "problem_statement", "patch", "test_patch",
          "FAIL_TO_PASS", "PASS_TO_PASS")  # fmt: skip


@dataclass(frozen=True)
class Repo:
    """A local checkout of one repository and the environment its tests run in."""

    path: str
    python: str
    setup: str | None = None
    autoload: bool = False


def repo(value: Any, name: str) -> Repo:
    """A Repo from a path or a mapping with `path` and optionally `venv`/`python`/`setup`."""
    spec = {"path": value} if isinstance(value, str | os.PathLike) else value
    if isinstance(spec, Repo):
        return spec
    if not isinstance(spec, Mapping) or "path" not in spec:
        raise ArgumentError(f"repos[{name!r}]={value!r}: give the checkout's path, or a mapping "
                            "with 'path' and optionally 'venv', 'python', 'setup'")  # fmt: skip
    path = os.path.realpath(os.path.expanduser(os.fspath(spec["path"])))
    if not os.path.isdir(os.path.join(path, ".git")) and not os.path.isfile(
            os.path.join(path, ".git")):  # fmt: skip
        raise ArgumentError(f"repos[{name!r}]: {path} is not a git checkout")
    python = spec.get("python") or (os.path.join(os.path.expanduser(spec["venv"]), "bin", "python")
                                    if spec.get("venv") else sys.executable)  # fmt: skip
    setup = spec.get("setup")
    return Repo(path, os.fspath(python), str(setup) if setup else None,
                bool(spec.get("autoload", False)))  # fmt: skip


# -- instances ------------------------------------------------------------------------------------


def load_instances(instances: Any) -> list[dict[str, Any]]:
    """Instances from a .json/.jsonl path or an iterable of mappings, checked for the fields."""
    if isinstance(instances, str | os.PathLike):
        rows = _read_rows(instances)
    elif isinstance(instances, Iterable) and not isinstance(instances, Mapping):
        rows = [dict(r) for r in instances]
    else:
        raise ArgumentError(f"instances={instances!r}: give a .json or .jsonl path or a list of "
                            "SWE-bench instances (mappings)")  # fmt: skip
    for row in rows:
        missing = [f for f in FIELDS if f not in row]
        if missing:
            raise ArgumentError(f"instances: {row.get('instance_id', '?')!r} lacks "
                                f"{', '.join(missing)} (SWE-bench's fields: "
                                f"{', '.join(FIELDS)})")  # fmt: skip
    return rows


def _read_rows(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    try:
        text = Path(path).expanduser().read_text()
        if text.lstrip().startswith("["):
            return list(json.loads(text))
        # JSON strings may hold a raw \u2028 or \x85, where str.splitlines would cut a row
        return [json.loads(line) for line in positions.lines(text) if line.strip()]
    except (OSError, json.JSONDecodeError) as e:
        raise ArgumentError(f"instances={os.fspath(path)!r}: {e}; give a readable .json list "
                            "or .jsonl file of SWE-bench instances") from None  # fmt: skip


def listed_tests(value: Any) -> tuple[str, ...]:
    """SWE-bench stores test lists as JSON strings; accept those and plain lists."""
    items = json.loads(value) if isinstance(value, str) else value
    return tuple(str(t) for t in items)


def patch_paths(patch: str) -> tuple[str, ...]:
    """The files a unified diff changes (its `+++ b/...` names, or `--- a/...` for deletions)."""
    paths = []
    for old, new in re.findall(r"^--- (\S+).*\n\+\+\+ (\S+)", patch, re.M):
        name = new if new != "/dev/null" else old
        paths.append(name[2:] if name[:2] in ("a/", "b/") else name)
    return tuple(dict.fromkeys(paths))


def prefixed_patch(patch: str, prefix: str) -> str:
    """The diff with its paths under `prefix/` (a checkout below the shadow's root)."""
    if not prefix:
        return patch
    patch = re.sub(r"^(---|\+\+\+) ([ab])/", rf"\1 \2/{prefix}/", patch, flags=re.M)
    return re.sub(r"^diff --git a/(\S+) b/(\S+)", rf"diff --git a/{prefix}/\1 b/{prefix}/\2",
                  patch, flags=re.M)  # fmt: skip


# -- the base commit, through git plumbing --------------------------------------------------------


def _git(path: str, *args: str, data: bytes | None = None) -> bytes:
    done = subprocess.run(["git", "-C", path, *args], input=data, capture_output=True,
                          timeout=120)  # fmt: skip
    if done.returncode != 0:
        raise ArgumentError(f"git {' '.join(args[:3])} in {path}: "
                            f"{done.stderr.decode(errors='replace').strip()}")  # fmt: skip
    return done.stdout


def base_overrides(path: str, commit: str) -> tuple[tuple[tuple[str, str | None], ...], list[str]]:
    """(path -> base text or None, problems): what makes the checkout's files read as
    `commit`. Compares the commit with the working tree (`git diff --name-status`)."""
    _git(path, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}")
    listing = _git(path, "diff", "--no-renames", "--no-ext-diff", "--name-status", "-z", commit,
                   "--").split(b"\0")  # fmt: skip
    entries = [(listing[i].decode(), listing[i + 1].decode())
               for i in range(0, len(listing) - 1, 2)]  # fmt: skip
    wanted = [p for status, p in entries if status != "A"]
    blobs = _cat_files(path, commit, wanted)
    overrides: list[tuple[str, str | None]] = []
    problems: list[str] = []
    for status, rel_path in sorted(entries, key=lambda e: e[1]):
        if status == "A":
            overrides.append((rel_path, None))  # not in the base: hidden
            continue
        data = blobs.get(rel_path)
        try:
            overrides.append((rel_path, data.decode("utf-8") if data is not None else None))
        except UnicodeDecodeError:
            problems.append(f"{rel_path} differs from the base commit and is not text")
    return tuple(overrides), problems


def _cat_files(path: str, commit: str, paths: list[str]) -> dict[str, bytes]:
    """The base commit's bytes of `paths`, in one `git cat-file --batch`."""
    if not paths:
        return {}
    out = _git(path, "cat-file", "--batch", data="".join(f"{commit}:{p}\n" for p in paths).encode())
    blobs: dict[str, bytes] = {}
    at = 0
    for rel_path in paths:
        end = out.index(b"\n", at)
        header = out[at:end].split()
        at = end + 1
        if len(header) < 3 or header[1] != b"blob":
            continue  # missing, a submodule or a tree: not staged
        size = int(header[2])
        blobs[rel_path] = out[at : at + size]
        at += size + 1
    return blobs


# -- the suite ------------------------------------------------------------------------------------


def swebench_suite(instances: Any, repos: Mapping[str, Any], *, visible: int = 20, seed: int = 0,
                   name: str = "swe-bench") -> Suite:  # fmt: skip
    """A suite of SWE-bench `instances` over the local checkouts in `repos` (repo name ->
    path or {"path", "venv" | "python", "setup"}). `visible`: how many PASS_TO_PASS tests the
    agent's own test run shows (seeded sample). See the module docstring."""
    rows = load_instances(instances)
    if not isinstance(repos, Mapping) or not repos:
        raise ArgumentError(f"repos={repos!r}: give a mapping of repository name (e.g. "
                            "'astropy/astropy') to its local checkout")  # fmt: skip
    used = sorted({r["repo"] for r in rows})
    unknown = [r for r in used if r not in repos]
    if unknown:
        raise ArgumentError(f"repos: no checkout for {', '.join(unknown)}; add "
                            f"repos[{unknown[0]!r}] = 'path/to/checkout'")  # fmt: skip
    checkouts = {r: repo(repos[r], r) for r in used}
    root = _common_root([c.path for c in checkouts.values()])
    projects = {r: os.path.relpath(c.path, root) if c.path != root else ""
                for r, c in checkouts.items()}  # fmt: skip
    rng = random.Random(seed)
    tasks = tuple(_task(row, checkouts[row["repo"]], projects[row["repo"]], visible, rng)
                  for row in rows)  # fmt: skip
    envs = {projects[r]: Environment(c.python, setup=c.setup, autoload=c.autoload)
            for r, c in checkouts.items()}  # fmt: skip
    return Suite(name=name, root=root, workspace_root=root, tasks=tasks,
                 description=f"{len(tasks)} SWE-bench instances over {', '.join(used)}",
                 environments=envs)  # fmt: skip


def _common_root(paths: list[str]) -> str:
    if len(paths) == 1:
        return paths[0]
    root = os.path.commonpath(paths)
    if root in ("/", os.path.expanduser("~")):
        raise ArgumentError(f"repos: the checkouts {paths} share no folder but {root!r}; put "
                            "them side by side in one folder (the shadow proxies it)")  # fmt: skip
    return root


def _task(row: dict[str, Any], checkout: Repo, project: str, visible: int, rng: random.Random
          ) -> Task:  # fmt: skip
    prefix = project + "/" if project else ""
    problems: list[str] = []
    try:
        start, problems = base_overrides(checkout.path, row["base_commit"])
    except ArgumentError as e:
        start, problems = (), [str(e)]
    f2p, p2p = listed_tests(row["FAIL_TO_PASS"]), listed_tests(row["PASS_TO_PASS"])
    shown = tuple(sorted(rng.sample(p2p, min(visible, len(p2p)))))
    if not f2p:
        problems.append("FAIL_TO_PASS is empty: nothing would decide success")
    return Task(
        id=str(row["instance_id"]), project=project, statement=str(row["problem_statement"]),
        files=tuple(prefix + p for p in patch_paths(row["patch"])),
        solution=(Patch(prefixed_patch(row["patch"], project)),), hidden="", repro=None,
        start=tuple((prefix + p, t) for p, t in start), fail_to_pass=f2p, pass_to_pass=p2p,
        visible_tests=shown, test_patch=prefixed_patch(row["test_patch"], project),
        origin=f"SWE-bench {row['instance_id']} at {row['base_commit'][:12]}",
        problem="; ".join(problems) or None,
        digest=hashlib.blake2b(json.dumps([row.get(f) for f in FIELDS], default=str).encode(),
                               digest_size=8).hexdigest(),
    )  # fmt: skip
