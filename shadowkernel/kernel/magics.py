"""The magics: one `Magics` class per topic, each magic a few lines over the public API.

Every magic parses its line with `magic_arguments` (so `%lint?` explains itself), its words
split by shell rules (`"docs/release notes.txt"` is one path, quotes removed), delegates
to the `Session` (which owns the workspace and makes waits interruptible), and turns any
`ShadowError` into a one-line `UsageError`: the user can fix it, and a traceback would hide
the message. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import functools
import shlex
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import pandas as pd
from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments

from ..errors import ShadowError, StagingError
from ..text import patches
from ..workspace.statedir import restored_summary
from . import live, parsing
from .display import HoverText, Locations
from .session import Interrupted, Session

F = TypeVar("F", bound=Callable[..., Any])


def usage_errors(method: F) -> F:
    """Translate errors the user can fix (ShadowError) into a one-line UsageError."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except ShadowError as error:
            raise UsageError(" ".join(str(error).split()) or type(error).__name__) from None

    return wrapper  # type: ignore[return-value]


def _args(magic: Callable[..., Any], line: str) -> Any:
    """The magic's arguments, its line split as a shell splits it (IPython's own splitting
    keeps quotes in the words: a path in quotes would be staged with them in its name)."""
    try:
        words = shlex.split(line)
    except ValueError as error:  # "No closing quotation", "No escaped character"
        hint = "close the quote, or escape a lone quote or trailing backslash with a backslash"
        raise UsageError(f"{str(error).lower()} in {line.strip()!r}: {hint}") from None
    try:
        return _parser(magic).parse_args(words)
    except UsageError as error:
        raise UsageError(_required(magic, str(error))) from None


def _parser(magic: Callable[..., Any]) -> Any:
    """The ArgumentParser `@magic_arguments` put on the magic."""
    return magic.parser  # type: ignore[attr-defined]


def _required(magic: Callable[..., Any], message: str) -> str:
    """argparse's "the following arguments are required: branch, paths" without the
    positionals that may be left out (argparse names a `nargs="*"` one after a missing one)."""
    head, found, names = message.partition("the following arguments are required: ")
    if not found:
        return message
    actions = _parser(magic)._actions  # argparse keeps no public list of them
    optional = {a.dest for a in actions if a.nargs in ("*", "?")}
    kept = [n for n in names.split(", ") if n not in optional]
    return f"{head}{found}{', '.join(kept)}"


def _need_cell(name: str, words: str, cell: str | None) -> str:
    """The cell; the line form of a cell magic (registered as a line magic only for its
    help) is refused."""
    if cell is None:
        raise UsageError(f"%%{name} is a cell magic: `%%{name} {words}` as the cell's first "
                         f"line, the cell's content below it (%%{name}? explains)")  # fmt: skip
    return cell


class _SessionMagics(Magics):
    def __init__(self, shell: Any, session: Session) -> None:
        super().__init__(shell)
        self.session = session


@magics_class
class ShadowMagics(_SessionMagics):
    """Open, inspect and close the shadow workspace."""

    @magic_arguments()
    @argument("action", choices=["open", "status", "close", "panel", "mcp"],
              help="open PATH: mount a shadow of PATH (it becomes `ws`); status: what is "
                   "open; close: stop servers and unmount; panel: branch picker, lint filter "
                   "and a live status line; mcp: serve `ws` to outside agents over MCP "
                   "(HTTP, bearer token) and print their configuration")  # fmt: skip
    @argument("path", nargs="?", help="the project folder (open only; never written)")
    @argument("--servers", nargs="+", default=["ruff"], metavar="S",
              help="language servers (default: ruff), e.g. ruff basedpyright")  # fmt: skip
    @argument("--lanes", type=int, default=1, help="shadows serving requests in parallel")
    @argument("--port", type=int, default=0, help="mcp: the port (default: a free one)")
    @argument("--allow-accept", action="store_true",
              help="mcp: let agents accept branches into the folder")  # fmt: skip
    @argument("--stop", action="store_true", help="mcp: stop serving")
    @argument("--mode", choices=["auto", "fuse", "documents"], default="auto",
              help="fuse: a FUSE mount; documents: the fallback without one")  # fmt: skip
    @argument("--in-memory", action="store_true",
              help="open: keep branches in this kernel only, none restored and none kept "
                   "(state=None): a demo notebook runs again from the same start")  # fmt: skip
    @line_magic
    @usage_errors
    def shadow(self, line: str) -> Any:
        """Open, show or close the shadow of a project folder. Opening another one closes
        the open one (a --in-memory shadow's branches are then gone: it names them)."""
        args = _args(self.shadow, line)
        if args.action == "open":
            if not args.path:
                raise UsageError("%shadow open needs PATH, the project folder to shadow")
            gone = _in_memory_branches(self.session.workspace)
            ws = self.session.open(args.path, args.servers, args.lanes, args.mode,
                                   in_memory=args.in_memory)  # fmt: skip
            if gone:
                print(f"closed the previous shadow; its in-memory branches are gone: {gone}")
            print(f"shadow of {ws.root} open with {', '.join(ws.servers)} (as `ws`)")
            print(f"mode: {ws.mode} ({ws.mode_reason})")
            print(restored_summary(ws.restored, ws.state_dir))
        elif args.action == "close":
            closed = self.session.close()
            print("shadow closed: servers stopped, unmounted" if closed else
                  "no shadow is open: nothing to close")  # fmt: skip
        elif args.action == "mcp":
            self._mcp(args)
        elif args.action == "status":
            print(live.status_text(self.session.require(), self.session))
        else:
            from .widgets import Panel

            return Panel(self.session)

    def _mcp(self, args: Any) -> None:
        if args.stop:
            print("MCP server stopped" if self.session.stop_mcp() else "no MCP server runs")
            return
        server = self.session.serve_mcp(args.port, args.allow_accept)
        from ..mcp.snippets import all_snippets

        snippets = all_snippets(server.url, server.token)
        print(f"serving `ws` to MCP clients at {server.url} (token in {server.token_file}; "
              f"%shadow mcp --stop ends it)\n\n{snippets}")  # fmt: skip


