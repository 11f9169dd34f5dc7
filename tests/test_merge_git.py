"""Merges equal git's: `text.merge.merge_file` and `ws.merge_check` against `git merge-file -p`
over real files (more-itertools' sources) and seeded random edit pairs."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from overlay_helpers import needs_fuse

import shadowkernel as sk
from shadowkernel.evals import pypi
from shadowkernel.text import linediff, merge

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

LABELS = ("a", "base", "b")
CASES = 400


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    top = pypi.unpack("more-itertools", "11.2.1", tmp_path_factory.mktemp("sdist"))
    files = sorted(top.rglob("*.py")) + sorted(top.rglob("*.rst"))
    return [f.read_bytes() for f in files if f.stat().st_size > 200]


def edited(rng: random.Random, lines: list[bytes], around: int) -> list[bytes]:
    """`lines` with 1 to 4 edits (replace, delete, insert, duplicate a nearby line), each near
    `around` half the time, so both sides of a pair often touch neighbouring lines."""
    out = list(lines)
    for _ in range(rng.randint(1, 4)):
        near = rng.random() < 0.5
        at = around + rng.randint(-4, 4) if near else rng.randint(0, len(out))
        at = min(max(at, 0), len(out))
        size = rng.choice([0, 1, 1, 2, 3])
        kind = rng.choice(["replace", "delete", "insert", "blank", "copy"])
        if kind == "replace":
            out[at : at + size] = [b"# edit %d\n" % rng.randint(0, 9) for _ in range(size)]
        elif kind == "delete":
            del out[at : at + size]
        elif kind == "insert":
            out[at:at] = [b"new_line = %d\n" % rng.randint(0, 3) for _ in range(size + 1)]
        elif kind == "blank":
            out[at:at] = [b"\n"]
        elif out:
            out[at:at] = [out[min(at, len(out) - 1)]]  # a repeated line: two ways to align it
    return out


def case(rng: random.Random, sources: list[bytes]) -> tuple[bytes, bytes, bytes]:
    lines = rng.choice(sources).splitlines(keepends=True)
    start = rng.randint(0, max(len(lines) - 60, 0))
    base = lines[start : start + rng.randint(5, 60)]
    around = rng.randint(0, len(base))
    ours, theirs = edited(rng, base, around), edited(rng, base, around)
    if rng.random() < 0.1:
        theirs = list(ours)  # the same change on both sides
    if rng.random() < 0.1 and ours:
        ours[-1] = ours[-1].rstrip(b"\n")  # no newline at the end of one side
    texts = [b"".join(lines) for lines in (base, ours, theirs)]
    if rng.random() < 0.2:  # CRLF line ends on some sides (markers follow them)
        texts = [t.replace(b"\n", b"\r\n") if rng.random() < 0.7 else t for t in texts]
    return texts[0], texts[1], texts[2]


def git_reference(tmp: Path, base: bytes, ours: bytes, theirs: bytes) -> tuple[bytes, int]:
    """What `git merge-file -p -L a -L base -L b` makes of the three, with no user config."""
    for name, data in (("ours", ours), ("base", base), ("theirs", theirs)):
        (tmp / name).write_bytes(data)
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    labels = [arg for label in LABELS for arg in ("-L", label)]
    done = subprocess.run(["git", "merge-file", "-p", *labels, "ours", "base", "theirs"],
                          cwd=tmp, env=env, capture_output=True, check=False)  # fmt: skip
    assert 0 <= done.returncode < 128, done.stderr
    return done.stdout, done.returncode


def cases(sources: list[bytes], n: int, seed: int) -> Iterator[tuple[bytes, bytes, bytes]]:
    rng = random.Random(seed)
    for _ in range(n):
        yield case(rng, sources)


def test_merge_file_equals_git_merge_file(sources: list[bytes], tmp_path: Path) -> None:
    conflicted = 0
    for i, (base, ours, theirs) in enumerate(cases(sources, CASES, seed=21)):
        expected, conflicts = git_reference(tmp_path, base, ours, theirs)
        got = merge.merge_file(base, ours, theirs, LABELS)
        assert got is not None and got.by == "git"
        assert (got.data, got.conflicts) == (expected, conflicts), f"case {i}"
        conflicted += conflicts > 0
    assert CASES // 5 < conflicted < CASES * 4 // 5  # both kinds, in numbers


def test_the_pure_merge_equals_git_merge_file(sources: list[bytes], tmp_path: Path) -> None:
    """Without git, `merge3` takes git's steps: the same bytes and conflict count."""
    differ = []
    for i, (base, ours, theirs) in enumerate(cases(sources, CASES * 2, seed=2126)):
        expected, conflicts = git_reference(tmp_path, base, ours, theirs)
        texts = [d.decode() for d in (base, ours, theirs)]
        got = merge.merge3(*texts, labels=LABELS)
        if (got.marked.encode(), min(len(got.conflicts), 127)) != (expected, conflicts):
            differ.append(i)  # git's exit status, the count, stops at 127
        assert got.clean == (conflicts == 0)
    assert differ == []


