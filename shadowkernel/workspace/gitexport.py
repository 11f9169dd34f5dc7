"""A branch's files as a git commit, made with plumbing only: the worktree, the index and HEAD
of the user's repository are never touched.

A private index (GIT_INDEX_FILE, a temporary file) starts from the parent commit's tree
(`read-tree`), takes the branch's files (`hash-object -w`, then `update-index --index-info`;
deletions remove the entry), and `write-tree`, `commit-tree` and `update-ref` make the commit
and point the ref at it. Git writes its objects into the repository's object store; nothing
else of it changes.

The parent is the commit the branch's base matches: the first of HEAD and its first 100
ancestors whose blobs at every path the branch touched equal the branch's bases (a path absent
there where the base had no file). Where none does (the branch forked from uncommitted edits),
the parent is HEAD and the commit message says which paths differ from it.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
from collections.abc import Mapping

from ..errors import ArgumentError, PathError
from ..paths import RelPath
from . import arguments
from .staging import LINK

SEARCHED = 100  # ancestors of HEAD searched for the branch's base
EXECUTABLE = 0o111


def git(root: str, *args: str, env: Mapping[str, str] | None = None, data: bytes | None = None,
        check: bool = True) -> str:  # fmt: skip
    """Run git in `root`; its stdout (stripped). A failure is a PathError (the repository at
    `root` refused) with git's words."""
    done = subprocess.run(["git", "-C", root, *args], input=data, capture_output=True,
                          env={**os.environ, **(env or {})}, check=False)  # fmt: skip
    if check and done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip()
        raise PathError(f"git {args[0]} failed in {root}: {message}")
    return done.stdout.decode(errors="replace").strip()


def repository(root: str) -> tuple[str, str]:
    """(the repository's top folder, the folder's path inside it: '' or 'sub/dir/')."""
    try:
        top = git(root, "rev-parse", "--show-toplevel")
    except FileNotFoundError:
        raise PathError("git is not installed: export to git needs it on PATH") from None
    except PathError as error:
        raise PathError(f"{root} is not in a git repository that git will use ({error}): "
                        "commit() writes into the folder's repository") from None  # fmt: skip
    inside = os.path.relpath(root, os.path.realpath(top))
    return top, "" if inside == "." else inside.replace(os.sep, "/") + "/"


def check_ref(top: str, ref: str) -> str:
    valid = (
        isinstance(ref, str)
        and ref.startswith("refs/")
        and subprocess.run(
            ["git", "check-ref-format", ref], capture_output=True, check=False
        ).returncode
        == 0
    )
    if not valid:
        raise ArgumentError(f"ref={ref!r}: give a full ref name such as 'refs/heads/agent/NAME'")
    checked_out = git(top, "symbolic-ref", "-q", "HEAD", check=False)
    if ref == checked_out:
        raise ArgumentError(f"ref={ref!r} is the branch checked out (HEAD): moving it would change "
                            "the user's HEAD; choose another ref")  # fmt: skip
    return ref


def blob_id(data: bytes, algorithm: str) -> str:
    """Git's object id of a blob holding `data` (sha1 or sha256 repositories)."""
    return hashlib.new(algorithm, b"blob %d\0" % len(data) + data).hexdigest()


def find_parent(top: str, bases: Mapping[str, bytes | None]) -> tuple[str | None, list[str]]:
    """(the commit whose files equal `bases`, else HEAD; the paths where it differs)."""
    head = git(top, "rev-parse", "--verify", "-q", "HEAD^{commit}", check=False) or None
    if head is None:
        return None, sorted(p for p, b in bases.items() if b is not None)
    algorithm = git(top, "rev-parse", "--show-object-format", check=False) or "sha1"
    wanted = {p: None if b is None else blob_id(b, algorithm) for p, b in bases.items()}
    first: list[str] | None = None
    for commit in git(top, "rev-list", f"--max-count={SEARCHED}", head).split():
        found = _blobs(top, commit, wanted)
        differ = [p for p, want in wanted.items() if found.get(p) != want]
        if not differ:
            return commit, []
        first = differ if first is None else first
    return head, first or []


def _blobs(top: str, commit: str, paths: Mapping[str, object]) -> dict[str, str]:
    """path -> blob id of the regular files at `commit` among `paths`."""
    out = git(top, "ls-tree", "-z", "--full-tree", commit, "--", *paths)
    found = {}
    for entry in filter(None, out.split("\0")):
        meta, path = entry.split("\t", 1)
        mode, kind, oid = meta.split()
        if kind == "blob" and mode in ("100644", "100755"):
            found[path] = oid
    return found


