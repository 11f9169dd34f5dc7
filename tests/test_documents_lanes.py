"""Lanes of single-file linters (ruff) answer from the user's folder, the branch's files given
as open documents, and mount only when a job needs the mount: on a real library their answers
equal those of lanes that mount at once, a branch changing what the linter reads on the disk
(its config, a new package marker) is linted on the mount, and only where a trial FUSE mount
succeeds (root, or a user with a setuid fusermount3) does a workspace open lanes this way:
elsewhere a mount that fails must fail at the open, where the workspace falls back to
documents mode. Probed and used as root and as a normal user, in real processes."""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import tempfile
from pathlib import Path

import pytest
from overlay_helpers import needs_fuse
from run_helpers import as_nobody, other_users_problem, run_as

import shadowkernel as sk
from shadowkernel.lsp import available_servers
from shadowkernel.run import capabilities

needs_ruff = pytest.mark.skipif(not available_servers().get("ruff"), reason="ruff missing")
needs_trial_mount = pytest.mark.skipif(
    not capabilities.fuse_mounts(),
    reason="lanes mount on demand only where a trial FUSE mount succeeds",
)
FILES = ("more_itertools/recipes.py", "more_itertools/more.py")


def folder_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def seeded_edit(text: str, rng: random.Random, agent: int, step: int) -> str:
    """One of the edits agents make: an error of this agent's, an unused import, a comment
    appended to a line, a line's indentation-neutral trailing spaces, or a deleted line."""
    lines = text.splitlines(keepends=True)
    at = rng.randrange(len(lines))
    kind = rng.randrange(5)
    if kind == 0:
        top = [i for i, x in enumerate(lines) if x.startswith("def ")]
        lines.insert(rng.choice(top), f"zz_{agent}_{step} = undefined_{agent}_{step}\n")
    elif kind == 1:
        lines.insert(0, "import json\n")
    elif kind == 2:
        lines[at] = lines[at].rstrip("\n") + f"  # note {agent}.{step}\n"
    elif kind == 3:
        lines[at] = lines[at].rstrip("\n") + "   \n"
    elif lines[at].strip() == "":
        del lines[at]
    return "".join(lines)


def lint_rows(branch: sk.Branch, paths: list[str]) -> list[tuple]:
    report = branch.lint_report(paths, fixes=False)
    return [(lint.path, lint.line, lint.column, lint.code, lint.message, new)
            for lint, new in zip(report.lints, report.new, strict=True)]  # fmt: skip


@needs_fuse
@needs_ruff
@needs_trial_mount
def test_on_demand_lanes_answer_as_mounted_ones_and_never_mount(library: Path) -> None:
    """Seeded random edits by three agents on two real modules, each answer compared with the
    same branch's answer on lanes that mount at once (mode="fuse"): equal, new flags included;
    no overlay process ever started, and the user's folder unchanged."""
    before, rng = folder_digest(library), random.Random(20)
    texts = {path: (library / path).read_text() for path in FILES}
    with (
        sk.Workspace(library, servers=["ruff"], state=None) as on_demand,
        sk.Workspace(library, servers=["ruff"], state=None, mode="fuse") as mounted,
    ):
        assert on_demand.mode == mounted.mode == "fuse"
        assert "each lane mounts when a job needs it" in on_demand.mode_reason
        assert "when a job needs it" not in mounted.mode_reason
        pairs = [(on_demand.branch(f"agent-{i}"), mounted.branch(f"agent-{i}")) for i in range(3)]
        compared = 0
        for step in range(4):
            for agent, (lazy, eager) in enumerate(pairs):
                path = FILES[(agent + step) % 2]
                texts[path] = seeded_edit(texts[path], rng, agent, step)
                lazy.write(path, texts[path])
                eager.write(path, texts[path])
                rows = lint_rows(lazy, [path])
                assert rows == lint_rows(eager, [path]), (agent, step, path)
                compared += len(rows)
        assert compared > 0
        assert not any(shadow.started for shadow in on_demand.shadows)
        assert all(shadow.started for shadow in mounted.shadows)
        lanes = on_demand._scheduler.lanes
        assert sum(lane.mount_switches for lane in lanes) == 0
    assert folder_digest(library) == before