def _in_memory_branches(ws: Any) -> str:
    """The branches opening another shadow forgets ('fix (v4), other (v1)'), or '': only an
    in-memory workspace's (a durable one's are kept and come back when it opens again)."""
    if ws is None or ws.closed or ws.state_dir is not None:
        return ""
    return ", ".join(f"{name} (v{b.version})" for name, b in ws.branches.items())


@magics_class
class BranchMagics(_SessionMagics):
    """Create, list, diff, accept and drop branches."""

    @magic_arguments()
    @argument("action", choices=["new", "list", "diff", "accept", "drop"])
    @argument("name", nargs="?", help="the branch (all actions but list)")
    @argument("--scratch", action="store_true",
              help="diff: also list what runs wrote to the branch's scratch layer (which "
                   "accept leaves out; %%%%shadow_run --keep stages it instead)")  # fmt: skip
    @argument("--reset", action="store_true",
              help="new: if NAME exists, drop it (its versions, scratch and runs) and fork "
                   "it again, saying what was dropped: a cell that starts a branch runs "
                   "again from the same start")  # fmt: skip
    @line_magic
    @usage_errors
    def branch(self, line: str) -> Any:
        """new NAME forks from the user's files (an existing NAME is refused, its work kept,
        unless --reset); accept NAME writes them (the only magic that does); diff NAME shows
        the edits (--scratch: and what runs wrote); drop NAME forgets them; list shows all
        branches."""
        args = _args(self.branch, line)
        if args.scratch and args.action != "diff":
            raise UsageError("--scratch goes with %branch diff NAME")
        if args.reset and args.action != "new":
            raise UsageError("--reset goes with %branch new NAME")
        if args.action == "list":
            if args.name:
                raise UsageError(f"%branch list takes no NAME (got {args.name!r})")
            return _branch_table(self.session.require())
        if not args.name:
            raise UsageError(f"%branch {args.action} needs NAME")
        if args.action == "new":
            self._new(args.name, args.reset)
            return None
        branch = self.session.branch(args.name)
        if args.action == "diff":
            return branch.diff(scratch=args.scratch)
        if args.action == "drop":
            branch.drop()
            print(f"branch {args.name!r} dropped; the user's folder is untouched")
            return None
        done = branch.accept()
        print(f"accepted {args.name!r}: wrote {list(done.written)}, deleted {list(done.deleted)}"
              f", merged {list(done.merged)}")  # fmt: skip
        return None

    def _new(self, name: str, reset: bool) -> None:
        """Fork NAME; an existing NAME is dropped first only when asked (--reset), since its
        versions may hold work no one has looked at yet."""
        ws = self.session.require()
        old = ws.branches.get(name)
        if old is not None and not reset:
            quoted = shlex.quote(name)
            raise UsageError(f"branch {name!r} exists ({_work(old)}): use it as it is, "
                             f"%branch new {quoted} --reset to drop it and fork it again, or "
                             f"%branch drop {quoted}")  # fmt: skip
        if old is None:
            ws.branch(name)
            print(f"branch {name!r} forked from {ws.root}")
            return
        dropped = _work(old)
        old.drop()
        ws.branch(name)
        print(f"branch {name!r} forked again from {ws.root} (dropped the old one: {dropped})")


def _work(branch: Any) -> str:
    """What a branch holds, in a few words: `v3, 2 file(s) touched` or `v0, no edits`."""
    touched = len(branch.files)
    return f"v{branch.version}, {f'{touched} file(s) touched' if touched else 'no edits'}"


