"""Any agent CLI as the subject of an experiment, working through `shadowkernel mcp`.

    agent = sk.CommandAgent(["claude", "-p", "{prompt}", "--mcp-config", "{mcp_config}"])
    agent = sk.CommandAgent("codex exec {prompt}", time_limit=900)
    df = sk.experiment(agent, suite, ["lint-tool"], seeds=1)

Per cell: a `shadowkernel mcp SRC --http 127.0.0.1:0 --branch NAME --stage PATH=FILE...`
process serves the suite's projects pinned to the cell's branch, made there with the task's
starting version staged (every tool works on it by default, no other branch is reachable and
no tool makes or drops branches); an MCP
configuration in the `mcpServers` JSON format (streamable HTTP, the bearer token in its
headers) is written to a fresh working folder; the command runs there with `{prompt}` (the
task and the branch to work on), `{mcp_config}` (the configuration's path) and `{workdir}`
substituted in its arguments, under `time_limit` seconds. Afterwards the branch's files are
read back through the same server, staged on the experiment's own branch for the cell and
graded by the task's hidden tests. The server writes its timeline when it closes
(`--timeline FILE`) and the experiment's workspace adopts it (`Workspace.adopt_timeline`):
what the command asked (lints, navigation, runs) is on the experiment's timeline, on its
clock, under the cell's branch and the name the command's MCP client announced.

Caveats: the server is a process of its own with its own shadow (agents/ cannot import the
MCP face, and an agent CLI expects a server it can reach), so its requests join the
experiment's timeline when the cell's command has ended, with that server's lane numbers;
what the CLI shows its model (its own lint feedback) is the CLI's, so the only condition is
"lint-tool" (the server's lint tool). Nothing is recorded for replay: the CLI talks to its
model itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

from ..errors import ArgumentError, ShadowError
from . import edits as E
from .loop import Episode, Step, error_text, stage_start
from .observation import condition as as_condition

PLACEHOLDERS = ("{prompt}", "{mcp_config}", "{workdir}")
CLIENT = "shadowkernel-experiment"  # the name the grading side announces to the server


def command_prompt(task: Any, branch: str) -> str:
    files = ", ".join(task.files)
    return (f"{task.statement.strip()}\n\nWork only through the `shadowkernel` MCP server's "
            f"tools; they work on branch {branch!r} (the default of their `branch` "
            f"argument), which already holds the code to fix (start with {files}). Stage your "
            "fix there with replace_in_file, write_file or apply_patch; the branch's files "
            "when you stop are your answer.")  # fmt: skip


def mcp_config(url: str, token: str) -> dict[str, Any]:
    """An `mcpServers` configuration for one streamable-HTTP server behind a bearer token."""
    return {"mcpServers": {"shadowkernel": {
        "type": "http", "url": url, "headers": {"Authorization": f"Bearer {token}"}}}}  # fmt: skip


def substitute(argv: Sequence[str], values: dict[str, str]) -> list[str]:
    """Each argument with the placeholders replaced (no other braces are touched)."""
    out = []
    for arg in argv:
        for name, value in values.items():
            arg = arg.replace("{" + name + "}", value)
        out.append(arg)
    return out


class CommandAgent:
    """An agent CLI, run once per cell against a shadowkernel MCP server (module docstring)."""

    simulated = False
    tool_calling = True
    conditions = ("lint-tool",)

    def __init__(self, argv_template: str | Sequence[str], *, time_limit: float = 600,
                 name: str | None = None, servers: Sequence[str] = ("ruff",),
                 env: dict[str, str] | None = None) -> None:  # fmt: skip
        argv = shlex.split(argv_template) if isinstance(argv_template, str) else list(
            argv_template)  # fmt: skip
        if not argv or not all(isinstance(a, str) for a in argv):
            raise ArgumentError(f"argv_template={argv_template!r}: give a command line (a "
                                "string or a list of strings) using {prompt}, {mcp_config} "
                                "and {workdir}")  # fmt: skip
        if not any(p in a for a in argv for p in PLACEHOLDERS):
            raise ArgumentError(f"argv_template={argv_template!r} uses none of "
                                f"{', '.join(PLACEHOLDERS)}: the command would not know its "
                                "task or its server")  # fmt: skip
        if not time_limit > 0:
            raise ArgumentError(f"time_limit={time_limit!r}: give a positive number of seconds")
        self.argv, self.time_limit, self.servers, self.env = argv, time_limit, servers, env
        self.name = name or f"command({os.path.basename(argv[0])})"

    @property
    def fingerprint(self) -> str:
        return f"command:{json.dumps(self.argv)}:{self.time_limit}"

    def __call__(self, obs: Any) -> Any:
        raise TypeError(f"{self.name} runs a command per cell; run it with sk.experiment")

    def episode(self, branch: Any, task: Any, check: Any, condition: Any, *, seed: int = 0,
                budget: int | None = None) -> Episode:  # fmt: skip
        cond = as_condition(condition)
        episode = Episode(task.id, cond.name, seed, 1)
        step = Step(0, version=branch.version)
        episode.steps.append(step)
        if task.problem:
            step.error, step.error_kind, episode.stopped = task.problem, "task", "task"
            return episode
        try:
            files, exit_code = self._run(branch.workspace, branch.name, task)
            stage_start(branch, task)
            step.edits = _stage_files(branch, task, files)
        except (ShadowError, OSError, subprocess.SubprocessError) as e:
            step.error, step.error_kind, episode.stopped = error_text(e), "agent", "error"
            return episode
        step.staged, step.version = len(step.edits), branch.version
        episode.stopped = "timeout" if exit_code is None else "finished"
        if exit_code not in (0, None):
            step.error, step.error_kind = f"the command exited with {exit_code}", "agent"
        result = check(branch, task, False)
        step.checked, step.passed, step.exit_code = True, result.passed, result.exit_code
        episode.solved = result.passed
        return episode

    def _run(self, workspace: Any, name: str, task: Any
             ) -> tuple[dict[str, str | None], int | None]:  # fmt: skip
        """The command's run against a fresh server pinned to branch `name`: (the branch's
        files after, exit code or None when it ran out of time). What the server served
        joins `workspace`'s timeline, under the names its clients announced."""
        with tempfile.TemporaryDirectory(prefix="sk-cell-") as workdir, \
                tempfile.TemporaryDirectory(prefix="sk-start-") as starts:  # fmt: skip
            pin = pin_arguments(name, getattr(task, "start", ()), starts)
            served = os.path.join(starts, "timeline.json")
            try:
                with serving(workspace.root, self.servers, workdir,
                             [*pin, "--timeline", served]) as (url, token):  # fmt: skip
                    return self._command(url, token, name, task, workdir)
            finally:
                if os.path.exists(served):  # written when the server closed
                    workspace.adopt_timeline(served)

    def _command(self, url: str, token: str, name: str, task: Any,
                 workdir: str) -> tuple[dict[str, str | None], int | None]:  # fmt: skip
        """The command, given its configuration, then the branch's files."""
        config = os.path.join(workdir, "mcp.json")
        with open(config, "w") as f:
            json.dump(mcp_config(url, token), f, indent=2)
        argv = substitute(self.argv, {"prompt": command_prompt(task, name),
                                      "mcp_config": config, "workdir": workdir})  # fmt: skip
        exit_code = run_command(argv, workdir, self.time_limit, self.env)
        return branch_files(url, token, name), exit_code


