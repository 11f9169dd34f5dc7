"""The MCP tools as a plain table over the public API: one method per tool, JSON results.

`Tools(ws).table()` maps each tool name (`TOOL_NAMES`, fixed: clients rely on them) to a
bound method whose signature and docstring become the tool's schema and description. No
MCP types here: `server.py` registers the table and translates errors once at its edge.
Every method raises only `ShadowError` subclasses for bad input; the server turns those
into tool errors and stays up.

Caveats: quick-fix ids live in this object's memory (the fixes of each branch's last lints),
so they are valid for the server that offered them and for the version they were offered
at. `list_files` shows a branch's version (its staged files over the user's folder), not
what runs wrote to its scratch layer without `keep`.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ..errors import ArgumentError, NotFound, PathError, ShadowError, StagingError
from ..lsp import Fix
from ..paths import RelPath, is_within, rel
from . import shapes

T = TypeVar("T")

TOOL_NAMES = (
    "list_branches", "create_branch", "read_file", "list_files", "write_file",
    "replace_in_file", "apply_patch", "delete_file", "lint", "apply_fix", "definition",
    "references", "hover", "symbols", "run", "diff", "merge_check", "accept", "drop_branch",
)  # fmt: skip


class Tools:
    """The tools over one open workspace. `allow_accept` gates the one tool that writes the
    user's folder."""

    def __init__(self, workspace: Any, allow_accept: bool = False) -> None:
        self.workspace = workspace
        self.allow_accept = allow_accept
        self._lock = threading.Lock()
        # branch -> fix id -> (version, fix); keyed by the object, so a branch dropped and
        # made again under its name never sees the old one's fixes
        self._fixes: weakref.WeakKeyDictionary[Any, dict[str, tuple[int, Fix]]] = (
            weakref.WeakKeyDictionary())  # fmt: skip

    def table(self) -> dict[str, Callable[..., Mapping[str, Any]]]:
        return {name: getattr(self, name) for name in TOOL_NAMES}

    # -- branches ---------------------------------------------------------------------------

    def list_branches(self) -> shapes.Branches:
        """Every open branch: its name, current version, last edit and the files it touched."""
        return {"branches": [shapes.branch(b) for b in self.workspace.branches.values()]}

    def create_branch(self, name: str) -> shapes.Created:
        """Fork a new branch from the user's current files (nothing is copied)."""
        created = self.workspace.branch(name)
        return {"branch": created.name, "version": created.version}

    def drop_branch(self, branch: str) -> shapes.Dropped:
        """Forget a branch (its versions and run scratch). The user's folder is untouched."""
        self._branch(branch).drop()
        return {"dropped": branch}

    # -- reading ------------------------------------------------------------------------------

    def read_file(self, branch: str, path: str) -> shapes.FileText:
        """The text of `path` in the branch's current version (staged, or the user's file);
        a binary file is refused with its size."""
        chosen = self._branch(branch)
        version, data = stable(chosen, lambda: chosen.read_bytes(path))
        try:
            content = data.decode("utf-8") if b"\0" not in data else None
        except UnicodeDecodeError:
            content = None
        if content is None:
            raise StagingError(f"{rel(path)!r} is a binary file ({len(data)} bytes) in branch "
                               f"{branch!r}; read_file shows text files only")  # fmt: skip
        return {"branch": branch, "version": version, "path": rel(path), "content": content}

    def list_files(self, branch: str, path: str = "") -> shapes.Listing:
        """The entries of folder `path` ('' is the project root) in the branch's current
        version: each {name, path, kind} with kind 'file', 'dir' or 'symlink'."""
        chosen = self._branch(branch)
        folder, files = rel(path), chosen.files
        if is_file(self.workspace.root, files, folder):
            raise PathError(f"path {folder!r} is a file in branch {branch!r}; use read_file")
        found = folder_entries(self.workspace.root, folder)
        listed = entries(found, files, folder)
        if found is None and not listed and folder:
            raise NotFound(f"path {folder!r}: no such folder in branch {branch!r}")
        return {"branch": branch, "version": chosen.version, "path": folder, "entries": listed}

    # -- staging -------------------------------------------------------------------------------

    def write_file(self, branch: str, path: str, content: str) -> shapes.Staged:
        """Stage the full text of a file (created if new): a new version of the branch."""
        chosen = self._branch(branch)
        return self._staged(chosen, chosen.write(path, content))

    def replace_in_file(self, branch: str, path: str, old: str, new: str) -> shapes.Staged:
        """Replace the one exact occurrence of `old` in `path` by `new`; refused when `old`
        occurs zero or several times (give more context)."""
        chosen = self._branch(branch)
        return self._staged(chosen, chosen.replace(path, old, new))

    def apply_patch(self, branch: str, patch: str) -> shapes.Staged:
        """Apply a unified diff (one or more files; '--- /dev/null' creates, '+++ /dev/null'
        deletes); all files or none."""
        chosen = self._branch(branch)
        return self._staged(chosen, chosen.apply_patch(patch))

    def delete_file(self, branch: str, path: str) -> shapes.Staged:
        """Stage the deletion of a file."""
        chosen = self._branch(branch)
        return self._staged(chosen, chosen.delete(path))

    def apply_fix(self, branch: str, fix: str) -> shapes.FixApplied:
        """Apply a quick fix by the id a lint row offered (e.g. '3.1'); valid while the
        branch is still at the version that was linted."""
        chosen = self._branch(branch)
        with self._lock:
            offered = self._fixes.get(chosen, {}).get(fix)
        if offered is None:
            raise NotFound(f"fix {fix!r}: not offered for branch {branch!r}; lint it and take "
                           "an id from a row's 'fixes'")  # fmt: skip
        version, value = offered
        if version != chosen.version:
            raise StagingError(f"fix {fix!r} was offered at version {version} of {branch!r}, "
                               f"which is now at version {chosen.version}: lint again")  # fmt: skip
        return {**self._staged(chosen, chosen.apply_edit(value)), "fix": shapes.fix(fix, value)}

    # -- lints and navigation ---------------------------------------------------------------------

    def lint(self, branch: str, paths: list[str] | None = None, new_only: bool = False,
             servers: list[str] | None = None) -> shapes.Lints:  # fmt: skip
        """Lints of the branch's current version, final for exactly that version (default
        paths: the files it staged). Each row has its version, 1-based positions, `new`
        (the branch introduced it) and quick fixes as {id, title} for apply_fix."""
        chosen = self._branch(branch)
        table = chosen.lint(paths, new_only, servers=servers)
        version = int(table.attrs["version"])
        ids = self._offer(chosen, version, list(table["fixes"]))
        return {"branch": branch, "version": version, "lints": shapes.lint_rows(table, ids)}

    def definition(self, branch: str, path: str, line: int, column: int) -> shapes.Locations:
        """Where the symbol at path:line:column (1-based) is defined, in the branch's version."""
        chosen = self._branch(branch)
        version, found = stable(chosen, lambda: chosen.definition(path, line, column))
        return {"branch": branch, "version": version, "locations": found}

    def references(self, branch: str, path: str, line: int, column: int) -> shapes.Locations:
        """Every reference to the symbol at path:line:column (1-based)."""
        chosen = self._branch(branch)
        version, found = stable(chosen, lambda: chosen.references(path, line, column))
        return {"branch": branch, "version": version, "locations": found}

    def hover(self, branch: str, path: str, line: int, column: int) -> shapes.HoverAnswer:
        """The hover text (type, docs) at path:line:column (1-based), or null."""
        chosen = self._branch(branch)
        version, found = stable(chosen, lambda: chosen.hover(path, line, column))
        return {"branch": branch, "version": version, "hover": found}

    def symbols(
        self, branch: str, path: str | None = None, query: str | None = None
    ) -> shapes.Symbols:
        """Document symbols of `path` in the branch's version, or (with `query` instead) the
        workspace symbols matching the query, as the user's folder shows them."""
        chosen = self._branch(branch)
        if (path is None) == (query is None):
            raise ArgumentError("symbols: give either path (document symbols) or query "
                             "(workspace symbols)")  # fmt: skip
        if path is not None:
            version, found = stable(chosen, lambda: chosen.symbols(path))
        else:
            version, found = chosen.version, self.workspace.symbols(query)
        return {"branch": branch, "version": version, "symbols": found}

    # -- runs, diff, merge, accept -------------------------------------------------------------

    def run(self, branch: str, command: str, timeout: float = 60, network: bool = False,
            keep: bool = False) -> shapes.Ran:  # fmt: skip
        """Run a shell command in the shadow at the branch's version (sandboxed, offline
        unless network). With keep, what it wrote under the project (less .gitignore'd files
        and caches) becomes the branch's next version; otherwise it stays in its scratch."""
        chosen = self._branch(branch)
        if not command.strip():
            raise ArgumentError("command: give a shell command to run")
        if timeout <= 0:
            raise ArgumentError(f"timeout={timeout}: give a positive number of seconds")
        result = chosen.run(command, timeout=timeout, network=network, keep=keep)
        if result.timed_out:
            output = _tail(result.stdout + result.stderr)
            raise ShadowError(f"run {command!r} timed out after {timeout} s and was killed; "
                              f"output so far: {output!r}")  # fmt: skip
        return {"branch": branch, "version": chosen.version, "result": shapes.run(result)}

    def diff(self, branch: str) -> shapes.DiffAnswer:
        """The branch's edits against its base as a unified diff (git style)."""
        chosen = self._branch(branch)
        version, (text, changed) = stable(
            chosen, lambda: (str(chosen.diff()), shapes.changed(chosen.bases, chosen.files))
        )
        return {"branch": branch, "version": version, "paths": changed, "diff": text}

    def merge_check(self, a: str, b: str, name: str | None = None) -> shapes.Merged:
        """A new branch (`name`, default 'merge-A-B') holding the three-way merge of branches
        a and b over their common base, with the paths that conflicted (they hold a's text);
        lint and run it before accepting either."""
        merged = self.workspace.merge_check(self._branch(a), self._branch(b), name)
        return {"branch": merged.name, "version": merged.version,
                "conflicts": list(merged.conflicts), "files": sorted(merged.files)}  # fmt: skip

    def accept(self, branch: str) -> shapes.AcceptedAnswer:
        """Write the branch's edits into the user's folder (only when the server was started
        with --allow-accept); refused with the paths when the user changed them meanwhile."""
        if not self.allow_accept:
            raise ShadowError("accept is disabled: this server was started without "
                              "--allow-accept; show the user diff(branch) to accept")  # fmt: skip
        done = self._branch(branch).accept()
        return {"branch": branch, "written": list(done.written), "deleted": list(done.deleted),
                "merged": list(done.merged)}  # fmt: skip

    # -- helpers ----------------------------------------------------------------------------------

    def _branch(self, name: str) -> Any:
        found = self.workspace.branches.get(name)
        if found is None:
            known = ", ".join(sorted(self.workspace.branches)) or "none yet"
            raise NotFound(f"branch {name!r} does not exist (branches: {known}); "
                           "create it with create_branch")  # fmt: skip
        return found

    def _staged(self, chosen: Any, version: int) -> shapes.Staged:
        by_number = {v.number: v for v in chosen.versions}
        before = by_number[version - 1].files if version - 1 in by_number else {}
        made = by_number[version]
        return {"branch": chosen.name, "version": version, "op": made.op,
                "changed": shapes.changed(before, made.files)}  # fmt: skip

    def _offer(self, branch: Any, version: int, fixes: list[Any]) -> dict[int, list[str]]:
        """Name each row's fixes '<version>.<n>' and remember them (only this version's)."""
        with self._lock:
            known = self._fixes.setdefault(branch, {})
            for stale in [i for i, (v, _) in known.items() if v != version]:
                del known[stale]
            ids: dict[int, list[str]] = {}
            for row, row_fixes in enumerate(fixes):
                for value in row_fixes:
                    fix_id = f"{version}.{len(known) + 1}"
                    known[fix_id] = (version, value)
                    ids.setdefault(row, []).append(fix_id)
            return ids


