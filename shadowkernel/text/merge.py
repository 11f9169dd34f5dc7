"""Three-way merge of files: git's own `git merge-file` where git is installed, a pure merge
where it is not.

`merge_file(base, ours, theirs, labels)` is what accept and `merge_check` use. With git on
PATH it runs `git merge-file -p` (Myers diff, zealous conflict merging, git's markers),
isolated from every git config, so a merge here is exactly the merge git makes, on every
input, not only on tested ones (a reimplementation of xdiff could only promise the tested
ones). Without git, `merge3` below merges per hunk the same way in outline: each side's
non-conflicting hunks are kept, overlapping or adjacent changes become one conflict with
markers, and a conflict's common leading and trailing lines are moved out of it. It differs
from git where its diffs do (difflib's matching, not Myers with xdiff's sliding of hunks, and
LSP line breaks: a lone `\\r` ends a line here, not in git) and where git joins conflicts
separated by three lines or fewer or by lines without letters and digits; see
`tests/test_merge_git.py` for both measured side by side.
"""

from __future__ import annotations

import difflib
import functools
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

from ..errors import StagingError
from .positions import split_lines

Labels = tuple[str, str, str]  # ours, base, theirs: the names the conflict markers carry


@dataclass(frozen=True)
class Change:
    start: int  # base line range [start, end) replaced by `lines`
    end: int
    lines: tuple[str, ...]
    side: int  # 0: ours, 1: theirs


@dataclass(frozen=True)
class Merge:
    text: str | None  # None when there are conflicts
    conflicts: tuple[tuple[int, int], ...]  # 1-based base line ranges (inclusive start, end)
    marked: str = ""  # the merge with conflict markers (equal to `text` when clean)

    @property
    def clean(self) -> bool:
        return self.text is not None


@dataclass(frozen=True)
class FileMerge:
    """A merged file: its bytes (with git's conflict markers where the sides overlap)."""

    data: bytes
    conflicts: int  # how many conflict blocks `data` holds
    by: str  # "git" or "python"


def changes(base: list[str], other: list[str], side: int) -> list[Change]:
    matcher = difflib.SequenceMatcher(a=base, b=other, autojunk=False)
    return [
        Change(i1, i2, tuple(other[j1:j2]), side)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
    ]


def regions(all_changes: list[Change]) -> list[list[Change]]:
    """Group changes whose base ranges overlap or touch, in base order."""
    groups: list[list[Change]] = []
    end = -1
    for change in sorted(all_changes, key=lambda c: (c.start, c.end, c.side)):
        if groups and change.start <= end:
            groups[-1].append(change)
            end = max(end, change.end)
        else:
            groups.append([change])
            end = change.end
    return groups


def side_text(base: list[str], group: list[Change], side: int, lo: int, hi: int) -> list[str]:
    """Base lines [lo, hi) with one side's changes of the group applied."""
    out, position = [], lo
    for change in (c for c in group if c.side == side):
        out.extend(base[position : change.start])
        out.extend(change.lines)
        position = change.end
    out.extend(base[position:hi])
    return out


def merge3(base: str, ours: str, theirs: str, labels: Labels = ("ours", "base", "theirs")) -> Merge:
    """The pure merge (see the module's docstring for how it differs from git's)."""
    b = split_lines(base, keepends=True)
    both = changes(b, split_lines(ours, keepends=True), 0)
    both += changes(b, split_lines(theirs, keepends=True), 1)
    out: list[str] = []
    conflicts: list[tuple[int, int]] = []
    position = 0
    newline = _newline(ours)
    for group in regions(both):
        lo, hi = min(c.start for c in group), max(c.end for c in group)
        out.extend(b[position:lo])
        mine, yours = side_text(b, group, 0, lo, hi), side_text(b, group, 1, lo, hi)
        sides = {c.side for c in group}
        if sides == {0} or mine == yours:
            out.extend(mine)
        elif sides == {1}:
            out.extend(yours)
        else:
            conflicts.append((lo + 1, max(hi, lo + 1)))
            out.extend(_conflict(mine, yours, labels, newline))
        position = hi
    out.extend(b[position:])
    marked = "".join(out)
    return Merge(None if conflicts else marked, tuple(conflicts), marked)


