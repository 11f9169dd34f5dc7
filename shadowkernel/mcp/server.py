"""The tool table as an MCP server (the official SDK's `MCPServer`), and its one error edge.

Each tool is registered from its `ToolSpec` (agents/toolspec.py): the description, the
described input schema, the described output schema (from the result's TypedDict) and the
hints (MCP's annotations) come from the table. A call runs the table's method on a worker thread;
a cancelled request (`notifications/cancelled`, stdin's EOF, an HTTP client that drops the
request's connection or its session) sets the call's cancel event, which kills a run and
frees its place in the queue. Errors the caller can fix
(`ShadowError`, bad arguments) become tool errors (`isError`) with a one-line message;
anything else is a bug, logged with its traceback and answered with the SDK's generic tool
failure. Either way the server stays up. A middleware tags every request with the client's
name (from its `initialize`), so the workspace's timeline records which agent asked. A long
call sends progress (elapsed seconds, and a run's latest output) when the client gave a
progressToken. The package's warnings go to stderr (the server's log), not to the client:
MCP's logging capability is deprecated (SEP-2577, 2026-07-28), stderr its migration target.

Not used, on purpose: tasks (2025-11-25 only, an extension since; a run is bounded by its
timeout, cancellable and reports progress, and hosts do not poll tasks) and resources (hosts
show them to the user, not to the agent that made the branch; the diff tool answers it).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib.metadata
import inspect
import threading
import time
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import (
    CallToolResult,
    EmptyResult,
    SetLevelRequestParams,
    TextContent,
    ToolAnnotations,
)
from pydantic import ValidationError
from pydantic_core import to_jsonable_python

from ..agents.tools import TOOL_NAMES, Tools
from ..agents.toolspec import ToolSpec
from ..errors import ShadowError
from ..sched import acting_for
from . import texts

PROGRESS_EVERY = 1.0  # seconds between progress notifications of a long call
TAIL_CHARS = 400  # characters of a run's latest output each progress message shows

INSTRUCTIONS = """\
shadowkernel: a private, writable shadow of the user's project. Create a branch, stage edits
on it (write_file, replace_in_file, apply_patch, delete_file), then lint, navigate and run
inside the shadow; nothing reaches the user's folder except accept (when allowed). Every
staging call makes a new version; lints are final for exactly the version they name. Lines
and columns are 1-based."""


def version() -> str:
    try:
        return importlib.metadata.version("shadowkernel")
    except importlib.metadata.PackageNotFoundError:  # a source tree that was never installed
        from .. import __version__

        return __version__


class Server(MCPServer[Any]):
    """MCPServer whose argument errors are one sentence naming the argument, and whose
    withheld tools (`accept` without --allow-accept) say how to get them."""

    withheld: dict[str, str] = {}
    specs: dict[str, ToolSpec] = {}

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        if name in self.withheld:
            raise ToolError(self.withheld[name])
        if name in self.specs:
            check_arguments(self.specs[name], arguments or {})
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as error:
            if isinstance(error.__cause__, ValidationError):
                raise ToolError(texts.argument_error(name, error.__cause__)) from None
            if type(error.__cause__) is ToolError:  # ours, from the tool: its sentence alone,
                raise ToolError(str(error.__cause__)) from None  # as the argument errors are
            raise


def check_arguments(spec: ToolSpec, arguments: Mapping[str, Any]) -> None:
    """What the schema says and the SDK's lax checks let through, refused as a tool error:
    names the tool does not take (a misspelled one would be dropped silently; the schema
    says additionalProperties: false), and a string for a boolean or a number ("yes", "1")."""
    taken = [p.name for p in spec.params]
    unknown = [name for name in arguments if name not in taken]
    if unknown:
        raise ToolError(texts.unknown_arguments(spec.name, unknown, taken))
    for param in spec.params:
        value, kind = arguments.get(param.name), scalar_kind(param.annotation)
        if param.name not in arguments or kind is None or value is None:
            continue
        if kind is bool and not isinstance(value, bool):
            raise ToolError(texts.wrong_type(spec.name, param.name, "true or false", value))
        if kind is not bool and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise ToolError(texts.wrong_type(spec.name, param.name, "a number", value))


def scalar_kind(annotation: Any) -> type | None:
    """bool, int or float for a parameter of that type (or that type or None), else None."""
    if typing.get_origin(annotation) in (types.UnionType, typing.Union):
        kinds = [a for a in typing.get_args(annotation) if a is not type(None)]
        annotation = kinds[0] if len(kinds) == 1 else None
    return annotation if annotation in (bool, int, float) else None


def build_server(tools: Tools, name: str = "shadowkernel") -> MCPServer[Any]:
    """An MCP server offering `tools`; run it with a transport from `transports`."""
    registered = [mcp_tool(spec, getattr(tools, spec.name)) for spec in tools.specs()]
    server = Server(name, version=version(), instructions=INSTRUCTIONS, log_level="WARNING",
                    tools=registered)  # fmt: skip
    server.withheld = {n: tools.withheld(n) for n in TOOL_NAMES if n not in tools.names()}
    server.specs = {spec.name: spec for spec in tools.specs()}
    # Clients of protocols <= 2025-11-25 may still set a log level: answered, though no log
    # notification is sent (the capability is deprecated; warnings go to stderr).
    server._lowlevel_server.add_request_handler(  # noqa: SLF001 - no public way to add it
        "logging/setLevel", SetLevelRequestParams, _set_level)  # fmt: skip
    server.middleware.append(_tag_client)
    return server


def mcp_tool(spec: ToolSpec, method: Any) -> Tool:
    """The SDK's Tool for one table method: the table's schema, hints and description."""

    async def call(ctx: Context, **arguments: Any) -> CallToolResult:
        cancel, tail = threading.Event(), Tail()
        given = {"cancel": cancel, "on_output": tail.add}
        host = {name: given[name] for name in spec.host if name in given}
        work = functools.partial(outcome, functools.partial(method, **arguments, **host))
        with cancelled_if_dropped(cancel) as scope:
            try:
                result, error = await with_progress(ctx, spec.name, work, tail)
            except anyio.get_cancelled_exc_class():
                cancel.set()  # the request was cancelled or its client left: so is the run
                raise
        if scope.cancelled_caught:  # its HTTP client went away: nobody reads this answer
            raise ToolError(f"{spec.name}: the client's connection closed; the call was cancelled")
        if isinstance(error, ShadowError):  # what the caller can correct
            raise ToolError(texts.one_line(error))
        if error is not None:  # a bug: the SDK logs it and answers a generic failure
            raise error
        structured = to_jsonable_python(result)  # the API's dataclasses (locations...) as JSON
        text = TextContent(type="text", text=texts.summary(spec.name, structured))
        return CallToolResult(content=[text], structured_content=structured)

    call.__signature__ = signature(spec)  # type: ignore[attr-defined]
    hints = ToolAnnotations.model_validate(spec.hints.as_mcp())
    tool = Tool.from_function(call, name=spec.name, description=spec.description,
                              context_kwarg="ctx", structured_output=True,
                              annotations=hints)  # fmt: skip
    tool.parameters = spec.input_schema()  # the table's schema, exactly as agents see it
    # The table's output schema too: each field described, which pydantic's (from the same
    # TypedDict) is not; the SDK still validates each result against the TypedDict.
    tool.fn_metadata.output_schema = spec.output_schema()
    return tool


class Connection:
    """An HTTP request as the tool call it carries sees it: `drop()` (the transport's, when
    the client went away before the response ended) runs the callbacks calls registered."""

    def __init__(self) -> None:
        self.dropped = False
        self._callbacks: list[Callable[[], object]] = []

    @contextlib.contextmanager
    def on_drop(self, callback: Callable[[], object]) -> Iterator[None]:
        """`callback()` if the client drops the connection meanwhile (on the event loop)."""
        if self.dropped:
            callback()
        self._callbacks.append(callback)
        try:
            yield
        finally:
            self._callbacks.remove(callback)

    def drop(self) -> None:
        self.dropped = True
        for callback in list(self._callbacks):
            callback()


# The HTTP request a call came in (set by the HTTP transport; the SDK runs a request's handler
# in the context its transport sent it from). None over stdio, where EOF ends every call.
CONNECTION: contextvars.ContextVar[Connection | None] = contextvars.ContextVar(
    "shadowkernel_mcp_connection", default=None
)


@contextlib.contextmanager
def cancelled_if_dropped(cancel: threading.Event) -> Iterator[anyio.CancelScope]:
    """A scope cancelled, with `cancel` set, when the client drops the HTTP request this call
    came in: no answer can reach it (the server keeps no events to resume a stream from),
    so its run must not go on holding the branch's queue until its timeout."""
    connection = CONNECTION.get()
    with anyio.CancelScope() as scope:
        if connection is None:
            yield scope
            return

        def dropped() -> None:
            cancel.set()
            scope.cancel()

        with connection.on_drop(dropped):
            yield scope