@needs_fuse
@needs_ruff
@pytest.mark.parametrize("mode", ["auto", "fuse"])
def test_what_a_linter_reads_on_the_disk_is_linted_on_the_mount(tmp_path: Path, mode: str) -> None:
    """A branch's ruff.toml and a branch's new `__init__.py` change what ruff reads from the
    disk (its rules; whether the module is in a package, rule INP001): their lints come from
    the mount, which shows them. Served from the documents alone (the folder, or a mount left
    behind), INP001 would stay."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("import os\n")
    (tmp_path / "ruff.toml").write_text('[lint]\nselect = ["F", "INP"]\n')
    before = folder_digest(tmp_path)
    with sk.Workspace(tmp_path, servers=["ruff"], lanes=1, state=None, mode=mode) as ws:
        plain, configured, packaged = ws.branch("plain"), ws.branch("configured"), ws.branch("p")
        for branch in (plain, configured, packaged):
            branch.write("pkg/mod.py", "import os\nx = 1\n")
        configured.write("ruff.toml", '[lint]\nselect = ["E"]\n')
        packaged.write("pkg/__init__.py", "")
        codes = {
            b.name: sorted(set(b.lint(["pkg/mod.py"])["code"]))
            for b in (plain, packaged, configured)
        }
        assert codes == {"plain": ["F401", "INP001"], "configured": [], "p": ["F401"]}
        assert ws.shadows[0].started  # the mount served the last two
        assert sorted(set(plain.lint(["pkg/mod.py"])["code"])) == ["F401", "INP001"]
    assert folder_digest(tmp_path) == before


@needs_fuse
@needs_ruff
@needs_trial_mount
def test_a_run_on_an_on_demand_lane_mounts_it(tmp_path: Path) -> None:
    """A run through the shared mount (mode="fuse") holds a lane and needs its mount: the
    lane's lazy shadow mounts then, and the run sees the branch's files."""
    (tmp_path / "m.py").write_text("import os\n")
    with sk.Workspace(tmp_path, servers=["ruff"], lanes=1, state=None) as ws:
        branch = ws.branch("a")
        branch.write("m.py", "print('from the branch')\n")
        assert set(branch.lint(["m.py"])["code"]) == set()
        assert not ws.shadows[0].started
        result = branch.run(["python3", "m.py"], mode="fuse")
        assert result.exit_code == 0 and result.stdout == "from the branch\n"
        assert ws.shadows[0].started


ON_DEMAND = """
import sys, shadowkernel as sk
with sk.Workspace(sys.argv[1], servers=["ruff"], state=None) as ws:
    branch = ws.branch("a")
    branch.write("pkg/mod.py", "import os\\nx = undefined_name\\n")
    codes = sorted(set(branch.lint(["pkg/mod.py"])["code"]))
    print(codes, any(shadow.started for shadow in ws.shadows), ws.mode)
"""


def _other_users_mount_problem() -> str | None:
    """Why these tests cannot mount as other users here (None: they can)."""
    if problem := other_users_problem():
        return problem
    program = shutil.which("fusermount3")
    if program is None or not os.stat(program).st_mode & 0o4000:
        return "a normal user mounts with a setuid fusermount3"
    return None


as_users_who_mount = pytest.mark.skipif(
    _other_users_mount_problem() is not None, reason=_other_users_mount_problem() or ""
)


def _probe(prefix: list[str]) -> str:
    return run_as(
        prefix, "-c", "from shadowkernel.run import capabilities as c; print(c.fuse_mounts())"
    )


@needs_fuse
@as_users_who_mount
def test_the_trial_mount_answers_as_a_real_mount_would(tmp_path: Path) -> None:
    """Root mounts; root without CAP_SYS_ADMIN (a container) does not; a normal user mounts
    through the setuid fusermount3, unless setuid programs are refused (no_new_privs, as in
    many sandboxes). Where it says no, lanes mount at the open, which falls back to documents
    mode when the mount fails (tests/test_fallback_child.py)."""
    assert _probe([]) == "True"
    assert _probe(["setpriv", "--bounding-set=-sys_admin", "--inh-caps=-all"]) == "False"
    assert _probe(as_nobody(tmp_path)) == "True"
    assert _probe(as_nobody(tmp_path, "--no-new-privs")) == "False"


@needs_fuse
@needs_ruff
@as_users_who_mount
def test_a_normal_users_ruff_lanes_answer_before_any_mount(tmp_path: Path) -> None:
    """As the user `nobody`: a ruff workspace on a project it may read answers a branch's lint
    exactly, from the folder, without starting any overlay, in mode "fuse"."""
    project = Path(tempfile.mkdtemp(prefix="sk-nobody-"))
    try:
        (project / "pkg").mkdir()
        (project / "pkg" / "mod.py").write_text("import os\n")
        (project / "ruff.toml").write_text('[lint]\nselect = ["F"]\n')  # not /tmp's, if any
        for path in (project, project / "pkg"):
            path.chmod(0o755)
        for path in (project / "pkg" / "mod.py", project / "ruff.toml"):
            path.chmod(0o644)
        before = folder_digest(project)
        found = run_as(as_nobody(tmp_path), "-c", ON_DEMAND, str(project))
        assert found == "['F401', 'F821'] False fuse"
        assert folder_digest(project) == before
    finally:
        shutil.rmtree(project, ignore_errors=True)
