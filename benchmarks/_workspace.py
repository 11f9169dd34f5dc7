"""The benchmark workspace: a realistic project folder, built once and cached.

A source tree (a few hundred generated modules in packages, a test folder, a git repository
with one commit) plus a venv inside it (`.venv`, made with `uv`) holding numpy and pandas
(the import workload) and a few more data-science packages, so the tree has the tens of
thousands of files a real project with its venv has. Packages are copied, not hardlinked
from uv's cache, and byte-compiled at install time, so importing never writes.

The build is deterministic apart from package versions; a marker file next to the workspace
records what was built, and a workspace whose marker matches is reused as it is.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import stat
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

BENCH_ROOT = Path("/tmp/shadowkernel-bench")
WORKSPACE = BENCH_ROOT / "workspace"
MARKER = BENCH_ROOT / "workspace.json"
LAYOUT = 1  # bump when the generated tree changes, so cached workspaces are rebuilt

# numpy and pandas at the versions this project runs; the rest make the venv realistically big.
BALLAST = ["scipy", "sympy", "matplotlib", "ipython", "jedi"]
PACKAGES = ["app", "core", "io", "models"]
SUBPACKAGES = ["api", "cli", "config", "db", "jobs", "utils"]
MODULES_PER_SUBPACKAGE = 12
SCRATCH_PREFIX = ".bench-"  # what workloads create natively; ignored by git, removed on start

GITIGNORE = f".venv/\n__pycache__/\n{SCRATCH_PREFIX}*/\n"


@dataclass(frozen=True)
class Workspace:
    root: Path
    files: list[str]  # regular files, relative to the root, in walk order
    symlinks: int
    directories: int
    bytes: int  # sum of the regular files' sizes
    packages: dict[str, str]  # what the venv holds, name -> version

    @property
    def entries(self) -> int:
        return len(self.files) + self.symlinks + self.directories


def ensure(log=print) -> Workspace:
    """The cached workspace, built first if it is missing or stale."""
    wanted = _wanted_packages()
    marker = _read_marker()
    if not (marker and marker.get("layout") == LAYOUT and marker.get("wanted") == wanted
            and WORKSPACE.is_dir()):  # fmt: skip
        log(f"building the workspace at {WORKSPACE} (once; cached afterwards) ...")
        _build(wanted, log)
        marker = _read_marker()
    assert marker is not None
    remove_scratch(WORKSPACE)
    return Workspace(WORKSPACE, *inventory(WORKSPACE), marker["installed"])


def remove_scratch(root: Path) -> None:
    """Leftovers of native write workloads (an interrupted run leaves them behind)."""
    for entry in root.glob(f"{SCRATCH_PREFIX}*"):
        shutil.rmtree(entry, ignore_errors=True)


def inventory(root: Path) -> tuple[list[str], int, int, int]:
    """(regular files, symlinks, directories, bytes of the regular files) below `root`."""
    files: list[str] = []
    symlinks = directories = size = 0
    for here, dirs, names in os.walk(root):
        for name in dirs + names:
            st = os.lstat(os.path.join(here, name))
            if stat.S_ISLNK(st.st_mode):
                symlinks += 1
            elif stat.S_ISDIR(st.st_mode):
                directories += 1
            elif stat.S_ISREG(st.st_mode):
                files.append(os.path.relpath(os.path.join(here, name), root))
                size += st.st_size
    return files, symlinks, directories, size


def _wanted_packages() -> list[str]:
    return [f"numpy=={metadata.version('numpy')}", f"pandas=={metadata.version('pandas')}",
            *BALLAST]  # fmt: skip


def _read_marker() -> dict | None:
    try:
        return json.loads(MARKER.read_text())
    except (OSError, ValueError):
        return None


def _build(wanted: list[str], log) -> None:
    MARKER.unlink(missing_ok=True)
    shutil.rmtree(WORKSPACE, ignore_errors=True)
    WORKSPACE.mkdir(parents=True)
    _write_sources(WORKSPACE)
    _git_commit(WORKSPACE)
    venv = WORKSPACE / ".venv"
    # The base interpreter, not a venv's: the workspace venv must stand on its own.
    python = getattr(sys, "_base_executable", sys.executable)
    _run(["uv", "venv", "-q", "--python", python, str(venv)])
    env = dict(os.environ, VIRTUAL_ENV=str(venv))
    log(f"installing {' '.join(wanted)} into {venv} ...")
    _run(["uv", "pip", "install", "-q", "--link-mode=copy", "--compile-bytecode", *wanted],
         env=env)  # fmt: skip
    listing = _run(["uv", "pip", "list", "--format=json"], env=env)
    installed = {p["name"]: p["version"] for p in json.loads(listing)}
    MARKER.write_text(json.dumps({"layout": LAYOUT, "wanted": wanted, "installed": installed}))


def _run(command: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}): {done.stderr}")
    return done.stdout


def _git_commit(root: Path) -> None:
    env = dict(os.environ, GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@example.com",
               GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@example.com",
               GIT_AUTHOR_DATE="2024-01-01T00:00:00Z",
               GIT_COMMITTER_DATE="2024-01-01T00:00:00Z")  # fmt: skip
    _run(["git", "init", "-q", "-b", "main"], env=env, cwd=root)
    _run(["git", "add", "-A"], env=env, cwd=root)
    _run(["git", "commit", "-q", "-m", "Initial import"], env=env, cwd=root)


# -- the generated source tree ---------------------------------------------------------------


def _write_sources(root: Path) -> None:
    rng = random.Random(20240101)
    (root / ".gitignore").write_text(GITIGNORE)
    (root / "README.md").write_text("# bench-project\n\nA generated project for benchmarks.\n")
    (root / "pyproject.toml").write_text(
        textwrap.dedent("""\
        [project]
        name = "bench-project"
        version = "0.1.0"
        dependencies = ["numpy", "pandas"]
        """)
    )
    modules = []
    for package in PACKAGES:
        for sub in SUBPACKAGES:
            folder = root / "src" / package / sub
            folder.mkdir(parents=True)
            (folder / "__init__.py").write_text(f'"""{package}.{sub}."""\n')
            for index in range(MODULES_PER_SUBPACKAGE):
                name = f"{sub}_{index:02d}"
                modules.append(f"{package}.{sub}.{name}")
                (folder / f"{name}.py").write_text(_module(rng, modules))
        (root / "src" / package / "__init__.py").write_text(f'"""The {package} package."""\n')
    tests = root / "tests"
    tests.mkdir()
    for index, module in enumerate(rng.sample(modules, 40)):
        (tests / f"test_{index:02d}.py").write_text(_test(rng, module))


def _module(rng: random.Random, earlier: list[str]) -> str:
    imports = sorted(set(rng.sample(earlier[:-1], min(3, len(earlier) - 1))))
    lines = ['"""Generated module: helpers and a small class."""', "", "from __future__ import "
             "annotations", "", "import dataclasses", "import functools", ""]  # fmt: skip
    lines += [f"import {m}  # noqa: F401" for m in imports]
    for index in range(rng.randint(6, 14)):
        lines += ["", "", *_function(rng, f"compute_{index}")]
    lines += ["", "", "@dataclasses.dataclass", "class Record:", '    """A row."""', "",
              "    key: str", "    value: float = 0.0", "", "    @functools.cached_property",
              "    def score(self) -> float:", "        return self.value * 2 + len(self.key)",
              ""]  # fmt: skip
    return "\n".join(lines)


def _function(rng: random.Random, name: str) -> list[str]:
    body = [f"def {name}(values: list[float], scale: float = {rng.randint(1, 9)}.0) -> float:",
            f'    """Sum of values scaled by {name}\'s factor."""', "    total = 0.0",
            "    for value in values:"]  # fmt: skip
    for _ in range(rng.randint(2, 6)):
        op = rng.choice(["+=", "-=", "*="])
        body.append(f"        total {op} value * scale / {rng.randint(2, 97)}")
    body.append("    return total")
    return body


def _test(rng: random.Random, module: str) -> str:
    return textwrap.dedent(f"""\
        from {module} import Record, compute_0


        def test_compute():
            assert isinstance(compute_0([1.0, 2.0, {rng.randint(1, 9)}.0]), float)


        def test_record():
            assert Record("k", 1.0).score == 3.0
        """)
