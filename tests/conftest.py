from __future__ import annotations

import os
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from overlay_helpers import FALLBACK_CHILD, HAS_FUSE, make_project

from shadowkernel import userdirs


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """In the fallback child, skip what documents mode does differently on purpose
    (`unless="namespaces"`: only where no private namespace can be made). Under xdist
    (`--dist loadscope`, see pyproject.toml) a file's tests stay on one worker, so its module
    fixtures (servers, kernels, mounts) start once; a test class is a scope of its own, for
    tests that should each have a worker. Files holding a slow test go first (each keeps its
    order), so the longest ones do not start last and hold up the end of the run."""
    from shadowkernel.run.capabilities import probe

    _slow_files_first(items)
    for item in items:
        mark = item.get_closest_marker("fallback")
        spared = mark and mark.kwargs.get("unless") == "namespaces" and probe().namespaces is None
        if FALLBACK_CHILD and mark and not spared:
            item.add_marker(pytest.mark.skip(reason=f"fallback differs: {mark.args[0]}"))


def _slow_files_first(items: list[pytest.Item]) -> None:
    def file(item: pytest.Item) -> str:
        return item.nodeid.split("::")[0]

    slow = {file(item) for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: file(item) not in slow)


def pytest_configure(config: pytest.Config) -> None:
    """Branches are durable by default (under $XDG_STATE_HOME): the tests keep theirs in a
    temporary state home, never in ~/.local/state; the fixtures below give each module and
    each test its own, so no test restores another's branches."""
    if not hasattr(config, "workerinput"):  # xdist's workers inherit the temporary one
        home = userdirs.state_home()
        config.stash[_USER_STATE] = home, _listing(home)
    os.environ["XDG_STATE_HOME"] = _SESSION_STATE.name


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A server started with a minimal environment (the MCP SDK's, the Inspector's) keeps its
    branches in the user's state home unless handed the test's: a later run at the same
    temporary path then restores them. Fail the run that leaked, not the one that trips."""
    if _USER_STATE not in session.config.stash:  # a worker
        return
    home, before = session.config.stash[_USER_STATE]
    leaked = sorted(_listing(home) - before)
    if leaked:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        print(f"\nnew in the user's state home {home} during the run: {', '.join(leaked)} "
              "(a server started without the test's XDG_STATE_HOME?)")  # fmt: skip


def _listing(folder: Path) -> set[str]:
    return set(os.listdir(folder)) if folder.is_dir() else set()


_SESSION_STATE = tempfile.TemporaryDirectory(prefix="shadowkernel-test-state-")  # gone at exit
_USER_STATE = pytest.StashKey[tuple[Path, set[str]]]()


@pytest.fixture(autouse=True, scope="module")
def _module_state_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
        yield


@pytest.fixture(autouse=True)
def _test_state_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))


@pytest.fixture(autouse=True)
def _sigint_kept() -> Iterator[None]:
    """A test, or a fixture it started, that leaves this process's SIGINT changed fails (and
    the handler is put back): every program a later test starts would inherit it, and one
    started with SIGINT ignored no longer stops on Ctrl-C."""
    before = signal.getsignal(signal.SIGINT)
    yield
    after = signal.getsignal(signal.SIGINT)
    if after != before:
        signal.signal(signal.SIGINT, before)
        pytest.fail(f"SIGINT left as {after!r}, was {before!r}")


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real library: more-itertools 11.2.1's sdist from PyPI (cached after the first
    download), unpacked afresh for each test module; skipped only offline with no cache."""
    from shadowkernel.errors import ShadowError
    from shadowkernel.evals import pypi

    try:
        return pypi.unpack("more-itertools", "11.2.1", tmp_path_factory.mktemp("pypi"))
    except ShadowError as error:
        pytest.skip(f"more-itertools 11.2.1 unavailable: {error}")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "project")


@pytest.fixture
def shadow(project: Path) -> Iterator[object]:
    if not HAS_FUSE:
        pytest.skip("needs /dev/fuse and fusermount3 (apt-get install fuse3)")
    from shadowkernel.overlay.shadow import Shadow

    with Shadow(project) as sh:
        yield sh