def _conflict(mine: list[str], yours: list[str], labels: Labels, newline: str) -> list[str]:
    """Markers around what differs; lines both sides share at either end stay outside."""
    head = 0
    while head < min(len(mine), len(yours)) and mine[head] == yours[head]:
        head += 1
    tail = 0
    while (tail < min(len(mine), len(yours)) - head
           and mine[len(mine) - 1 - tail] == yours[len(yours) - 1 - tail]):  # fmt: skip
        tail += 1
    middle = [_ended(mine[head : len(mine) - tail], newline),
              _ended(yours[head : len(yours) - tail], newline)]  # fmt: skip
    return [*mine[:head], f"<<<<<<< {labels[0]}{newline}", *middle[0], f"======={newline}",
            *middle[1], f">>>>>>> {labels[2]}{newline}", *mine[len(mine) - tail :]]  # fmt: skip


def _ended(lines: list[str], newline: str) -> list[str]:
    """A conflict side whose last line has no line end gets one before the next marker."""
    if lines and not lines[-1].endswith(("\n", "\r")):
        return [*lines[:-1], lines[-1] + newline]
    return lines


def _newline(text: str) -> str:
    first = text.find("\n")
    return "\r\n" if first > 0 and text[first - 1] == "\r" else "\n"


# -- the file merge: git's, or the pure one -------------------------------------------------------


def is_binary(data: bytes) -> bool:
    """Whether git would refuse to merge these bytes as text (a NUL in the first 8000 bytes)."""
    return b"\0" in data[:8000]


def merge_file(base: bytes, ours: bytes, theirs: bytes, labels: Labels) -> FileMerge | None:
    """The three-way merge of one file's bytes; None for binary content (not mergeable)."""
    if any(is_binary(d) for d in (base, ours, theirs)):
        return None
    git = git_executable()
    if git is not None:
        return git_merge_file(git, base, ours, theirs, labels)
    texts = [d.decode("utf-8", "surrogateescape") for d in (base, ours, theirs)]
    result = merge3(*texts, labels=labels)
    return FileMerge(result.marked.encode("utf-8", "surrogateescape"), len(result.conflicts),
                     "python")  # fmt: skip


@functools.cache
def git_executable() -> str | None:
    """git on PATH, or None (the pure merge is used then). SHADOWKERNEL_MERGE=python forces
    the pure merge (the differential test uses it to hold both)."""
    if os.environ.get("SHADOWKERNEL_MERGE") == "python":
        return None
    return shutil.which("git")


def git_merge_file(git: str, base: bytes, ours: bytes, theirs: bytes, labels: Labels) -> FileMerge:
    """`git merge-file -p` in an empty temporary folder, with no system, global or repository
    config (a user's merge.conflictStyle must not change what a merge looks like)."""
    with tempfile.TemporaryDirectory(prefix="shadowkernel-merge-") as folder:
        names = []
        for name, data in (("ours", ours), ("base", base), ("theirs", theirs)):
            names.append(os.path.join(folder, name))
            with open(names[-1], "wb") as f:
                f.write(data)
        env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
               "GIT_CEILING_DIRECTORIES": os.path.dirname(folder), "LC_ALL": "C"}  # fmt: skip
        for variable in ("GIT_DIR", "GIT_WORK_TREE", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT"):
            env.pop(variable, None)
        labelled = [arg for label in labels for arg in ("-L", label)]
        done = subprocess.run([git, "merge-file", "-p", *labelled, *names], cwd=folder, env=env,
                              capture_output=True, check=False)  # fmt: skip
    if not 0 <= done.returncode < 128:
        reason = done.stderr.decode(errors="replace").strip()
        raise StagingError(f"git merge-file failed (exit {done.returncode}): {reason}")
    return FileMerge(done.stdout, done.returncode, "git")
