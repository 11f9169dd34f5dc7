"""The `shadowkernel` command.

    shadowkernel mount SRC MNT          # foreground; Ctrl-C unmounts
    shadowkernel setup-fuse             # build the fast (patched) pyfuse3 into this environment
    shadowkernel lint SRC [--server S] [--stage PATH=FILE]... [--delete PATH]... [--json]
    shadowkernel run SRC [--stage PATH=FILE]... [--timeout S] [--net] -- CMD...
    shadowkernel mcp SRC [--servers S...] [--http HOST:PORT] [--allow-accept]
                         [--branch NAME [--stage PATH=FILE ...] [--delete PATH ...]]
    shadowkernel state [--prune]       # the folders whose branches are kept; delete the gone

`lint` and `run` serve agents outside Jupyter: each stages the given files on one throwaway
branch of SRC (SRC itself is never written), answers, and exits. `lint` exits 1 when it
reported lints (like ruff); `run` exits with the command's status (124 at the timeout).
`mcp` serves persistent branches of SRC to MCP clients until stdin closes (stdio) or Ctrl-C.
`state` lists the state directories (one per folder whose branches are kept) and, with
`--prune`, deletes those whose folder is gone.

Each subcommand is a `cmd_*` function over the public API; a `ShadowError` becomes a one-line
message and exit status 2, never a traceback. Ctrl-C, SIGTERM and SIGHUP unwind like Ctrl-C
(what the command opened closes: runs, mounts, temporary folders) and exit 128+signal.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from .errors import ShadowError

if TYPE_CHECKING:
    from .workspace.kept import Kept


def cmd_mount(args: argparse.Namespace) -> int:
    from .overlay.shadow import Shadow

    _check_mountpoint(args.mountpoint)
    made = not os.path.lexists(args.mountpoint)  # Shadow makes a missing one; we remove it
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    try:
        with Shadow(args.source, args.mountpoint) as shadow:
            print(f"shadow of {shadow.source} mounted at {shadow.mountpoint}; Ctrl-C unmounts",
                  flush=True)  # fmt: skip
            while not stop.wait(0.5):
                if not shadow.alive:
                    print("the overlay process exited; the mount was detached", file=sys.stderr)
                    return 1
    finally:
        if made:
            with contextlib.suppress(OSError):
                os.rmdir(args.mountpoint)
    print("unmounted; the user's folder was not written", flush=True)
    return 0


def _check_mountpoint(path: str) -> None:
    """MNT must be empty: a mount over files (or over another mount, a running shadow's)
    would hide them until it ends. A missing MNT is made, a file is Shadow's to refuse, and
    a dead mount (ENOTCONN) is Shadow's to clear."""
    try:
        entries = os.listdir(path)
    except OSError:
        return
    if entries or os.path.ismount(path):
        what = "is a mount point" if os.path.ismount(path) else "is not empty"
        raise ShadowError(f"mountpoint {path!r} {what}: a shadow mounted there would hide "
                          "what it holds; give an empty folder (or a new path: one is made)",
                          )  # fmt: skip


def cmd_setup_fuse(args: argparse.Namespace) -> int:
    from .overlay import fastpath

    if fastpath.is_patched() and fastpath.cached_wheel() and not args.force:
        print("pyfuse3 is already the patched build: the shadow runs on the fast path")
        return 0
    fastpath.build(say=lambda line: print(f"setup-fuse: {line}", flush=True), rebuild=args.force)
    return 0


def cmd_lint(args: argparse.Namespace) -> int:
    import json

    if not (args.stage or args.delete or args.path):
        raise ShadowError("nothing to lint: stage files (--stage PATH=FILE) or name the files "
                          "of SRC to lint (--path PATH)")  # fmt: skip
    # A throwaway branch: kept in memory only, so the next call starts afresh.
    with _workspace(args.source, servers=args.server or ["ruff"], state=None) as ws:
        branch = _stage(ws.branch("cli"), args)
        table = branch.lint(paths=args.path or None, new_only=args.new_only)
    if args.json:
        rows = table.drop(columns=["fixes"]).to_dict(orient="records")
        for row, fixes in zip(rows, table["fixes"], strict=True):
            row["new"] = _flag(row["new"])
            row["fixes"] = [fix.title for fix in fixes]
        print(json.dumps(rows, default=str))
    else:
        for row in table.itertuples(index=False):
            mark = " (new)" if _flag(row.new) else ""
            print(f"{row.path}:{row.line}:{row.column}: {row.code} {_one_line(row.message)}{mark}")
    return 1 if len(table) else 0


def _one_line(message: str) -> str:
    """A lint's message on one line (ruff's add '\n\nhelp: ...'), so each lint is one line."""
    return "; ".join(part.strip() for part in message.splitlines() if part.strip())


def _flag(value: object) -> bool | None:
    """A nullable-boolean cell as a plain bool (None when unknown)."""
    return None if value is None or value != value or str(value) == "<NA>" else bool(value)


def cmd_run(args: argparse.Namespace) -> int:
    command = args.cmd
    if not command:
        print("shadowkernel run: give the command after '--'", file=sys.stderr)
        return 2
    with _workspace(args.source, servers=[], state=None) as ws:
        branch = _stage(ws.branch("cli"), args)
        # The output shows as it comes (a test suite's progress), whole (past the result's cap).
        result = branch.run(command, timeout=args.timeout, network=args.net,
                            sandbox=not args.no_sandbox, on_output=_echo)  # fmt: skip
    for note in result.notes:
        print(f"shadowkernel run: {note}", file=sys.stderr)
    if result.timed_out:
        return 124
    return result.exit_code if result.exit_code is not None else 1


def _echo(stream: str, chunk: bytes) -> None:
    """A run's output chunk onto our own stdout or stderr, at once. A closed pipe (`| head`)
    stops only the echo: the run goes on to its end."""
    out = sys.stdout if stream == "stdout" else sys.stderr
    with contextlib.suppress(OSError, ValueError):
        out.buffer.write(chunk)
        out.flush()


@contextlib.contextmanager
def _workspace(source: str, **options: Any) -> Iterator[Any]:
    """A Workspace that closes (its mount, servers, runs and temporary folders go) even when
    a second Ctrl-C or SIGTERM comes while it does."""
    from .workspace import Workspace

    ws = Workspace(source, **options)
    try:
        yield ws
    finally:
        with _stop_signals_ignored():
            ws.close()


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised like Ctrl-C's KeyboardInterrupt so that what the command
    opened closes on the way out instead of the process dying with it mounted."""

    def __init__(self, number: int) -> None:
        super().__init__(number)
        self.number = number


def _raise_stopped(number: int, _frame: object) -> None:
    raise Stopped(number)


@contextlib.contextmanager
def _stop_signals_ignored() -> Iterator[None]:
    previous = {number: signal.signal(number, signal.SIG_IGN) for number in STOP_SIGNALS}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


MCP_DESCRIPTION = """\
Serve SRC to MCP clients (Claude Code, Codex, Cursor, the MCP Inspector...) as tools:
branches of the project on which agents stage edits, lint, navigate (definition,
references, hover, symbols) and run commands in a sandbox. SRC is never written, except by
the accept tool, which only --allow-accept offers.

stdio (default) serves one client until stdin closes; --http serves many over streamable
HTTP at http://HOST:PORT/mcp behind a bearer token, printed once and written to a 0600 file
removed at exit (Ctrl-C, SIGTERM or SIGHUP). Requests, stdio or HTTP, are limited to what
staging takes (8 MiB of text per file).

examples:
  shadowkernel mcp ~/project                          # stdio, for a client's config
  shadowkernel mcp ~/project --http 127.0.0.1:8765    # HTTP, prints the token
  claude mcp add shadowkernel -- shadowkernel mcp ~/project
  shadowkernel mcp ~/project --branch fix-1 --stage pkg/mod.py=/tmp/start.py   # one branch
"""


def cmd_mcp(args: argparse.Namespace) -> int:
    try:
        from .mcp import transports
    except ImportError as error:
        raise ShadowError(f"needs the MCP SDK ({error}): pip install 'shadowkernel[mcp]'") from None
    from .agents.tools import Tools
    from .workspace import Workspace, statedir
    from .workspace.statedir import restored_summary

    servers = args.servers or default_mcp_servers()
    _check_mcp_arguments(args, servers)

    opened: list[Workspace] = []

    def open_workspace() -> Workspace:
        state = {None: statedir.DEFAULT, "none": None}.get(args.state, args.state)
        ws = Workspace(args.source, servers=servers, protect=args.protect, state=state)
        opened.append(ws)
        print(f"shadowkernel mcp: {restored_summary(ws.restored, ws.state_dir)}",
              file=sys.stderr, flush=True)  # fmt: skip
        if args.branch is not None:
            try:
                _stage(ws.branches.get(args.branch) or ws.branch(args.branch), args)
            except BaseException:
                ws.close()
                raise
        return ws

    if args.http is None:
        try:
            transports.serve_stdio(open_workspace, args.allow_accept, branch=args.branch)
        finally:
            _save_timeline(opened, args.timeline)
        return 0
    host, port = transports.parse_address(args.http)
    ws = open_workspace()
    try:
        tools = Tools(ws, args.allow_accept, branch=args.branch)
        server = transports.HttpServer(tools, host, port, args.token_file)
        if not transports.is_loopback(host):
            print(f"shadowkernel mcp: listening on {host}, beyond this machine; the token is "
                  "the only guard and travels unencrypted", file=sys.stderr)  # fmt: skip
        print(f"shadowkernel mcp: serving {ws.root} at {server.url}\n"
              f"token (shown once; also in {server.token_file}, mode 0600): {server.token}",
              flush=True)  # fmt: skip
        server.serve_forever()
    finally:
        with transports.stop_signals_ignored():
            ws.close()
            _save_timeline(opened, args.timeline)
    return 0


def _save_timeline(opened: list[Any], path: str | None) -> None:
    if path is not None and opened:
        try:
            opened[0].save_timeline(path)
        except OSError as exc:
            raise ShadowError(f"--timeline {path!r}: cannot write it: {exc.strerror}") from None


def _check_mcp_arguments(args: argparse.Namespace, servers: list[str]) -> None:
    """What the stdio server would only find while it serves (it opens SRC then, and a tool
    call says why that failed), or at its very end (--timeline), is said at once."""
    from pathlib import Path

    from .lsp import registry

    if not os.path.isdir(args.source):
        raise ShadowError(f"SRC {args.source!r} is not a folder")
    if (args.stage or args.delete) and args.branch is None:
        raise ShadowError("--stage and --delete stage on the --branch NAME the server is "
                          "pinned to: give --branch")  # fmt: skip
    if any(spec.endswith("=-") for spec in args.stage):
        raise ShadowError("shadowkernel mcp --stage PATH=-: stdin is the protocol's here; "
                          "give a file")  # fmt: skip
    if args.timeline is not None and not os.path.isdir(os.path.dirname(args.timeline) or "."):
        raise ShadowError(f"--timeline {args.timeline!r}: its folder does not exist")
    registry.resolve_specs(registry.split(servers, Path(args.source))[0], Path(args.source))


def default_mcp_servers() -> list[str]:
    """ruff lints; jedi-language-server (light) answers definition, references, hover and
    symbols, when it is installed."""
    from .lsp import available_servers

    return ["ruff", *(["jedi-language-server"] if available_servers().get("jedi-language-server")
                      else [])]  # fmt: skip


def _stage(branch, args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """Stage every --stage PATH=FILE (FILE '-' reads stdin) and --delete PATH on `branch`:
    UTF-8 text as text, anything else (an image, a data file) as bytes."""
    for spec in args.stage:
        path, sep, file = spec.partition("=")
        if not sep or not path or not file:
            raise ShadowError(f"--stage {spec!r}: give PATH=FILE (FILE '-' reads stdin)")
        data = _read_staged(spec, file)
        try:
            branch.write(path, data.decode("utf-8"))
        except UnicodeDecodeError:
            branch.write_bytes(path, data)
    for path in args.delete:
        branch.delete(path)
    return branch


def _read_staged(spec: str, file: str) -> bytes:
    try:
        if file == "-":
            return sys.stdin.buffer.read()
        with open(file, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise ShadowError(f"--stage {spec!r}: cannot read {file!r}: {exc.strerror}") from None


def _staging_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", metavar="SRC", help="the user's project folder (never written)")
    parser.add_argument("--stage", action="append", default=[], metavar="PATH=FILE",
                        help="stage FILE's text as PATH (relative to SRC); repeatable")  # fmt: skip
    parser.add_argument("--delete", action="append", default=[], metavar="PATH",
                        help="stage the deletion of PATH; repeatable")  # fmt: skip


def cmd_state(args: argparse.Namespace) -> int:
    from .workspace import kept, statedir

    states = kept.kept()
    pruned = {s.path for s in kept.prune(states)} if args.prune else set()
    print(f"state home: {statedir.state_home()}")
    for state in states:
        print(f"  {_state_line(state, state.path in pruned)}")
    gone = [s for s in states if s.orphaned and s.path not in pruned]
    if args.prune:
        print(f"pruned {len(pruned)} of {len(states)} (their folders were gone)")
    elif gone:
        print(f"{len(gone)} of {len(states)} belong to a folder that is gone: "
              "`shadowkernel state --prune` deletes their branches")  # fmt: skip
    return 0


def _state_line(state: Kept, pruned: bool) -> str:
    """'FOLDER  3 branches, 1.2 MB, changed 2026-12-03 07:13  [NAME-KEY]  STATUS'"""
    n = state.branches
    branches = "?" if n is None else f"{n} {'branch' if n == 1 else 'branches'}"
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(state.changed)) if state.changed else "-"
    status = ("pruned" if pruned else f"open in {state.holder}" if state.holder
              else "folder gone" if state.orphaned else "")  # fmt: skip
    line = (f"{state.folder or '(no folder recorded)'}  {branches}, {_size(state.size)}, "
            f"changed {when}  [{os.path.basename(state.path)}]")  # fmt: skip
    return f"{line}  {status}" if status else line


def _size(n: int) -> str:
    value, unit = float(n), "bytes"
    for bigger in ("KB", "MB", "GB"):
        if value < 1024:
            break
        value, unit = value / 1024, bigger
    return f"{n} bytes" if unit == "bytes" else f"{value:.1f} {unit}"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="shadowkernel", description="A private, writable shadow of a project for AI agents."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    mount = sub.add_parser(
        "mount", help="mount a shadow of SRC at MNT (foreground; Ctrl-C unmounts)"
    )
    mount.add_argument("source", metavar="SRC", help="the user's project folder (never written)")
    mount.add_argument("mountpoint", metavar="MNT", help="an empty folder outside SRC")
    mount.set_defaults(run=cmd_mount)

    setup_fuse = sub.add_parser(
        "setup-fuse", help="build the fast (patched) pyfuse3 into this environment (~1 minute)"
    )
    setup_fuse.add_argument(
        "--force", action="store_true", help="build anew even if a build is installed or cached"
    )
    setup_fuse.set_defaults(run=cmd_setup_fuse)

    lint = sub.add_parser("lint", help="lint SRC with files staged on a throwaway branch")
    _staging_arguments(lint)
    lint.add_argument("--server", action="append", metavar="S",
                      help="language server (default ruff); repeatable")  # fmt: skip
    lint.add_argument("--path", action="append", metavar="PATH",
                      help="lint these files (default: the staged ones); repeatable")  # fmt: skip
    lint.add_argument("--new-only", action="store_true", help="only lints the staging introduced")
    lint.add_argument("--json", action="store_true", help="one JSON list of lint rows")
    lint.set_defaults(run=cmd_lint)

    run = sub.add_parser("run", help="run CMD in a shadow of SRC with files staged")
    _staging_arguments(run)
    run.add_argument("--timeout", type=float, default=60, metavar="S", help="seconds (default 60)")
    run.add_argument("--net", action="store_true", help="allow network access (default: none)")
    unconfined = "run unconfined where neither bwrap nor Landlock can confine it"
    run.add_argument("--no-sandbox", action="store_true", help=unconfined)
    run.add_argument("cmd", nargs="*", metavar="CMD", help="the command, after '--'")
    run.set_defaults(run=cmd_run)

    mcp = sub.add_parser("mcp", help="serve persistent branches of SRC to MCP clients "
                         "(stdio, or streamable HTTP with --http)",
                         description=MCP_DESCRIPTION,
                         formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    mcp.add_argument("source", metavar="SRC", help="the user's project folder (written only "
                     "by accept, with --allow-accept)")  # fmt: skip
    mcp.add_argument("--servers", nargs="+", metavar="S",
                     help="language servers (default: ruff, and jedi-language-server for "
                          "navigation when installed), e.g. ruff basedpyright")  # fmt: skip
    mcp.add_argument("--http", metavar="HOST:PORT",
                     help="serve streamable HTTP there (HOST defaults to 127.0.0.1; port 0 "
                          "picks one) behind a generated bearer token")  # fmt: skip
    mcp.add_argument("--token-file", metavar="FILE",
                     help="where to write the token (mode 0600; default: "
                          "$XDG_RUNTIME_DIR or ~/.cache, shadowkernel/mcp-PORT.token)")  # fmt: skip
    mcp.add_argument("--allow-accept", action="store_true",
                     help="enable the accept tool, which writes a branch into SRC")  # fmt: skip
    mcp.add_argument("--protect", nargs="+", metavar="GLOB", default=[],
                     help="paths agents may not stage or accept, beside .git and its kin "
                          "(gitignore syntax), e.g. .env '.github/workflows/**'")  # fmt: skip
    mcp.add_argument("--branch", metavar="NAME",
                     help="pin the server to branch NAME (made if new): it is every tool's "
                          "branch, other names are refused, and no tool makes or drops "
                          "branches")  # fmt: skip
    mcp.add_argument("--stage", action="append", default=[], metavar="PATH=FILE",
                     help="stage FILE's text as PATH on --branch at start; repeatable")  # fmt: skip
    mcp.add_argument("--delete", action="append", default=[], metavar="PATH",
                     help="stage the deletion of PATH on --branch at start; repeatable",
                     )  # fmt: skip
    mcp.add_argument("--state", metavar="DIR",
                     help="keep the branches in DIR (default: SRC's state directory under "
                          "$XDG_STATE_HOME/shadowkernel; one process at a time per "
                          "DIR; 'none': in memory only)")  # fmt: skip
    mcp.add_argument("--timeline", metavar="FILE",
                     help="on closing, write the requests served (the timeline's events, "
                          "JSON) to FILE, for another workspace to adopt")  # fmt: skip
    mcp.set_defaults(run=cmd_mcp)

    state = sub.add_parser("state", help="list the folders whose branches are kept (and where); "
                           "--prune deletes those whose folder is gone")  # fmt: skip
    state.add_argument("--prune", action="store_true",
                       help="delete the branches of folders that no longer exist (a folder on "
                            "a drive not mounted now counts as gone); never a state a "
                            "workspace holds open")  # fmt: skip
    state.set_defaults(run=cmd_state)

    from .kernel.commands import add_parsers as add_notebook_parsers  # install-kernel, lab, tour

    add_notebook_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # Everything after the first '--' is a command to run, verbatim (argparse's own '--'
    # handling does not reach into subcommands reliably).
    words = list(sys.argv[1:] if argv is None else argv)
    command = words[words.index("--") + 1 :] if "--" in words else []
    words = words[: words.index("--")] if "--" in words else words
    parser = build_parser()
    args = parser.parse_args(words)
    if command and not hasattr(args, "cmd"):
        parser.error(f"'{args.command}' takes no command after '--'")
    if hasattr(args, "cmd"):
        args.cmd = [*args.cmd, *command]
    # SIGINT raises KeyboardInterrupt, also when this process was started with it ignored:
    # children inherit an ignored signal (a Jupyter kernel ignores it), and an ignored stop
    # left a run going for its whole timeout (`tests/test_cli_user.py`).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for stop_signal in STOP_SIGNALS[1:]:
        signal.signal(stop_signal, _raise_stopped)
    try:
        return int(args.run(args))
    except ShadowError as exc:
        print(f"shadowkernel {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as stop:
        number = stop.number if isinstance(stop, Stopped) else int(signal.SIGINT)
        print(f"shadowkernel {args.command}: stopped by {signal.Signals(number).name}; "
              "what it opened was closed", file=sys.stderr)  # fmt: skip
        return 128 + number


if __name__ == "__main__":
    sys.exit(main())