def stable(branch: Any, ask: Callable[[], T], tries: int = 5) -> tuple[int, T]:
    """(version, ask()) with ask() answered at that version: asked again while another
    client staged a version meanwhile (the API answers at the current version)."""
    for _ in range(tries):
        before = branch.version
        answer = ask()
        if branch.version == before:
            return before, answer
    raise ShadowError(f"branch {branch.name!r} kept changing while answering; ask again")


def is_file(root: str, files: Mapping[RelPath, bytes | None], path: RelPath) -> bool:
    """Whether `path` is a file in a branch: staged as one, or untouched and one in the folder."""
    if path in files:
        return files[path] is not None
    return bool(path) and os.path.isfile(os.path.join(root, path))


def folder_entries(root: str, folder: RelPath) -> dict[str, str] | None:
    """name -> kind of a folder in the user's folder; None when it is not a folder there."""
    full = os.path.join(root, folder)
    real = os.path.realpath(full)
    if not is_within(real, root):
        raise PathError(f"path {folder!r} leads out of the project through a symlink")
    if not os.path.isdir(full):
        return None
    with os.scandir(full) as scan:
        return {e.name: _kind(e) for e in scan}


def _kind(entry: os.DirEntry[str]) -> str:
    if entry.is_symlink():
        return "symlink"
    return "dir" if entry.is_dir() else "file"


def entries(
    found: Mapping[str, str] | None, files: Mapping[RelPath, bytes | None], folder: RelPath
) -> list[shapes.Entry]:
    """A folder's listing: the user's entries with a branch's staged files laid over them."""
    kinds = dict(found or {})
    for path, data in files.items():
        if path == folder or not is_within(path, folder):
            continue
        rest = path[len(folder) :].lstrip("/")
        name, below, _ = rest.partition("/")
        if below:
            if data is not None:  # a deletion below leaves its folder where it was
                kinds[name] = "dir"
        elif data is None:
            kinds.pop(name, None)
        else:
            kinds[name] = "file"
    prefix = f"{folder}/" if folder else ""
    return [{"name": n, "path": prefix + n, "kind": kinds[n]} for n in sorted(kinds)]


def _tail(text: str, limit: int = 2000) -> str:
    return text if len(text) <= limit else "..." + text[-limit:]