def pin_arguments(branch: str, start: Any, folder: str) -> list[str]:
    """`shadowkernel mcp`'s arguments pinning it to `branch` with the task's start staged
    (each starting text written to a file in `folder`), its branches kept in `folder` too:
    the experiment's own workspace holds the suite's default state directory."""
    argv = ["--branch", branch, "--state", os.path.join(folder, "state")]  # the cell's own
    for number, (path, text) in enumerate(start):
        if text is None:
            argv += ["--delete", path]
            continue
        file = os.path.join(folder, str(number))
        with open(file, "w", encoding="utf-8") as f:
            f.write(text)
        argv += ["--stage", f"{path}={file}"]
    return argv


def run_command(argv: list[str], workdir: str, limit: float, env: dict[str, str] | None
                ) -> int | None:  # fmt: skip
    """Run the agent's command in its own process group; None when it ran out of time (the
    whole group is killed)."""
    environment = {**os.environ, **(env or {})}
    process = subprocess.Popen(argv, cwd=workdir, env=environment, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)  # fmt: skip
    try:
        return process.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        return None
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@contextlib.contextmanager
def serving(root: str, servers: Sequence[str], workdir: str,
            options: Sequence[str] = ()) -> Iterator[tuple[str, str]]:  # fmt: skip
    """`shadowkernel mcp ROOT --http 127.0.0.1:0 OPTIONS` in a process of its own: (url,
    token)."""
    argv = [sys.executable, "-m", "shadowkernel.cli", "mcp", root, "--http", "127.0.0.1:0",
            "--token-file", os.path.join(workdir, "token"), *options,
            "--servers", *servers]  # fmt: skip
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True,
                               start_new_session=True)  # fmt: skip
    try:
        yield _announced(process)
    finally:
        process.send_signal(signal.SIGTERM)  # the server closes its workspace and unmounts
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _announced(process: subprocess.Popen[str]) -> tuple[str, str]:
    """The URL and token the server prints once it listens."""
    url = token = None
    assert process.stdout is not None
    for line in process.stdout:
        if " at http" in line:
            url = line.rsplit(" at ", 1)[1].strip()
        elif line.startswith("token"):
            token = line.rsplit(": ", 1)[1].strip()
            break
    if url is None or token is None:
        raise ShadowError(f"shadowkernel mcp did not start (exit {process.poll()})")
    return url, token