def commit(root: str, files: Mapping[RelPath, bytes | None], modes: Mapping[RelPath, int],
           bases: Mapping[RelPath, bytes | None], ref: str, message: str) -> str:  # fmt: skip
    """Commit `files` (None: deleted) on top of the commit their `bases` match; point `ref` at
    it; returns the commit's id."""
    top, prefix = repository(root)
    check_ref(top, ref)
    parent, differ = find_parent(top, {prefix + p: b for p, b in bases.items()})
    if differ:
        message += (f"\n\nShadowkernel-Base: the branch's base differs from "
                    f"{parent or 'an empty tree'} in {', '.join(differ)}")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="shadowkernel-git-") as scratch:
        env = {"GIT_INDEX_FILE": os.path.join(scratch, "index")}
        git(top, "read-tree", *([parent] if parent else ["--empty"]), env=env)
        git(top, "update-index", "-z", "--index-info", env=env,
            data=_index_info(top, prefix, files, modes, scratch))  # fmt: skip
        tree = git(top, "write-tree", env=env)
    made = git(top, "commit-tree", tree, *(["-p", parent] if parent else []), "-F", "-",
               env=_identity(top), data=message.encode())  # fmt: skip
    git(top, "update-ref", "-m", f"shadowkernel: {message.splitlines()[0]}", ref, made)
    return made


def _index_info(top: str, prefix: str, files: Mapping[RelPath, bytes | None],
                modes: Mapping[RelPath, int], scratch: str) -> bytes:  # fmt: skip
    """`update-index --index-info` lines: each file's new blob, or its removal."""
    present = {path: data for path, data in files.items() if data is not None}
    oids = dict(zip(present, _write_blobs(top, list(present.values()), scratch), strict=True))
    empty = git(top, "hash-object", "--stdin", data=b"")  # an id of the repository's length
    lines: list[bytes] = []
    for path in sorted(files):
        name = (prefix + path).encode()
        if path not in present:  # deleted: mode 0 removes the entry
            lines.append(b"0 %s\t%s\0" % (b"0" * len(empty), name))
            continue
        mode = git_mode(modes.get(path, 0o644))
        lines.append(b"%s %s\t%s\0" % (mode, oids[path].encode(), name))
    return b"".join(lines)


def git_mode(mode: int) -> bytes:
    """git's mode of a tree entry: a symlink (its blob is the target), else a file, executable
    or not."""
    if mode == LINK:
        return b"120000"
    return b"100755" if mode & EXECUTABLE else b"100644"


def _write_blobs(top: str, blobs: list[bytes], scratch: str) -> list[str]:
    """Each of `blobs` written into the repository's objects; their object ids. One
    git process for them all (a process per file cost a codemod of 1,500 files 9 s): each
    goes through a file in `scratch`, hashed as it is (--no-filters, as --stdin hashes)."""
    if not blobs:
        return []
    folder = os.path.join(scratch, "blobs")
    os.mkdir(folder)
    names = []
    for number, data in enumerate(blobs):
        names.append(name := os.path.join(folder, str(number)))
        with open(name, "wb") as file:
            file.write(data)
    listing = "".join(f"{name}\n" for name in names).encode()
    out = git(top, "hash-object", "-w", "--no-filters", "--stdin-paths", data=listing).split()
    if len(out) != len(blobs):
        raise PathError(f"git hash-object wrote {len(out)} objects in {top}, not {len(blobs)}")
    return out


def _identity(top: str) -> dict[str, str]:
    """The user's identity for commit-tree; shadowkernel's where git has none configured."""
    if git(top, "var", "GIT_AUTHOR_IDENT", check=False):
        return {}
    return {
        "GIT_AUTHOR_NAME": "shadowkernel",
        "GIT_AUTHOR_EMAIL": "shadowkernel@localhost",
        "GIT_COMMITTER_NAME": "shadowkernel",
        "GIT_COMMITTER_EMAIL": "shadowkernel@localhost",
    }


def default_ref(name: str) -> str:
    """refs/heads/agent/NAME. A branch name is one git accepts (`arguments.branch_name`), so
    it is kept as it is: replacing characters would send two branches ("café", "cafè") to one
    ref, the second commit silently taking the first's place. A name from elsewhere that git
    would refuse is made a valid component."""
    try:
        return f"refs/heads/agent/{arguments.branch_name(name)}"
    except ArgumentError:
        safe = re.sub(r"[^A-Za-z0-9._/-]+", "-", name).strip("/.-") or "branch"
        return f"refs/heads/agent/{safe}"
