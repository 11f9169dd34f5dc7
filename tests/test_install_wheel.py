"""What `pip install shadowkernel` gets: the sdist and the wheel built from it (as `uv build`
makes a release) carry every file the package reads at run time, and nothing from tests or
caches; an installed copy finds its own data (the demo notebooks) where a checkout is not.

The installed copy is the wheel unpacked into a folder put first on PYTHONPATH: the layout of
site-packages, imported with this environment's dependencies (no second install)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BUILT = REPO / "shadowkernel" / "labextension"
DATA = "shadowkernel-{version}.data/data/share/jupyter"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from the sdist, as `uv build` builds a release."""
    uv = shutil.which("uv")
    if uv is None or not (BUILT / "static" / "style.js").exists():
        pytest.skip("needs uv and a built extension (bash .ci/setup provides both)")
    out = tmp_path_factory.mktemp("dist")
    env = {**os.environ, "XDG_STATE_HOME": str(out / "state")}
    result = subprocess.run([uv, "build", "--out-dir", str(out), str(REPO)], env=env,
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr
    [sdist] = out.glob("shadowkernel-*.tar.gz")
    [built] = out.glob("shadowkernel-*.whl")
    return built


def _names(wheel: Path) -> list[str]:
    return zipfile.ZipFile(wheel).namelist()


def _version(wheel: Path) -> str:
    return wheel.name.split("-")[1]


def test_wheel_ships_every_tracked_package_file(wheel: Path) -> None:
    """Every file git tracks below shadowkernel/ (code, the task suite's TOML, the pyfuse3
    patch, the lab's page_config, the kernelspec) is in the wheel at the same place."""
    tracked = subprocess.run(["git", "ls-files", "shadowkernel"], cwd=REPO, check=True,
                             capture_output=True, text=True).stdout.split()  # fmt: skip
    assert len(tracked) > 100, tracked
    missing = sorted(set(tracked) - set(_names(wheel)))
    assert not missing, f"tracked files not in the wheel: {missing}"


def test_wheel_ships_the_notebooks_and_their_sample_project(wheel: Path) -> None:
    """`shadowkernel tour` and `shadowkernel lab` need the demo notebooks and the sample
    project they open; in the wheel they are shadowkernel/notebooks."""
    names = set(_names(wheel))
    tracked = subprocess.run(["git", "ls-files", "notebooks"], cwd=REPO, check=True,
                             capture_output=True, text=True).stdout.split()  # fmt: skip
    assert "notebooks/01_tour.ipynb" in tracked and "notebooks/sample_project/main.py" in tracked
    missing = sorted(f"shadowkernel/{n}" for n in tracked if f"shadowkernel/{n}" not in names)
    assert not missing, f"not in the wheel: {missing}"


def test_wheel_ships_the_prebuilt_extension_and_kernelspec(wheel: Path) -> None:
    data = DATA.format(version=_version(wheel))
    shared = {n.removeprefix(f"{data}/") for n in _names(wheel) if n.startswith(f"{data}/")}
    ext = "labextensions/shadowkernel-timeline"
    assert {f"{ext}/package.json", f"{ext}/install.json", f"{ext}/static/style.js",
            "kernels/shadowkernel/kernel.json"} <= shared, sorted(shared)  # fmt: skip
    assert any(re.fullmatch(rf"{ext}/static/remoteEntry\.[0-9a-f]+\.js", n) for n in shared)
    built = {p.relative_to(BUILT).as_posix() for p in BUILT.rglob("*") if p.is_file()}
    assert {f"{ext}/{n}" for n in built} <= shared, "a built asset of the extension is missing"


def test_wheel_marks_the_package_typed(wheel: Path) -> None:
    """PEP 561: the typed layers are checked with mypy --strict (pyproject.toml); py.typed lets
    a user's type checker use those annotations."""
    assert "shadowkernel/py.typed" in _names(wheel)


def test_wheel_holds_nothing_from_tests_or_caches(wheel: Path) -> None:
    # The sample project's and the task suite's projects' tests/ are data the demos run.
    data = ("shadowkernel/notebooks/sample_project/", "shadowkernel/evals/suite/projects/")
    bad = [n for n in _names(wheel) if not n.startswith(data) and (
        re.search(r"(^|/)(tests?|test-artifacts|benchmarks|node_modules|\.ipynb_checkpoints|"
                  r"__pycache__|\.pytest_cache|\.mypy_cache|\.ruff_cache)/", n)
        or n.endswith((".pyc", ".pyo", ".orig", ".rej", "~")))]  # fmt: skip
    assert not bad, bad
    assert not [n for n in _names(wheel) if n.startswith(data) and "__pycache__" in n]


def test_installed_package_finds_its_notebooks(wheel: Path, tmp_path: Path) -> None:
    """Installed (no checkout around it), the notebook commands' default folder holds the tour
    and its sample project: `shadowkernel tour` ran nbformat.read on site-packages/notebooks,
    which no install has (FileNotFoundError)."""
    site = tmp_path / "site-packages"
    zipfile.ZipFile(wheel).extractall(site)
    code = ("import shadowkernel, sys; from shadowkernel.kernel import commands; "
            "print(shadowkernel.__file__); print(commands.NOTEBOOKS); "
            "print(commands.served_notebooks(commands.NOTEBOOKS))")  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(site), "XDG_STATE_HOME": str(tmp_path / "state")}
    result = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()  # the package, the notebooks, a note of the copy, it
    package, notebooks, served = Path(lines[0]), Path(lines[1]), Path(lines[-1])
    assert lines[2] == f"copied the demo notebooks to {served}", lines
    assert package.is_relative_to(site), package  # the unpacked wheel, not the checkout
    assert (notebooks / "01_tour.ipynb").is_file(), notebooks
    assert (notebooks / "sample_project" / "inventory" / "stock.py").is_file(), notebooks
    # `shadowkernel lab` serves a copy in the user's folder: saves never land in site-packages
    assert served == tmp_path / "shadowkernel-notebooks", result.stdout
    assert (served / "sample_project" / "inventory" / "stock.py").is_file()