def call_tools(url: str, token: str, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """Call tools in order over one MCP session; a tool error raises ShadowError."""
    import anyio

    async def session() -> list[Any]:
        import httpx2
        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client
        from mcp.types import Implementation

        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60, read=300)) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write, client_info=Implementation(name=CLIENT, version="1"))
            as client,
        ):  # fmt: skip
            await client.initialize()
            out = []
            for tool, arguments in calls:
                result = await client.call_tool(tool, arguments)
                text = "".join(getattr(b, "text", "") for b in result.content)
                if result.is_error:
                    raise ShadowError(f"{tool}: {text}")
                out.append(result.structured_content)
            return out

    return anyio.run(session)


def branch_files(url: str, token: str, name: str) -> dict[str, str | None]:
    """Every path the branch changed, with its text (None: deleted)."""
    (diff,) = call_tools(url, token, [("diff", {"branch": name})])
    files: dict[str, str | None] = {}
    for path in diff["paths"]:
        try:
            files[path] = read_whole(url, token, name, path)
        except ShadowError:
            files[path] = None
    return files


def read_whole(url: str, token: str, branch: str, path: str) -> str:
    """A file's text, page by page (read_file answers at most its limit at once)."""
    pages, offset = [], 0
    while offset is not None:
        (read,) = call_tools(url, token, [("read_file", {"branch": branch, "path": path,
                                                         "offset": offset})])  # fmt: skip
        pages.append(read["content"])
        offset = read["next_offset"]
    return "".join(pages)


def _stage_files(branch: Any, task: Any, files: dict[str, str | None]) -> list[dict[str, str]]:
    """Stage the files the command left that differ from the task's start; their edits."""
    start = dict(getattr(task, "start", ()))
    edits = []
    for path, text in sorted(files.items()):
        if path in start and start[path] == text:
            continue
        edit: E.Edit = E.Delete(path) if text is None else E.FullText(path, text)
        if text is None:
            branch.delete(path)
        else:
            branch.write(path, text)
        edits.append(E.to_json(edit))
    return edits
