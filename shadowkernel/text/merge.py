"""Three-way merge of files, as `git merge-file` merges them: git itself where it is
installed, the same steps in pure Python where it is not.

`merge_file(base, ours, theirs, labels)` is what accept and `merge_check` use. With git on
PATH it runs `git merge-file -p` isolated from every git config (a user's
merge.conflictStyle must not change what a merge looks like), so a merge here is the merge git
makes on every input. Without git (or with SHADOWKERNEL_MERGE=python), `merge3` takes git's
steps: each side's hunks against the base by git's diff (`linediff`: Myers, as xdiff runs
it), a hunk of one side alone taken, overlapping or touching hunks one conflict, each
conflict narrowed to what its two sides differ in ("zealous"), and conflicts separated by at
most three lines, or by lines without letters or digits, joined. Over thousands of seeded
edit pairs of real files (`tests/test_merge_git.py`) its output equals git's byte for byte,
markers and CRLF included, also on whole files rewritten so much that git's diff gives up
the shortest path (more than 256 edits in one search).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

from ..errors import StagingError
from . import linediff

Labels = tuple[str, str, str]  # ours, base, theirs: the names the conflict markers carry


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
    conflicts: int  # how many conflict blocks `data` holds (at most 127: git's exit status)
    by: str  # "git" or "python"


@dataclass
class Entry:
    """One change of a merge, in base, ours and theirs lines ([start, start + n) each)."""

    mode: int  # CONFLICT, OURS, THEIRS, or SAME (both made it: found when refining)
    base: int
    base_n: int
    ours: int
    ours_n: int
    theirs: int
    theirs_n: int


CONFLICT, OURS, THEIRS, SAME = 0, 1, 2, 4


def merge3(base: str, ours: str, theirs: str, labels: Labels = ("ours", "base", "theirs")) -> Merge:
    """The three-way merge of texts, by git's steps: each side's hunks against `base`
    (`linediff`), one side's alone taken, overlapping or touching ones a conflict; then each
    conflict narrowed to what the two sides differ in, and conflicts separated by three lines
    or fewer, or by lines without letters or digits, joined into one."""
    b, o, t = linediff.split(base), linediff.split(ours), linediff.split(theirs)
    entries = _entries(len(b), o, t, linediff.diff(b, o), linediff.diff(b, t))
    entries = _refined(entries, o, t)
    _join(entries, o)
    marked = "".join(_render(entries, b, o, t, labels))
    conflicts = tuple((e.base + 1, max(e.base + e.base_n, e.base + 1))
                      for e in entries if e.mode == CONFLICT)  # fmt: skip
    return Merge(None if conflicts else marked, conflicts, marked)


def _entries(n_base: int, o: list[str], t: list[str], mine: list[linediff.Hunk],
             yours: list[linediff.Hunk]) -> list[Entry]:  # fmt: skip
    """Walk both sides' hunks in base order: a hunk that ends before the other side's next one
    starts is that side's alone; anything else conflicts unless both made the same change."""
    out: list[Entry] = []
    a = c = 0
    while a < len(mine) and c < len(yours):
        (b1, o1, nb1, no1), (b2, t2, nb2, nt2) = mine[a], yours[c]
        if b1 + nb1 < b2:
            _append(out, Entry(OURS, b1, nb1, o1, no1, t2 - b2 + b1, nb1))
            a += 1
            continue
        if b2 + nb2 < b1:
            _append(out, Entry(THEIRS, b2, nb2, o1 - b1 + b2, nb2, t2, nt2))
            c += 1
            continue
        if (b1, nb1, no1) != (b2, nb2, nt2) or o[o1 : o1 + no1] != t[t2 : t2 + nt2]:
            _append(out, _conflict(mine[a], yours[c]))
        if b1 + nb1 >= b2 + nb2:
            c += 1
        if b2 + nb2 >= b1 + nb1:
            a += 1
    for b1, o1, nb1, no1 in mine[a:]:
        _append(out, Entry(OURS, b1, nb1, o1, no1, b1 + len(t) - n_base, nb1))
    for b2, t2, nb2, nt2 in yours[c:]:
        _append(out, Entry(THEIRS, b2, nb2, b2 + len(o) - n_base, nb2, t2, nt2))
    return out


def _conflict(mine: linediff.Hunk, yours: linediff.Hunk) -> Entry:
    """The conflict spanning two overlapping hunks, on all three files."""
    (b1, o1, nb1, no1), (b2, t2, nb2, nt2) = mine, yours
    start_shift, end_shift = b1 - b2, b1 + nb1 - b2 - nb2
    if start_shift > 0:
        base, ours, theirs = b2, o1 - start_shift, t2
    else:
        base, ours, theirs = b1, o1, t2 + start_shift
    base_n, ours_n, theirs_n = b1 + nb1 - base, o1 + no1 - ours, t2 + nt2 - theirs
    if end_shift < 0:
        base_n, ours_n = base_n - end_shift, ours_n - end_shift
    else:
        theirs_n += end_shift
    return Entry(CONFLICT, base, base_n, ours, ours_n, theirs, theirs_n)