def _branch_table(ws: Any) -> pd.DataFrame:
    rows = [(b.name, b.version, len(b.files), b.versions[-1].op) for b in ws.branches.values()]
    return pd.DataFrame(rows, columns=["branch", "version", "files", "last edit"])


@magics_class
class StageMagics(_SessionMagics):
    """Stage edits on a branch."""

    @magic_arguments("%stage")  # its usage line reads %%stage
    @argument("branch")
    @argument("path", nargs="?", help="the file (not with --patch); quote a path with spaces")
    @argument(
        "--patch",
        action="store_true",
        help="the cell is a unified diff (one or more files; all or nothing)",
    )
    @argument("--replace", action="store_true", help=(
        "the cell is search/replace blocks for PATH, each: a line '<<<<<<< SEARCH', the old "
        "lines (must occur exactly once), a line '=======', the new lines, a line "
        "'>>>>>>> REPLACE'; applied in order, all or nothing"))  # fmt: skip
    @line_cell_magic  # a cell magic; also a line one so that `%stage?` finds its help
    @usage_errors
    def stage(self, line: str, cell: str | None = None) -> None:
        """Stage the cell on BRANCH: the new content of PATH (default), a unified diff
        (--patch) or search/replace blocks (--replace). Each staging makes a new version. A
        --patch or --replace cell run again, its edit already in the branch, says so."""
        cell = _need_cell("stage", "BRANCH PATH", cell)
        args = _args(self.stage, line)
        branch = self.session.branch(args.branch)
        if args.patch and args.replace:
            raise UsageError("give --patch or --replace, not both")
        if args.patch:
            version = _patched(branch, cell)
        elif not args.path:
            raise UsageError("%%stage needs PATH (the file to write) unless --patch")
        elif args.replace:
            version = branch.write(args.path, _replaced(branch, args.path, cell))
        else:
            version = branch.write(args.path, cell)
        print(f"{branch.name} v{version}: {branch.versions[-1].op}")


def _patched(branch: Any, cell: str) -> int:
    """Apply the cell's unified diff to BRANCH. A diff that is applied already (it applies
    backwards) says so, as `_replaced` does for blocks."""
    try:
        return branch.apply_patch(cell)
    except StagingError:
        if not _applies_backwards(branch, cell):
            raise
    quoted = shlex.quote(branch.name)
    raise StagingError(f"patch: applied already in branch {branch.name!r} (v{branch.version}): "
                       "its new lines are there, its removed ones are not; did this cell run "
                       f"before? %branch new {quoted} --reset starts the branch over")  # fmt: skip


def _applies_backwards(branch: Any, patch: str) -> bool:
    """Whether every file of `patch` is one it edits (not creates, deletes or renames) and
    the patch applies in reverse to the branch's text of it."""
    try:
        files = patches.parse_patch(patch)
        for file in files:
            if file.old_path is None or file.old_path != file.new_path:
                return False
            back = [patches.Hunk(h.old_start, h.new, h.old, h.header) for h in file.hunks]
            patches.apply_hunks(branch.read(file.path), back, file.path)
    except ShadowError:
        return False
    return bool(files)


def _replaced(branch: Any, path: str, cell: str) -> str:
    """PATH's text in BRANCH with the cell's search/replace blocks applied. Blocks that are
    applied already (each REPLACE text in the file, no SEARCH text) say so: a cell run again
    is the likely cause, and "does not occur" alone sends the user hunting for a typo."""
    blocks = parsing.parse_blocks(cell)
    text = branch.read(path)
    try:
        return parsing.apply_blocks(text, blocks, path)
    except StagingError:
        if not all(b.replace and b.replace in text and b.search not in text for b in blocks):
            raise
    quoted = shlex.quote(branch.name)
    raise StagingError(f"{path}: the blocks are applied already in branch {branch.name!r} "
                       f"(v{branch.version}): each REPLACE text is there, no SEARCH text is; "
                       f"did this cell run before? %branch new {quoted} --reset starts the "
                       "branch over")  # fmt: skip


@magics_class
class LintMagics(_SessionMagics):
    """Lint tables."""

    @magic_arguments()
    @argument("branch")
    @argument("paths", nargs="*", help="files to lint (default: the files the branch staged)")
    @argument("--new-only", action="store_true", help="only lints the branch introduced")
    @argument("--server", action="append", metavar="S",
              help="ask only this server (repeatable; default: all of the shadow's)")  # fmt: skip
    @line_magic
    @usage_errors
    def lint(self, line: str) -> pd.DataFrame:
        """Lints of BRANCH at its current version as a table (1-based positions); the `new`
        column says whether the branch introduced each lint."""
        args = _args(self.lint, line)
        branch = self.session.branch(args.branch)
        return self.session.call(branch.lint, args.paths or None, args.new_only,
                                 servers=args.server)  # fmt: skip