def heavily_edited(rng: random.Random, lines: list[bytes], share: float) -> bytes:
    """Delete, replace or follow by a new line `share` of the lines: far more than 256 edits,
    where git's diff stops looking for the shortest one (and so must ours)."""
    out: list[bytes] = []
    for line in lines:
        draw = rng.random()
        if draw < share / 3:
            continue
        if draw < 2 * share / 3:
            out.append(b"changed %d\n" % rng.randint(0, 50))
        else:
            out += [line, b"inserted %d\n" % rng.randint(0, 50)] if draw < share else [line]
    return b"".join(out)


@pytest.mark.timeout(300)
def test_the_pure_merge_equals_git_on_rewritten_whole_files(
    sources: list[bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gave_up = []
    furthest = linediff._furthest
    monkeypatch.setattr(linediff, "_furthest", lambda *a: gave_up.append(1) or furthest(*a))
    rng = random.Random(5)
    large = [s for s in sources if s.count(b"\n") > 800]
    for i in range(12):
        lines = rng.choice(large).splitlines(keepends=True)
        base = b"".join(lines)
        ours = heavily_edited(rng, lines, rng.choice([0.4, 0.9]))
        theirs = heavily_edited(rng, lines, rng.choice([0.1, 0.5]))
        expected, conflicts = git_reference(tmp_path, base, ours, theirs)
        got = merge.merge3(base.decode(), ours.decode(), theirs.decode(), LABELS)
        assert (got.marked.encode(), min(len(got.conflicts), 127)) == (expected, conflicts), i
    assert gave_up  # the searches did stop at git's cost limit


def test_merge_file_falls_back_to_the_pure_merge(monkeypatch: pytest.MonkeyPatch) -> None:
    base, ours, theirs = b"a\nb\nc\n", b"A\nb\nc\n", b"a\nb\nC\n"
    monkeypatch.setenv("SHADOWKERNEL_MERGE", "python")
    merge.git_executable.cache_clear()
    try:
        got = merge.merge_file(base, ours, theirs, LABELS)
    finally:
        merge.git_executable.cache_clear()
    assert got == merge.FileMerge(b"A\nb\nC\n", 0, "python")
    assert merge.merge_file(b"\0", b"\0x", b"\0y", LABELS) is None  # binary: not merged


@needs_fuse
@pytest.mark.timeout(300)
def test_merge_check_equals_git_per_file(sources: list[bytes], tmp_path: Path) -> None:
    """Through real branches: each merged file's bytes and the conflict list equal git's."""
    rng = random.Random(7)
    root = tmp_path / "project"
    root.mkdir()
    pairs = []
    for n in range(12):
        files = {f"f{n}_{k}.py": case(rng, sources) for k in range(10)}
        for name, (base, _, _) in files.items():
            (root / name).write_bytes(base)
        pairs.append(files)
    with sk.Workspace(root, servers=[]) as ws:
        for n, files in enumerate(pairs):
            a, b = ws.branch("a"), ws.branch("b")
            for name, (_, ours, theirs) in files.items():
                a.write_bytes(name, ours)
                b.write_bytes(name, theirs)
            merged = ws.merge_check(a, b, name=f"m{n}")
            expected_conflicts = []
            for name, (base, ours, theirs) in files.items():
                expected, conflicts = git_reference(tmp_path, base, ours, theirs)
                assert merged.read_bytes(name) == expected, name
                if conflicts:
                    expected_conflicts.append(name)
            assert list(merged.conflicts) == sorted(expected_conflicts)
            for branch in (a, b, merged):
                branch.drop()
