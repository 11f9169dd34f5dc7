"""The tools agents call, as a plain table over the public API: one method per tool.

`Tools(ws).table()` maps each tool name (`TOOL_NAMES`, fixed: clients rely on them) to a
bound method returning JSON; `Tools(ws).specs()` gives each tool's `ToolSpec` (description,
described parameters, hints), from which the MCP server (`mcp/`) and tool-calling agents
derive their schemas. No MCP types here: the MCP face registers the table and translates
errors once at its edge. Every method raises only `ShadowError` subclasses for bad input.

Caveats: quick-fix ids live in this object's memory (the fixes of each branch's last lints),
so they are valid for the server that offered them and for the version they were offered
at. `list_files` shows a branch's version (its staged files over the user's folder), not
what runs wrote to its scratch layer without `keep`. Protected paths (`paths.Protection`:
`.git` and its kin, the workspace's protect= globs) are neither read nor listed by the tools
(`refuse_protected`), nor shown by navigation (locations and symbols there are left out, a
hover of a symbol defined there is refused); a run may still read them.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import weakref
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any, TypeVar

from ..errors import ArgumentError, NotFound, PathError, ServerError, ShadowError, StagingError
from ..lsp import Fix
from ..paths import Protection, RelPath, is_within, rel, relative_to
from ..run.result import DEFAULT_OUTPUT_CAP
from ..text.content import MAX_TEXT_BYTES
from ..workspace import arguments
from ..workspace.gitexport import default_ref
from ..workspace.runs import ARGUMENT_LIMIT
from . import shapes
from .toolspec import READS, STAGES, Hints, ToolSpec, bounded, spec_of, tool

T = TypeVar("T")

# What a model must know of the parameters many tools share.
BRANCH = "the branch's name, as create_branch made it (list_branches lists them)"
PATH = "a path relative to the project's root, '/'-separated, e.g. 'pkg/mod.py'"
LINE = bounded("the line, 1-based", minimum=1)
COLUMN = bounded("the column, 1-based, in characters (a tab counts one); the end of a line, "
                 "just after its last character, is a column too", minimum=1)  # fmt: skip
READ_LIMIT = 100_000  # characters read_file returns by default: twice (JSON and text) under
# the 1 MiB some HTTP clients take in one event, even at 4 bytes a character
RUN_OUTPUT = 16 * 1024  # characters per stream a run returns by default: agent-sized
OUTPUT_CAP = DEFAULT_OUTPUT_CAP  # the run's own cap (bytes per stream it keeps)
COMMAND_LIMIT = ARGUMENT_LIMIT  # the command is one argument of `bash -c` (runs.ARGUMENT_LIMIT)
LINT_ONLY = frozenset({"ruff"})  # built-in servers that answer no navigation at all
WRITES_FOLDER = Hints(read_only=False, destructive=True)  # the user's own files

TOOL_NAMES = (
    "list_branches", "create_branch", "read_file", "list_files", "write_file",
    "replace_in_file", "apply_patch", "delete_file", "lint", "apply_fix", "definition",
    "references", "hover", "symbols", "run", "diff", "merge_check", "accept", "drop_branch",
    "commit_branch",
)  # fmt: skip
AGENT_REFS = "refs/heads/agent/"  # where commit_branch writes without --allow-accept


BRANCH_TOOLS = frozenset({"create_branch", "drop_branch", "merge_check"})  # make or forget one


class Tools:
    """The tools over one open workspace (or a `Future` of one still opening: calls wait for
    it). `allow_accept` gates the one tool that writes the user's folder. `branch` pins the
    tools to that branch: it is every `branch` argument's default, other names are refused,
    list_branches shows only it, and the tools that make or forget branches are not offered
    (an agent CLI given one branch to work on, e.g. `CommandAgent`'s)."""

    def __init__(self, workspace: Any, allow_accept: bool = False,
                 branch: str | None = None) -> None:  # fmt: skip
        self._workspace = workspace
        self.allow_accept = allow_accept
        self.pinned = branch
        self._lock = threading.Lock()
        # branch -> fix id -> (version, fix); keyed by the object, so a branch dropped and
        # made again under its name never sees the old one's fixes
        self._fixes: weakref.WeakKeyDictionary[Any, dict[str, tuple[int, Fix]]] = (
            weakref.WeakKeyDictionary())  # fmt: skip

    @property
    def workspace(self) -> Any:
        """The workspace, once open; why it did not open as a ShadowError."""
        if not isinstance(self._workspace, Future):
            return self._workspace
        try:
            return self._workspace.result()
        except Exception as error:  # noqa: BLE001 - every tool call answers it
            raise ShadowError(f"the project could not be opened, so no tool works: "
                              f"{error}") from error  # fmt: skip

    def names(self) -> tuple[str, ...]:
        """The tools this table offers: `accept` only when it is allowed, no branch making
        on a pinned table."""
        return tuple(n for n in TOOL_NAMES if (n != "accept" or self.allow_accept)
                     and not (self.pinned and n in BRANCH_TOOLS))  # fmt: skip

    def withheld(self, name: str) -> str:
        """Why a tool of TOOL_NAMES is not offered."""
        if self.pinned and name in BRANCH_TOOLS:
            return f"{name} is not offered: this server works on branch {self.pinned!r} only"
        return (
            f"{name} is not offered: this server was started without --allow-accept; "
            "show the user the branch's diff (the diff tool) and let them accept it"
        )

    def table(self) -> dict[str, Callable[..., Mapping[str, Any]]]:
        return {name: getattr(self, name) for name in self.names()}

    def specs(self) -> list[ToolSpec]:
        """Each offered tool's description, described parameters and hints (on a pinned
        table, `branch` defaults to the pinned branch)."""
        specs = [spec_of(getattr(self, name)) for name in self.names()]
        return [pinned_spec(s, self.pinned) for s in specs] if self.pinned else specs

    # -- branches ---------------------------------------------------------------------------

    @tool(READS)
    def list_branches(self) -> shapes.Branches:
        """Every open branch: its name, current version, last edit and the files it touched."""
        shown = [b for b in self.workspace.branches.values() if self.pinned in (None, b.name)]
        return {"branches": [shapes.branch(b) for b in shown]}

    @tool(STAGES, name="a new branch's name, e.g. 'fix-parser'")
    def create_branch(self, name: str) -> shapes.Created:
        """Fork a new branch from the user's current files (nothing is copied). Stage edits
        on it, then lint, navigate and run it; the user's folder never changes."""
        if name in self.workspace.branches:
            raise ArgumentError(f"branch {name!r} exists; stage on it, or drop_branch it "
                                "first to start over")  # fmt: skip
        created = self.workspace.branch(name)
        return {"branch": created.name, "version": created.version}

    @tool(Hints(read_only=False, destructive=True), branch=BRANCH)
    def drop_branch(self, branch: str) -> shapes.Dropped:
        """Forget a branch (its versions and run scratch). The user's folder is untouched."""
        self._branch(branch).drop()
        return {"branch": branch, "dropped": branch}

    # -- reading ------------------------------------------------------------------------------

    @tool(READS, branch=BRANCH, path=PATH,
          offset=bounded("the first character to return, 0-based (default 0: the start)",
                         minimum=0),
          limit=bounded(f"at most this many characters (default {READ_LIMIT}); when `more` is "
                        "true, call again with offset=next_offset", minimum=1))  # fmt: skip
    def read_file(self, branch: str, path: str, offset: int = 0,
                  limit: int = READ_LIMIT) -> shapes.FileText:  # fmt: skip
        """The text of `path` in the branch's current version (staged, or the user's file),
        a page of `limit` characters from `offset`: the answer gives total_chars and whether
        more follows. A binary file is refused with its size."""
        if offset < 0 or limit <= 0:
            raise ArgumentError(f"offset={offset}, limit={limit}: give offset >= 0 and "
                                "limit > 0 (characters)")  # fmt: skip
        chosen = self._branch(branch)
        self._refuse_protected(arguments.path("path", path), "read_file")
        version, data = stable(chosen, lambda: chosen.read_bytes(path))
        try:
            content = data.decode("utf-8") if b"\0" not in data else None
        except UnicodeDecodeError:
            content = None
        if content is None:
            raise StagingError(f"{rel(path)!r} is a binary file ({len(data)} bytes) in branch "
                               f"{branch!r}; read_file shows text files only")  # fmt: skip
        return {"branch": branch, "version": version, "path": rel(path),
                **shapes.page(content, offset, limit)}  # fmt: skip

    @tool(
        READS,
        branch=BRANCH,
        path="a folder relative to the project's root, e.g. 'pkg'; '' (default) is the root",
    )
    def list_files(self, branch: str, path: str = "") -> shapes.Listing:
        """The entries of folder `path` ('' is the project root) in the branch's current
        version: each {name, path, kind} with kind 'file', 'dir' or 'symlink'."""
        chosen = self._branch(branch)
        folder, files, root = rel(path), chosen.files, self.workspace.root
        self._refuse_protected(folder, "list_files")
        if is_file(root, files, folder):
            raise PathError(f"path {folder!r} is a file in branch {branch!r}; use read_file")
        found = folder_entries(root, folder)
        protection = self.workspace.protection
        listed = [e for e in entries(found, files, folder)
                  if protecting(protection, root, RelPath(e["path"])) is None]  # fmt: skip
        if found is None and not listed and folder:
            raise NotFound(f"path {folder!r}: no such folder in branch {branch!r}")
        return {"branch": branch, "version": chosen.version, "path": folder, "entries": listed}

    # -- staging -------------------------------------------------------------------------------

    @tool(
        STAGES,
        branch=BRANCH,
        path=PATH,
        content=f"the file's full new text (at most {MAX_TEXT_BYTES // 2**20} MiB as UTF-8)",
    )
    def write_file(self, branch: str, path: str, content: str) -> shapes.Staged:
        """Stage the full text of a file (created if new): a new version of the branch."""
        chosen = self._branch(branch)
        return self._staged(chosen, chosen.write(path, content))

    @tool(STAGES, branch=BRANCH, path=PATH,
          old="the exact text to replace, with enough context to occur exactly once",
          new="the text to put in its place")  # fmt: skip
    def replace_in_file(self, branch: str, path: str, old: str, new: str) -> shapes.Staged:
        """Replace the one exact occurrence of `old` in `path` by `new`; refused when `old`
        occurs zero or several times (give more context)."""
        chosen = self._branch(branch)
        return self._staged(chosen, chosen.replace(path, old, new))

    @tool(STAGES, branch=BRANCH,
          patch="a unified diff (git diff or diff -u), paths relative to the project's root "
          "(a/ b/ prefixes are fine)")  # fmt: skip
    def apply_patch(self, branch: str, patch: str) -> shapes.Staged:
        """Apply a unified diff (one or more files; '--- /dev/null' creates, '+++ /dev/null'
        deletes); all files or none."""
        chosen = self._branch(branch)
        return self._staged(chosen, chosen.apply_patch(patch))

    @tool(STAGES, branch=BRANCH, path=PATH)
    def delete_file(self, branch: str, path: str) -> shapes.Staged:
        """Stage the deletion of a file: a new version of the branch without it (the user's
        own file stays)."""
        chosen = self._branch(branch)
        return self._staged(chosen, chosen.delete(path))

    @tool(
        STAGES,
        branch=BRANCH,
        fix="a fix id from a lint row's 'fixes' (e.g. '3.1'), from the branch's last lint",
    )
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

    @tool(READS, branch=BRANCH,
          paths="files to lint (default: every file the branch staged)",
          new_only="only the lints the branch introduced (not already in the user's files)",
          servers="only these of the server's language servers, by name (e.g. 'ruff', "
          "'pyright'; default: all it runs that lint, not those kept for navigation such "
          "as jedi-language-server)")  # fmt: skip
    def lint(self, branch: str, paths: list[str] | None = None, new_only: bool = False,
             servers: list[str] | None = None) -> shapes.Lints:  # fmt: skip
        """Lints of the branch's current version, final for exactly that version (default
        paths: the files it staged). Each row has its version, 1-based positions, `new`
        (the branch introduced it) and quick fixes as {id, title} for apply_fix."""
        chosen = self._branch(branch)
        for path in arguments.paths("paths", paths) or ():
            self._refuse_protected(path, "lint")
        running = [server_name(s) for s in self.workspace.servers]
        unknown = [s for s in servers or () if s not in running]
        if unknown:
            raise NotFound(f"servers: {', '.join(map(repr, unknown))} not among this "
                           f"workspace's language servers ({', '.join(running)})")  # fmt: skip
        report = chosen.lint_report(paths, new_only, servers=servers)
        ids = self._offer(chosen, report.version, [lint.fixes for lint in report.lints])
        return {"branch": branch, "version": report.version,
                "lints": shapes.lint_rows(report, ids)}  # fmt: skip

    @tool(READS, branch=BRANCH, path=PATH, line=LINE, column=COLUMN)
    def definition(self, branch: str, path: str, line: int, column: int) -> shapes.Locations:
        """Where the symbol at path:line:column (1-based) is defined, in the branch's version."""
        chosen = self._navigable(branch, "definition", path)
        version, found = stable(chosen, lambda: chosen.definition(path, line, column))
        return {"branch": branch, "version": version,
                "locations": shapes.plain(self._unprotected(found))}  # fmt: skip

    @tool(READS, branch=BRANCH, path=PATH, line=LINE, column=COLUMN)
    def references(self, branch: str, path: str, line: int, column: int) -> shapes.Locations:
        """Every reference to the symbol at path:line:column (1-based)."""
        chosen = self._navigable(branch, "references", path)
        version, found = stable(chosen, lambda: chosen.references(path, line, column))
        return {"branch": branch, "version": version,
                "locations": shapes.plain(self._unprotected(found))}  # fmt: skip

    @tool(READS, branch=BRANCH, path=PATH, line=LINE, column=COLUMN)
    def hover(self, branch: str, path: str, line: int, column: int) -> shapes.HoverAnswer:
        """The hover text (type, docs) at path:line:column (1-based); null where the
        language servers have nothing to show there."""
        chosen = self._navigable(branch, "hover", path)
        version, found = stable(chosen, lambda: chosen.hover(path, line, column))
        if found is not None:
            self._refuse_hover_into_protected(chosen, path, line, column)
        return {"branch": branch, "version": version, "hover": shapes.hover(found)}

    @tool(READS, branch=BRANCH,
          path=f"{PATH}: that file's symbols (give path or query, not both)",
          query="a name or part of one: matching symbols across the project (as the "
          "user's folder has them), instead of path")  # fmt: skip
    def symbols(
        self, branch: str, path: str | None = None, query: str | None = None
    ) -> shapes.Symbols:
        """Document symbols of `path` in the branch's version, or (with `query` instead) the
        workspace symbols matching the query, as the user's folder shows them."""
        chosen = self._navigable(branch, "symbols", path)
        if (path is None) == (query is None):
            raise ArgumentError("symbols: give either path (document symbols) or query "
                             "(workspace symbols)")  # fmt: skip
        if path is not None:
            version, found = stable(chosen, lambda: chosen.symbols(path))
        else:
            version, found = chosen.version, self.workspace.symbols(query)
        return {"branch": branch, "version": version,
                "symbols": shapes.plain(self._unprotected(found))}  # fmt: skip

    # -- runs, diff, merge, accept -------------------------------------------------------------

    @tool(
        Hints(read_only=False, open_world=True),
        branch=BRANCH,
        command="a shell command (bash -c), run at the project's root; at most "
        f"{COMMAND_LIMIT} bytes (a longer script: write_file it, then run it)",
        timeout=bounded(
            "seconds before the run is killed (then timed_out is true and exit_code null)",
            exclusiveMinimum=0,
        ),
        network="let the run reach the network (default: offline)",
        keep="stage what the run wrote under the project as the branch's next version",
        max_output=bounded(
            "characters of each stream (stdout, stderr) to return, half from "
            f"the start and half from the end (default {RUN_OUTPUT}, at most "
            f"{OUTPUT_CAP})",
            minimum=1,
            maximum=OUTPUT_CAP,
        ),
    )
    def run(self, branch: str, command: str, timeout: float = 60, network: bool = False,
            keep: bool = False, max_output: int = RUN_OUTPUT, *,
            cancel: threading.Event | None = None,
            on_output: Callable[[str, bytes], object] | None = None) -> shapes.Ran:  # fmt: skip
        """Run a shell command in the shadow at the branch's version (sandboxed, offline
        unless network). With keep, what it wrote under the project (less .gitignore'd files
        and caches) becomes the branch's next version; otherwise it stays in its scratch.
        A run that times out answers like any other, with timed_out true and its output."""
        chosen = self._branch(branch)
        if not command.strip():
            raise ArgumentError("command: give a shell command to run")
        if (size := len(command.encode("utf-8", "surrogatepass"))) > COMMAND_LIMIT:
            raise ArgumentError(f"command: {size} bytes, over the {COMMAND_LIMIT}-byte limit of "
                                "one argument (bash -c); write_file the script (e.g. gen.sh) "
                                "and run it: bash gen.sh")  # fmt: skip
        if timeout <= 0:
            raise ArgumentError(f"timeout={timeout}: give a positive number of seconds")
        if not 0 < max_output <= OUTPUT_CAP:
            raise ArgumentError(f"max_output={max_output}: give 1 to {OUTPUT_CAP} characters")
        result = chosen.run(command, timeout=timeout, network=network, keep=keep,
                            cancel=cancel or threading.Event(), on_output=on_output)  # fmt: skip
        return {"branch": branch, "version": chosen.version,
                "result": shapes.run(result, max_output)}  # fmt: skip

    @tool(READS, branch=BRANCH)
    def diff(self, branch: str) -> shapes.DiffAnswer:
        """The branch's edits against its base as a unified diff (git style)."""
        chosen = self._branch(branch)
        version, (text, changed) = stable(
            chosen, lambda: (str(chosen.diff()), shapes.changed(chosen.bases, chosen.files))
        )
        return {"branch": branch, "version": version, "paths": changed, "diff": text}

    @tool(Hints(read_only=False),
          a="the first branch's name (its side of a conflict follows '<<<<<<< A')",
          b="the second branch's name (its side of a conflict ends at '>>>>>>> B')",
          name="the new branch's name (default: 'merge-A-B', A the first branch, B the "
          "second)")  # fmt: skip
    def merge_check(self, a: str, b: str, name: str | None = None) -> shapes.Merged:
        """A new branch (`name`, default 'merge-A-B') holding the three-way merge of branches
        a and b over their common base, as `git merge-file` merges; `conflicts` lists the
        paths that did not merge: both changed the same lines (they hold git's conflict
        markers, labelled with the branch names), a binary file both changed, a file one side
        deleted. Lint and run it before accepting either; it is not accepted until each
        conflict is written (or deleted) again."""
        first, second = self._branch(a), self._branch(b)
        target = name or f"merge-{a}-{b}"  # the workspace's default name
        if target in self.workspace.branches:  # its own refusal speaks the Python API
            raise ArgumentError(f"merge_check: branch {target!r} exists; give another name, "
                                "or drop_branch it first")  # fmt: skip
        merged = self.workspace.merge_check(first, second, name)
        return {"branch": merged.name, "version": merged.version,
                "conflicts": list(merged.conflicts), "files": sorted(merged.files)}  # fmt: skip

    @tool(WRITES_FOLDER, branch=BRANCH)
    def accept(self, branch: str) -> shapes.AcceptedAnswer:
        """Write the branch's edits into the user's folder (only when the server was started
        with --allow-accept); refused with the paths when the user changed them meanwhile."""
        if not self.allow_accept:
            raise ShadowError(self.withheld("accept"))
        done = self._branch(branch).accept()
        return {"branch": branch, "written": list(done.written), "deleted": list(done.deleted),
                "merged": list(done.merged)}  # fmt: skip

    @tool(Hints(read_only=False), branch=BRANCH,
          message="the commit message (default: the branch's name, version and last edit)",
          ref="the ref to point at the commit (default: refs/heads/agent/BRANCH; refs outside "
              "refs/heads/agent/ need the server's --allow-accept)")  # fmt: skip
    def commit_branch(self, branch: str, message: str | None = None,
                      ref: str | None = None) -> shapes.Committed:  # fmt: skip
        """Export the branch's current files as a git commit in the project's repository and
        point a ref at it, for review with git (`git show`, `git log`, a pull request). The
        working tree, the index and HEAD are untouched; the parent is the commit the branch's
        base matches."""
        if ref is not None and not ref.startswith(AGENT_REFS) and not self.allow_accept:
            raise ShadowError(f"commit_branch: ref {ref!r} is outside {AGENT_REFS} (it could "
                              "move one of the user's branches); only a server started with "
                              "--allow-accept may write it")  # fmt: skip
        chosen = self._branch(branch)
        version, commit = stable(chosen, lambda: chosen.commit(ref=ref, message=message))
        return {"branch": branch, "version": version, "commit": commit,
                "ref": ref or default_ref(chosen.name)}  # fmt: skip

    # -- helpers ----------------------------------------------------------------------------------

    def _branch(self, name: str) -> Any:
        if self.pinned is not None and name != self.pinned:
            raise ArgumentError(f"branch {name!r}: this server works on branch "
                                f"{self.pinned!r} only (omit branch, or pass that)")  # fmt: skip
        found = self.workspace.branches.get(name)
        if found is None:
            known = ", ".join(sorted(self.workspace.branches)) or "none yet"
            raise NotFound(f"branch {name!r} does not exist (branches: {known}); "
                           "create it with create_branch")  # fmt: skip
        return found

    def _navigable(self, name: str, tool: str, path: str | None) -> Any:
        """The branch, once some language server of the workspace navigates code (ruff alone
        would answer nothing, silently) and `path` is not protected."""
        if path is not None:
            self._refuse_protected(arguments.path("path", path), tool)
        servers = [server_name(s) for s in self.workspace.servers]
        if servers and all(s in LINT_ONLY for s in servers):
            raise ServerError(
                f"{tool}: the workspace's language servers ({', '.join(servers)}) only lint; "
                f"serve it with one that navigates, e.g. shadowkernel mcp SRC --servers "
                f"{' '.join(servers)} jedi-language-server (or pyright, basedpyright, pylsp)"
            )
        return self._branch(name)

    def _refuse_protected(self, path: RelPath, tool: str) -> None:
        refuse_protected(self.workspace.protection, self.workspace.root, path, tool)

    def _unprotected(self, found: list[Any]) -> list[Any]:
        """Locations or symbols less those in protected paths (a symbol's name there is not
        the agent's to see either); an absolute path is outside the project."""
        protection, root = self.workspace.protection, self.workspace.root
        return [x for x in found if x.path.startswith("/")
                or protecting(protection, root, RelPath(x.path)) is None]  # fmt: skip

    def _refuse_hover_into_protected(self, chosen: Any, path: str, line: int,
                                     column: int) -> None:  # fmt: skip
        """PathError when the symbol hovered is defined in a protected file: its hover shows
        the definition (`TOKEN = "..."` of a protected settings file). Asked only when the
        workspace protects globs: version-control metadata holds no code."""
        protection = self.workspace.protection
        if not protection.globs:
            return
        for place in chosen.definition(path, line, column):
            found = place.in_workspace and protecting(protection, self.workspace.root,
                                                      RelPath(place.path))  # fmt: skip
            if found:
                raise PathError(f"hover: the symbol at {path}:{line}:{column} is defined in "
                                f"{found[1]!r}, which is protected ({found[0]}); agents may "
                                "not read protected paths, through a hover either")  # fmt: skip

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


def server_name(server: Any) -> str:
    """A workspace's server as named: a built-in's name, a ServerSpec, a jupyter-lsp dict."""
    if isinstance(server, Mapping):
        return str(server.get("name"))
    return str(getattr(server, "name", server))


def stable(branch: Any, ask: Callable[[], T], tries: int = 5) -> tuple[int, T]:
    """(version, ask()) with ask() answered at that version: asked again while another
    client staged a version meanwhile (the API answers at the current version)."""
    for _ in range(tries):
        before = branch.version
        answer = ask()
        if branch.version == before:
            return before, answer
    raise ShadowError(f"branch {branch.name!r} kept changing while answering; ask again")


# What the tools read is refused where the workspace's protection refuses writes: version-control
# metadata (`.git/config` can hold credentials, a token in a remote's URL) and the user's
# protect= globs (a `.env` holds secrets). `Branch.read` itself does not refuse: its caller is
# the notebook's user, who owns the folder (and could open() the file anyway); the tools are
# where an outside agent comes in.
def refuse_protected(protection: Protection, root: str, path: RelPath, tool: str) -> None:
    """PathError when `path` is protected, by its name or by where it leads in the user's
    folder (a link `meta -> .git`, `settings -> .env`)."""
    found = protecting(protection, root, path)
    if found is None:
        return
    rule, target = found
    what = "it is" if target == path else f"it leads to {target!r}, which is"
    raise PathError(f"{tool}: {path!r} is refused: {what} protected ({rule}), and agents may "
                    "not read protected paths (they can hold credentials: a token in "
                    ".git/config's remote URL, a .env's secrets)")  # fmt: skip


def protecting(protection: Protection, root: str, path: RelPath) -> tuple[str, RelPath] | None:
    """(what protects it, the protected path) for `path` itself or, when `path` is not
    protected by name, the path it leads to in the user's folder; None when neither is."""
    folder = os.path.isdir(os.path.join(root, path))  # `secrets/` protects the folder too
    rule = protection.rule(path, folder)
    if rule is not None:
        return rule, path
    resolved = relative_to(os.path.realpath(os.path.join(root, path)), root)
    rule = None if resolved is None else protection.rule(resolved, folder)
    return None if rule is None or resolved is None else (rule, resolved)


def is_file(root: str, files: Mapping[RelPath, bytes | None], path: RelPath) -> bool:
    """Whether `path` is a file in a branch: staged as one, or untouched and one in the folder."""
    if path in files:
        return files[path] is not None
    return bool(path) and os.path.isfile(os.path.join(root, path))


def folder_entries(root: str, folder: RelPath) -> dict[str, shapes.Kind] | None:
    """name -> kind of a folder in the user's folder; None when it is not a folder there."""
    full = os.path.join(root, folder)
    real = os.path.realpath(full)
    if not is_within(real, root):
        raise PathError(f"path {folder!r} leads out of the project through a symlink")
    if not os.path.isdir(full):
        return None
    with os.scandir(full) as scan:
        return {e.name: _kind(e) for e in scan}


def _kind(entry: os.DirEntry[str]) -> shapes.Kind:
    if entry.is_symlink():
        return "symlink"
    return "dir" if entry.is_dir() else "file"


def entries(
    found: Mapping[str, shapes.Kind] | None, files: Mapping[RelPath, bytes | None], folder: RelPath
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


def pinned_spec(spec: ToolSpec, branch: str) -> ToolSpec:
    """`spec` with its `branch` parameter defaulting to `branch`."""
    params = tuple(dataclasses.replace(p, default=branch) if p.name == "branch" else p
                   for p in spec.params)  # fmt: skip
    return dataclasses.replace(spec, params=params)