def outcome(work: Callable[[], Any]) -> tuple[Any, BaseException | None]:
    """(result, None) or (None, the error): errors cross the task group unwrapped."""
    try:
        return work(), None
    except Exception as error:  # noqa: BLE001 - handed back to the caller, which decides
        return None, error


class Tail:
    """The last TAIL_CHARS characters a run printed (both streams, as they came): what a
    progress message shows. Written by the run's reading thread, read by the event loop."""

    def __init__(self) -> None:
        self._bytes = b""
        self._lock = threading.Lock()

    def add(self, stream: str, chunk: bytes) -> None:
        with self._lock:
            self._bytes = (self._bytes + chunk)[-4 * TAIL_CHARS :]  # 4: UTF-8's widest char

    def text(self) -> str:
        with self._lock:
            data = self._bytes
        return data.decode("utf-8", errors="replace")[-TAIL_CHARS:]


def progress_message(tool: str, elapsed: float, tail: str) -> str:
    said = f"{tool}: running for {elapsed:.0f} s"
    return f"{said}; output so far ends with:\n{tail}" if tail else said


async def with_progress(ctx: Context, tool: str, work: Callable[[], Any], tail: Tail) -> Any:
    """`work()` on a worker thread; meanwhile a progress notification every PROGRESS_EVERY
    seconds with the output's tail (sent only when the client asked for progress with a
    progressToken)."""
    answer: list[Any] = []
    async with anyio.create_task_group() as group:

        async def do() -> None:
            answer.append(await anyio.to_thread.run_sync(work, abandon_on_cancel=True))
            group.cancel_scope.cancel()

        group.start_soon(do)
        started = time.monotonic()
        while True:
            await anyio.sleep(PROGRESS_EVERY)
            elapsed = time.monotonic() - started
            await ctx.report_progress(elapsed, None, progress_message(tool, elapsed, tail.text()))
    return answer[0]


def signature(spec: ToolSpec) -> inspect.Signature:
    """The call's signature for the SDK's argument checks: the table's parameters and types."""
    keyword = inspect.Parameter.KEYWORD_ONLY
    params = [inspect.Parameter(p.name, keyword, default=p.default, annotation=p.annotation)
              for p in spec.params]  # fmt: skip
    params.append(inspect.Parameter("ctx", keyword, annotation=Context))
    return inspect.Signature(params, return_annotation=spec.result)


async def _set_level(ctx: Any, params: SetLevelRequestParams) -> EmptyResult:
    """Clients may ask (the Inspector does); nothing is sent either way."""
    return EmptyResult()


async def _tag_client(ctx: Any, call_next: Any) -> Any:
    """Run the request as its client: the timeline's `client` column."""
    with acting_for(client_name(ctx)):
        return await call_next(ctx)


def client_name(ctx: Any) -> str:
    params = getattr(getattr(ctx, "session", None), "client_params", None)
    info = getattr(params, "client_info", None)
    return str(getattr(info, "name", None) or "mcp")
