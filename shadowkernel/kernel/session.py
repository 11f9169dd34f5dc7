"""What a kernel holds: the open workspace, agent threads, and waits that Ctrl-C can cancel.

Every API call a magic makes goes through `Session.call`: the call runs in a helper thread
and the cell's thread waits for it (`bridge.wait`, which sees an interrupt even when another
thread received the signal). An interrupt (SIGINT -> KeyboardInterrupt in the waiting thread)
therefore returns at once. For runs that is not enough, because the scheduler
shields a request from callers giving up: `Session.run` tags the run's environment with a
fresh id, and on interrupt kills every process carrying that id (now, or as soon as it
starts if the run was still queued). The run then ends like a killed program, with what it
wrote so far kept in the branch's scratch layer; `Session.run` waits a moment for that end and
raises `Interrupted` with the run's result (what it printed so far), or None if a second
interrupt came first.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from IPython.core.error import UsageError

from ..errors import ShadowError
from ..workspace import Branch, Workspace, open_workspaces
from ..workspace.bridge import wait

T = TypeVar("T")

KILL_WAIT = 10.0  # seconds an interrupted run may take to end once its processes are killed


class Interrupted(Exception):
    """A run the user interrupted: its processes were killed. `result`: the RunResult of the
    killed run (its output so far), or None when it did not end within KILL_WAIT."""

    def __init__(self, result: Any) -> None:
        super().__init__("run interrupted (its processes were killed)")
        self.result = result


def _close_once_open(opening: Future[Workspace]) -> None:
    """Close the workspace `opening` gives, once it opened (if it fails, nothing is open)."""
    with contextlib.suppress(Exception):
        opening.result().close()


class Session:
    """One per shell: `%shadow open` puts its workspace here and into the namespace as `ws`."""

    def __init__(self, shell: Any = None, name: str = "ws") -> None:
        self.shell = shell
        self.name = name
        self.workspace: Workspace | None = None
        self.agents: list[threading.Thread] = []
        self.mcp: Any = None  # the HttpServer of `%shadow mcp`, while it serves
        self._agent_ended = threading.Condition()
        self._pool = ThreadPoolExecutor(4, thread_name_prefix="shadowkernel-call")
        self._abandoned: list[Future[None]] = []  # closing the workspaces of interrupted opens

    # -- the workspace ------------------------------------------------------------------------

    def open(self, path: str, servers: list[str], lanes: int = 1, mode: str = "auto",
             in_memory: bool = False) -> Workspace:  # fmt: skip
        """A new shadow of `path`; the previous one closes only once this one is open. Of the
        same folder, it closes first (one workspace at a time holds the folder's durable
        branches) and opens again as it was, its branches restored, if the new one fails
        (not when the user interrupts the open: the next open restores them).
        `in_memory`: branches in this kernel only (`state=None`), none restored or kept."""
        self._settle_abandoned()
        old = self.workspace
        state: dict[str, Any] = {"state": None} if in_memory else {}
        if old is None or old.root != os.path.realpath(path):
            workspace = self._construct(path, servers=servers, lanes=lanes, mode=mode, **state)
        else:
            again = {"servers": old.servers, "lanes": len(old.shadows), "mode": old.mode,
                     **({"state": None} if old.state_dir is None else {})}  # fmt: skip
            self.close()
            try:
                workspace = self._construct(path, servers=servers, lanes=lanes, mode=mode,
                                            **state)  # fmt: skip
            except KeyboardInterrupt:
                raise  # the user stopped opening: not the moment to open the old one again
            except BaseException:
                self._install(self._construct(old.root, **again))
                raise
        self.close()
        return self._install(workspace)

    def _construct(self, path: str, **options: Any) -> Workspace:
        """Workspace(path, **options), its wait interruptible. An interrupted open goes on in
        its helper thread, and the workspace it opens is closed there: left open it would
        hold a mount, servers and the folder's durable branches that no name refers to, and
        the next %shadow open of the folder would be refused as a second holder. The future
        exists before the submit: an interrupt may land inside `submit` once the helper
        already opens (a thread pool starting a thread waits for it)."""
        opening: Future[Workspace] = Future()

        def open_it() -> None:
            if opening.set_running_or_notify_cancel():  # else interrupted before it began
                try:
                    opening.set_result(Workspace(path, **options))
                except BaseException as error:
                    opening.set_exception(error)

        try:
            self._pool.submit(open_it)
            return wait(opening)
        except KeyboardInterrupt:
            if not opening.cancel():  # it began: close what it opens
                self._abandoned.append(self._pool.submit(_close_once_open, opening))
            raise

    def _settle_abandoned(self) -> None:
        """Wait (interruptibly) until the workspaces of interrupted opens are closed."""
        while self._abandoned:
            with contextlib.suppress(Exception):
                wait(self._abandoned[0])
            self._abandoned.pop(0)

    def _install(self, workspace: Workspace) -> Workspace:
        self.workspace = workspace
        if self.shell is not None:
            self.shell.user_ns[self.name] = self.workspace
        return self.workspace

    def require(self) -> Workspace:
        """The open workspace (also one the user opened in code as `ws`), or UsageError."""
        ws = self.workspace
        if ws is None and self.shell is not None:
            found = self.shell.user_ns.get(self.name)
            ws = found if isinstance(found, Workspace) else None
        if ws is None or ws.closed:
            raise UsageError("no shadow is open: run %shadow open PATH first")
        return ws

    def branch(self, name: str) -> Branch:
        ws = self.require()
        branch = ws.branches.get(name)
        if branch is None:
            known = ", ".join(sorted(ws.branches)) or "none yet"
            raise UsageError(f"unknown branch {name!r} (branches: {known}); "
                             f"create it with %branch new {name}")  # fmt: skip
        return branch

    def close(self) -> bool:
        """Close the session's workspace; False if none was open."""
        self.stop_mcp()
        ws, self.workspace = self.workspace, None
        if ws is not None:
            ws.close()
            if self.shell is not None and self.shell.user_ns.get(self.name) is ws:
                del self.shell.user_ns[self.name]
        return ws is not None

    # -- outside agents (MCP) --------------------------------------------------------------------

    def serve_mcp(self, port: int = 0, allow_accept: bool = False) -> Any:
        """Serve the open workspace over MCP (loopback HTTP) from a background thread."""
        try:
            from ..agents.tools import Tools
            from ..mcp.transports import HttpServer
        except ImportError as error:
            raise UsageError(f"%shadow mcp needs the MCP SDK ({error}): "
                             "pip install 'shadowkernel[mcp]'") from None  # fmt: skip
        ws = self.require()
        if self.mcp is not None and self.mcp.running:
            raise UsageError(f"an MCP server already serves at {self.mcp.url}; "
                             "%shadow mcp --stop first")  # fmt: skip
        self.mcp = HttpServer(Tools(ws, allow_accept), port=port).start()
        return self.mcp

    def stop_mcp(self) -> bool:
        server, self.mcp = self.mcp, None
        if server is not None:
            server.stop()
        return server is not None

    # -- agents ---------------------------------------------------------------------------------

    def start_agent(self, target: Callable[..., Any], *args: Any, name: str | None = None,
                    **kwargs: Any) -> threading.Thread:  # fmt: skip
        """Run `target(*args, **kwargs)` in a daemon thread that `%timeline` follows."""
        thread = threading.Thread(target=self._agent, args=(target, args, kwargs), daemon=True,
                                  name=name or f"agent-{len(self.agents) + 1}")  # fmt: skip
        self.agents.append(thread)
        thread.start()
        return thread

    def _agent(self, target: Callable[..., Any], args: Any, kwargs: Any) -> None:
        """An agent's thread. A ShadowError that ends it (its shadow closed, its branch
        dropped) is said in one line naming the agent: two agents stopped by `%shadow close`
        printed two interleaved tracebacks. Any other exception keeps its traceback."""
        try:
            target(*args, **kwargs)
        except ShadowError as error:
            message = " ".join(str(error).split())
            # One write (print writes the line break apart): agents that stop together
            # interleave their lines, never the parts of one.
            sys.stderr.write(f"agent {threading.current_thread().name!r} stopped: "
                             f"{type(error).__name__}: {message}\n")  # fmt: skip
        finally:
            with self._agent_ended:
                self._agent_ended.notify_all()

    def running_agents(self) -> list[threading.Thread]:
        self.agents = [t for t in self.agents if t.is_alive()]
        return list(self.agents)

    def wait_for_agents(self, timeout: float) -> None:
        """Wait `timeout` seconds, less when an agent ends first. Not `Thread.join`: in
        Python 3.11 an interrupt (Ctrl-C) during join() marks the thread as ended while it
        runs on, so `%timeline` said "1 agent(s) keep running" of two and forgot the other."""
        with self._agent_ended:
            self._agent_ended.wait(timeout)

    # -- interruptible calls ----------------------------------------------------------------------

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """fn(*args, **kwargs) in a helper thread; Ctrl-C stops the wait at once."""
        return wait(self._pool.submit(fn, *args, **kwargs))

    def run(self, branch: Branch, command: str, **options: Any) -> Any:
        """branch.run(command, ...) which an interrupt cancels (its processes are killed):
        then `Interrupted`, with the killed run's result once it ended."""
        cancel = threading.Event()
        future = self._pool.submit(branch.run, command, cancel=cancel, **options)
        try:
            return wait(future)
        except KeyboardInterrupt:
            cancel.set()
        result = None
        with contextlib.suppress(BaseException):  # a second interrupt: stop waiting
            result = future.result(timeout=KILL_WAIT)
        raise Interrupted(result)

    # -- shutdown -------------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Close every workspace of this process: the session's and any opened in code."""
        with contextlib.suppress(Exception):
            self.close()
        for ws in open_workspaces():
            with contextlib.suppress(Exception):
                ws.close()
        self._pool.shutdown(wait=False, cancel_futures=True)