def _append(out: list[Entry], entry: Entry) -> None:
    """Add `entry`, or grow the last one when they touch in ours or theirs (mixed: a conflict)."""
    last = out[-1] if out else None
    if last is None or not (entry.ours <= last.ours + last.ours_n
                            or entry.theirs <= last.theirs + last.theirs_n):  # fmt: skip
        out.append(entry)
        return
    if entry.mode != last.mode:
        last.mode = CONFLICT
    last.base_n = entry.base + entry.base_n - last.base
    last.ours_n = entry.ours + entry.ours_n - last.ours
    last.theirs_n = entry.theirs + entry.theirs_n - last.theirs


def _refined(entries: list[Entry], o: list[str], t: list[str]) -> list[Entry]:
    """Each conflict (both sides non-empty) narrowed to the hunks between its two sides; one
    whose sides are equal is SAME."""
    out: list[Entry] = []
    for e in entries:
        if e.mode != CONFLICT or not e.ours_n or not e.theirs_n:
            out.append(e)
            continue
        hunks = linediff.diff(o[e.ours : e.ours + e.ours_n], t[e.theirs : e.theirs + e.theirs_n])
        if not hunks:
            e.mode = SAME
            out.append(e)
        for i, j, n_i, n_j in hunks:
            out.append(Entry(CONFLICT, e.base, e.base_n, e.ours + i, n_i, e.theirs + j, n_j))
    return out


def _join(entries: list[Entry], o: list[str]) -> None:
    """Conflicts separated by at most three lines, or by lines without ASCII letters or
    digits, become one (in place)."""
    k = 0
    while k + 1 < len(entries):
        e, after = entries[k], entries[k + 1]
        gap = o[e.ours + e.ours_n : after.ours]
        if e.mode != CONFLICT or after.mode != CONFLICT or (len(gap) > 3 and _alnum(gap)):
            k += 1
            continue
        e.ours_n = after.ours + after.ours_n - e.ours
        e.theirs_n = after.theirs + after.theirs_n - e.theirs
        e.base_n = max(after.base + after.base_n - e.base, e.base_n)
        del entries[k + 1]


def _alnum(lines: list[str]) -> bool:
    return any(c.isascii() and c.isalnum() for line in lines for c in line)


def _render(entries: list[Entry], b: list[str], o: list[str], t: list[str],
            labels: Labels) -> list[str]:  # fmt: skip
    """The merged lines: ours, with theirs' hunks in place and markers around conflicts."""
    out: list[str] = []
    done = 0  # lines of ours copied so far
    for e in entries:
        if e.mode == SAME:
            continue
        out += o[done : e.ours]
        if e.mode == CONFLICT:
            newline = "\r\n" if _needs_cr(b, o, t, e) else "\n"
            mine, yours = o[e.ours : e.ours + e.ours_n], t[e.theirs : e.theirs + e.theirs_n]
            out += [f"<<<<<<< {labels[0]}{newline}", *_ended(mine, newline), f"======={newline}",
                    *_ended(yours, newline), f">>>>>>> {labels[2]}{newline}"]  # fmt: skip
        elif e.mode == OURS:
            out += o[e.ours : e.ours + e.ours_n]
        else:
            out += t[e.theirs : e.theirs + e.theirs_n]
        done = e.ours + e.ours_n
    return out + o[done:]


def _ended(lines: list[str], newline: str) -> list[str]:
    """A conflict side whose last line has no line end gets one before the next marker."""
    if lines and not lines[-1].endswith("\n"):
        return [*lines[:-1], lines[-1] + newline]
    return lines


def _needs_cr(b: list[str], o: list[str], t: list[str], e: Entry) -> bool:
    """Markers end in CRLF when the lines before the conflict in ours and theirs, and the
    base's first line, do; a line that cannot tell leaves it to the next; none: LF."""
    for lines, i in ((o, e.ours - 1), (t, e.theirs - 1), (b, 0)):
        answer = _crlf(lines, max(i, 0))
        if answer is not None and not answer:
            return False
    return answer is True


def _crlf(lines: list[str], i: int) -> bool | None:
    """Whether line `i` ends in CRLF; None when it cannot tell (no such line, no line end)."""
    if i >= len(lines) or not lines[i].endswith("\n"):
        return None
    return lines[i].endswith("\r\n")


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
    a, b, c = (d.decode("utf-8", "surrogateescape") for d in (base, ours, theirs))
    result = merge3(a, b, c, labels)
    return FileMerge(result.marked.encode("utf-8", "surrogateescape"),
                     min(len(result.conflicts), 127), "python")  # fmt: skip


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