@magics_class
class NavigationMagics(_SessionMagics):
    """Go to definition, find references, hover."""

    def _at(self, magic: Callable[..., Any], line: str) -> tuple[Any, parsing.Position]:
        args = _args(magic, line)
        return self.session.branch(args.branch), parsing.parse_position(args.position)

    @magic_arguments()
    @argument("branch")
    @argument("position", help="PATH:LINE:COLUMN, 1-based")
    @line_magic
    @usage_errors
    def goto(self, line: str) -> Locations:
        """Where the symbol at PATH:LINE:COLUMN is defined, in BRANCH's version."""
        branch, at = self._at(self.goto, line)
        found = self.session.call(branch.definition, at.path, at.line, at.column)
        return Locations(found, "definitions")

    @magic_arguments()
    @argument("branch")
    @argument("position", help="PATH:LINE:COLUMN, 1-based")
    @line_magic
    @usage_errors
    def refs(self, line: str) -> Locations:
        """Every reference to the symbol at PATH:LINE:COLUMN, in BRANCH's version."""
        branch, at = self._at(self.refs, line)
        found = self.session.call(branch.references, at.path, at.line, at.column)
        return Locations(found, "references")

    @magic_arguments()
    @argument("branch")
    @argument("position", help="PATH:LINE:COLUMN, 1-based")
    @line_magic
    @usage_errors
    def hover(self, line: str) -> HoverText:
        """The hover text (type, docs) at PATH:LINE:COLUMN, in BRANCH's version."""
        branch, at = self._at(self.hover, line)
        return HoverText(self.session.call(branch.hover, at.path, at.line, at.column))


@magics_class
class RunMagics(_SessionMagics):
    """Run code inside the shadow."""

    @magic_arguments("%shadow_run")  # its usage line reads %%shadow_run
    @argument("branch")
    @argument("--timeout", type=float, default=60, metavar="S", help="kill after S seconds")
    @argument("--net", action="store_true", help="allow network access (default: cut off)")
    @argument(
        "--python",
        action="store_true",
        help="the cell is Python code (run by the project's interpreter)",
    )
    @argument("--keep", action="store_true",
              help="stage what the run wrote under the project as the branch's next version "
                   "(a formatter, a codemod, generated code)")  # fmt: skip
    @line_cell_magic  # a cell magic; also a line one so that `%shadow_run?` finds its help
    @usage_errors
    def shadow_run(self, line: str, cell: str | None = None) -> Any:
        """Run the cell (a shell command, or Python with --python) inside the shadow at
        BRANCH's version. Returns the RunResult (stdout, stderr, exit code, written files).
        What the run writes goes to the branch's scratch layer: later runs see it, but lints,
        %branch diff and %branch accept do not (%branch diff NAME --scratch lists it); with
        --keep it becomes the branch's next version instead. Interrupting the cell kills the
        run and shows what it printed so far."""
        cell = _need_cell("shadow_run", "BRANCH", cell)
        args = _args(self.shadow_run, line)
        branch = self.session.branch(args.branch)
        if args.timeout <= 0:
            raise UsageError(f"--timeout {args.timeout}: give a positive number of seconds")
        command = cell if args.python else cell.strip()
        if not command.strip():
            raise UsageError("the cell is empty: give a command (or Python code with --python)")
        try:
            return self.session.run(branch, command, timeout=args.timeout, network=args.net,
                                    python=args.python, keep=args.keep)  # fmt: skip
        except Interrupted as stop:
            if stop.result is not None:  # what the run printed before it was killed
                sys.stdout.write(stop.result.stdout)
                sys.stderr.write(stop.result.stderr)
            raise UsageError("run interrupted (its processes were killed)") from None


@magics_class
class TimelineMagics(_SessionMagics):
    """The timeline of served requests."""

    @magic_arguments()
    @argument(
        "--no-follow", action="store_true", help="show a snapshot and return, even while agents run"
    )
    @argument(
        "--interval",
        type=float,
        default=live.INTERVAL,
        metavar="S",
        help=f"seconds between live updates (default {live.INTERVAL})",
    )
    @line_magic
    @usage_errors
    def timeline(self, line: str) -> None:
        """Show the timeline (who asked what, waits, switches). While agents started with
        start_agent() run, the cell follows them and updates the display in place; Ctrl-C
        stops following (the agents keep running)."""
        args = _args(self.timeline, line)
        if args.interval <= 0:
            raise UsageError(f"--interval {args.interval}: give a positive number of seconds")
        live.show_timeline(self.session, follow=not args.no_follow, interval=args.interval)


MAGICS = (ShadowMagics, BranchMagics, StageMagics, LintMagics, NavigationMagics, RunMagics,
          TimelineMagics)  # fmt: skip
