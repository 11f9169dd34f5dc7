"""The transports: stdio for one agent, streamable HTTP behind a bearer token for several.

`serve_stdio` keeps the protocol's stdin/stdout away from the workspace's children (the
overlay process, language servers): they are started while fds 0 and 1 point at /dev/null
and stderr, so a stray print can never corrupt the wire. `HttpServer` binds its socket at
once (a port in use fails before anything starts), generates a token, writes it to a 0600
file, and refuses every request without `Authorization: Bearer <token>` with 401. It runs
in the foreground (`serve_forever`, the CLI) or in a background thread (`start`, the
kernel's `%shadow mcp`); `stop` ends the event streams connected clients keep open, so it
returns at once rather than when the last client leaves.

Caveat: the token travels in clear over plain HTTP; bind a non-loopback address only on a
network you trust (the CLI warns).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
import logging
import os
import secrets
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

import anyio
import uvicorn
from mcp.shared.message import SessionMessage
from mcp.types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError, jsonrpc_message_adapter
from pydantic import ValidationError

from .. import userdirs
from ..agents.tools import Tools
from ..errors import ShadowError
from ..text.content import MAX_TEXT_BYTES
from . import texts
from .server import CONNECTION, Connection, build_server

logger = logging.getLogger(__name__)
LOOPBACK = "127.0.0.1"
PATH = "/mcp"
GRACE = 5  # seconds a stopping server waits for requests still running (a lint, a run)
# One limit over every transport: what staging takes (a file of MAX_TEXT_BYTES), so a request
# may carry one such file JSON-escaped (a newline or quote doubles). Staging answers a larger
# file with a tool error naming its limit; HTTP answers a larger body with 413 saying this.
REQUEST_LIMIT = 2 * MAX_TEXT_BYTES + 2**16
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


# -- stdio ----------------------------------------------------------------------------------------


def serve_stdio(open_workspace: Callable[[], Any], allow_accept: bool = False,
                **pin: Any) -> None:  # fmt: skip
    """Serve MCP on stdin/stdout until EOF or a stop signal, then close the workspace. The
    server answers at once (initialize, tools/list) while the workspace opens (mounts and
    servers take seconds; clients time out connecting): a tool call waits for the open, or
    answers why it failed. While it serves, fd 0 and 1 are diverted (a stray print never
    reaches the wire). `pin` goes to `Tools` (branch=NAME)."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    opening: Future[Any] = Future()
    serving = StdioServing(build_server(Tools(opening, allow_accept, **pin)), wire_in, wire_out)
    with diverted_stdio():
        try:
            with _stopping_as_interrupt():
                serving.start()
                _open_into(opening, open_workspace)  # stopped meanwhile: what started dies too
                serving.join()  # until the client closes stdin (a signal interrupts it)
        except KeyboardInterrupt:
            pass
        finally:
            serving.stop()
            os.close(wire_in)
            if not opening.done():
                opening.set_exception(ShadowError("the server is stopping"))
            elif opening.exception() is None:
                with stop_signals_ignored():  # clients send SIGTERM if we take a while
                    opening.result().close()


def _open_into(opening: Future[Any], open_workspace: Callable[[], Any]) -> None:
    """The open's workspace, or its error (which tool calls then answer), into `opening`."""
    try:
        opening.set_result(open_workspace())
    except Exception as error:  # noqa: BLE001 - every tool call says it
        logger.error("shadowkernel mcp: the workspace did not open: %s", error)
        opening.set_exception(error)


class StdioServing(threading.Thread):
    """The stdio server's event loop, on a thread of its own: the main thread opens the
    workspace meanwhile and keeps the signals (only it can be interrupted by them)."""

    def __init__(self, server: Any, wire_in: int, wire_out: int) -> None:
        super().__init__(name="shadowkernel-mcp-stdio", daemon=True)
        self._args = server, StdinLines(wire_in), wire_out
        self._loop: asyncio.AbstractEventLoop | None = None
        self._scope: anyio.CancelScope | None = None

    def run(self) -> None:
        anyio.run(self._serve)

    async def _serve(self) -> None:
        with anyio.CancelScope() as self._scope:
            self._loop = asyncio.get_running_loop()
            await _serve_streams(*self._args)

    def stop(self) -> None:
        """End serving (from the main thread) and wait for the loop to finish."""
        if self._loop is not None and self._scope is not None:
            with contextlib.suppress(RuntimeError):  # the loop already closed
                self._loop.call_soon_threadsafe(self._scope.cancel)
        self.join(GRACE)


async def _serve_streams(server: Any, lines: StdinLines, wire_out: int) -> None:
    """The SDK's stdio transport, but a line that is not a JSON-RPC message is answered (a
    parse error, or an invalid request, with its id when it has one) and logged: the SDK drops
    it, and the client waits for an answer that never comes."""
    out = anyio.wrap_file(os.fdopen(wire_out, "w", encoding="utf-8"))
    low = server._lowlevel_server  # noqa: SLF001 - MCPServer serves only the process's own stdio
    read_in, read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write, write_out = anyio.create_memory_object_stream[SessionMessage](0)

    async def read_lines(answers: Any) -> None:
        async with read_in, answers:
            async for line in lines:
                try:
                    message = jsonrpc_message_adapter.validate_json(line, by_name=False)
                except ValidationError as error:
                    if (answer := bad_line(line, error)) is not None:
                        await answers.send(SessionMessage(answer))
                    continue
                await read_in.send(SessionMessage(message))

    async def write_lines() -> None:
        async with write_out:
            async for sent in write_out:
                await out.write(sent.message.model_dump_json(by_alias=True, exclude_unset=True)
                                + "\n")  # fmt: skip
                await out.flush()

    async with anyio.create_task_group() as group:
        group.start_soon(read_lines, write.clone())
        group.start_soon(write_lines)
        await low.run(read, write, low.create_initialization_options())


def bad_line(line: bytes, error: ValidationError) -> JSONRPCError | None:
    """The answer to a line that is not a JSON-RPC message (logged as a warning): -32700 when
    it is not JSON to the SDK (truncated, invalid UTF-8, a lone surrogate's escape), -32600
    when it is JSON of another shape; with the line's id when Python's JSON reader finds one.
    Nothing for a blank line or a malformed response (there is no request to answer)."""
    if not line.strip():
        return None
    try:
        parsed = json.loads(line)
    except (ValueError, RecursionError):
        parsed = None
    if isinstance(parsed, dict) and "method" not in parsed and {"result", "error"} & set(parsed):
        logger.warning("shadowkernel mcp: ignored a malformed response from the client: %s",
                       texts.one_line(error))  # fmt: skip
        return None
    ident = parsed.get("id") if isinstance(parsed, dict) else None
    if isinstance(ident, bool) or not isinstance(ident, int | str):
        ident = None
    unparsed = any(e["type"] == "json_invalid" for e in error.errors())
    code, what = (PARSE_ERROR, "parse error") if unparsed else (INVALID_REQUEST, "invalid request")
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"][1:])  # [0]: the union's member
    said = f"{what}: {first['msg']}" + (f" at {where}" if where and not unparsed else "")
    logger.warning("shadowkernel mcp: a line from the client is not a JSON-RPC message (%s); "
                   "answered error %d to id %s", said, code, json.dumps(ident))  # fmt: skip
    return JSONRPCError(jsonrpc="2.0", id=ident, error=ErrorData(code=code, message=said))


class StdinLines:
    """The lines of a pipe (bytes, as the client wrote them), read on the event loop: a stop
    signal then cancels the read at once (the SDK reads stdin on a worker thread, which waits
    until the client writes)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = bytearray()
        os.set_blocking(fd, False)

    def __aiter__(self) -> StdinLines:
        return self

    async def __anext__(self) -> bytes:
        while (end := self._buffer.find(b"\n")) < 0:
            await anyio.wait_readable(self._fd)
            try:
                chunk = os.read(self._fd, 1 << 20)
            except BlockingIOError:
                continue
            if not chunk:
                if not self._buffer:
                    raise StopAsyncIteration
                chunk = b"\n"  # a last line without its newline
            self._buffer += chunk
        line = bytes(self._buffer[: end + 1])
        del self._buffer[: end + 1]
        return line


@contextlib.contextmanager
def diverted_stdio() -> Iterator[None]:
    """fd 0 reads /dev/null and fd 1 writes to stderr inside; both restored after."""
    saved = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()  # what was printed meanwhile goes to stderr, not the wire
        os.dup2(saved[0], 0)
        os.dup2(saved[1], 1)
        for fd in (*saved, null):
            os.close(fd)


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def stop_signals_ignored() -> contextlib.AbstractContextManager[None]:
    """While the workspace closes: a second stop signal must not cut its cleanup short."""
    return _stopping_as_interrupt(signal.SIG_IGN)


@contextlib.contextmanager
def _stopping_as_interrupt(handler: Any = _interrupt) -> Iterator[None]:
    """SIGTERM and SIGHUP end the server like Ctrl-C, so the workspace closes (its servers,
    runs and mount go) and the process exits 0. Only the main thread may set handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.signal(number, handler) for number in STOP_SIGNALS}
    try:
        yield
    finally:
        for number, old in previous.items():
            signal.signal(number, old)


# -- HTTP -----------------------------------------------------------------------------------------


def parse_address(text: str) -> tuple[str, int]:
    """'HOST:PORT', ':PORT' or 'PORT' (loopback), '[::1]:PORT' -> (host, port)."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "", text
    host = host.strip("[]") or LOOPBACK
    if not port.isdigit() or int(port) > 65535:
        raise ShadowError(f"--http {text!r}: give HOST:PORT or PORT, e.g. 127.0.0.1:8765 "
                          "(port 0 picks a free one)")  # fmt: skip
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    with contextlib.suppress(ValueError):
        return ipaddress.ip_address(host).is_loopback
    return False


def default_token_file(port: int) -> str:
    return str(userdirs.runtime_home() / f"mcp-{port}.token")


def write_token(path: str, token: str) -> str:
    """Write `token` to `path` with mode 0600 (atomically; the folder made 0700)."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, mode=0o700, exist_ok=True)
    temp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(token + "\n")
    os.replace(temp, path)
    return path


class BearerAuth:
    """ASGI middleware: HTTP requests without the bearer token get 401 and reach nothing."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("path", "").startswith("/.well-known/"):
            # OAuth discovery: none here, so clients say "wrong token", not "log in"
            await _answer(send, 404, b'{"error": "no OAuth here: use the bearer token"}')
            return
        if scope["type"] == "http" and not self._authorized(scope):
            await _answer(send, 401, UNAUTHORIZED,
                          ((b"www-authenticate", b'Bearer realm="shadowkernel"'),))  # fmt: skip
            return
        await self.app(scope, receive, send)

    def _authorized(self, scope: Any) -> bool:
        given = dict(scope.get("headers", [])).get(b"authorization", b"")
        return hmac.compare_digest(given, self._expected)


class RefuseLarge:
    """ASGI middleware: a body declared over REQUEST_LIMIT gets 413 with a JSON-RPC error
    saying the limit (the SDK's own check, for bodies sent without a length, says less)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        length = dict(scope.get("headers", [])).get(b"content-length", b"0")
        if scope["type"] == "http" and length.isdigit() and int(length) > REQUEST_LIMIT:
            await _answer(send, 413, too_large(int(length)))
            return
        await self.app(scope, receive, send)


def too_large(size: int) -> bytes:
    return rpc_error(
        f"request of {size} bytes is over shadowkernel's limit of {REQUEST_LIMIT} bytes "
        f"per request; staging takes at most {MAX_TEXT_BYTES} bytes of text per file"
    )


def rpc_error(message: str) -> bytes:
    """A JSON-RPC error body: clients show its message rather than just the HTTP status."""
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
    return json.dumps(error).encode()


UNAUTHORIZED = rpc_error("missing or wrong bearer token (HTTP 401): use the token the server "
                         "printed at start, also in its token file")  # fmt: skip


async def _answer(send: Any, status: int, body: bytes,
                  headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:  # fmt: skip
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), *headers]})  # fmt: skip
    await send({"type": "http.response.body", "body": body})


class CancelWhenDropped:
    """ASGI middleware: a client that goes away (killed, its connection reset) before a
    request's response ended cancels the tool call that request carried: its run's processes
    die and its branch's queue moves on. The SDK only stops writing to the closed stream, and
    a killed client sends neither a cancel nor a DELETE. The server keeps no events to resume
    a stream from, so the call's answer could never reach anyone. The request's `Connection`
    goes to the call through a context variable (the SDK runs each request's handler in the
    context its POST sent it from); the disconnect is what the SSE response's listener reads."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        connection, ended = Connection(), False

        async def receive_noting() -> Any:
            message = await receive()
            if message["type"] == "http.disconnect" and not ended:
                connection.drop()
            return message

        async def send_noting(message: Any) -> None:
            nonlocal ended
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                ended = True
            await send(message)

        token = CONNECTION.set(connection)
        try:
            await self.app(scope, receive_noting, send_noting)
        finally:
            CONNECTION.reset(token)


class EndStreams:
    """ASGI middleware: after `end()`, every open request reads a client disconnect, so the
    event streams connected clients hold open end at once and a stopping server can stop
    (uvicorn waits for open connections; sse-starlette's own drain only hears signals)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ending: asyncio.Event | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        ending = self._event()

        async def receive_until_ended() -> Any:
            if not ending.is_set():
                message = asyncio.ensure_future(receive())
                ended = asyncio.ensure_future(ending.wait())
                await asyncio.wait((message, ended), return_when=asyncio.FIRST_COMPLETED)
                ended.cancel()
                if message.done():
                    return message.result()
                message.cancel()
            return {"type": "http.disconnect"}

        sent: set[str] = set()  # "start", "end"

        async def send_noting(message: Any) -> None:
            if message["type"] == "http.response.start":
                sent.add("start")
            elif not message.get("more_body", False):
                sent.add("end")
            await send(message)

        await self.app(scope, receive_until_ended, send_noting)
        if ending.is_set() and sent == {"start"}:  # a stream cut short: end its body properly
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    def _event(self) -> asyncio.Event:
        if self._ending is None:
            self._loop, self._ending = asyncio.get_running_loop(), asyncio.Event()
        return self._ending

    def end(self) -> None:
        """End every open request (callable from any thread)."""
        if self._loop is not None and self._ending is not None:
            self._loop.call_soon_threadsafe(self._ending.set)


class HttpServer:
    """MCP over streamable HTTP at http://HOST:PORT/mcp for `tools`, behind a bearer token."""

    def __init__(self, tools: Tools, host: str = LOOPBACK, port: int = 0,
                 token_file: str | None = None) -> None:  # fmt: skip
        self.token = secrets.token_urlsafe(32)
        self._socket = _bind(host, port)
        self.host, self.port = host, int(self._socket.getsockname()[1])
        app = build_server(tools).streamable_http_app(
            streamable_http_path=PATH, host=host, max_request_body_size=REQUEST_LIMIT
        )
        self._streams = EndStreams(BearerAuth(RefuseLarge(CancelWhenDropped(app)), self.token))
        config = uvicorn.Config(self._streams, log_level="warning", lifespan="on",
                                timeout_graceful_shutdown=GRACE)  # fmt: skip
        self._uvicorn = uvicorn.Server(config)
        self._thread: threading.Thread | None = None
        self.token_file = write_token(token_file or default_token_file(self.port), self.token)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{PATH}"

    def serve_forever(self) -> None:
        """Serve in this thread until Ctrl-C, SIGTERM or SIGHUP (or stop() from another
        thread); the token file is removed either way."""
        try:
            with _stopping_as_interrupt(self._stop_soon):
                self._uvicorn.run(sockets=[self._socket])
        except KeyboardInterrupt:  # uvicorn re-raises SIGINT once it has shut down
            pass
        finally:
            self._cleanup()

    def _stop_soon(self, *_: object) -> None:
        """A signal's handler: shut down gracefully (uvicorn re-raises SIGTERM to it after)."""
        self._streams.end()
        self._uvicorn.should_exit = True

    def start(self, timeout: float = 30) -> HttpServer:
        """Serve from a daemon thread; returns once the server accepts connections."""
        self._thread = threading.Thread(target=self.serve_forever, name="shadowkernel-mcp",
                                        daemon=True)  # fmt: skip
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._uvicorn.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise ShadowError(f"the MCP server on {self.url} did not start")
            time.sleep(0.01)  # polling a flag uvicorn sets; bounded by the deadline
        return self

    def stop(self) -> None:
        self._streams.end()
        self._uvicorn.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
        self._cleanup()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _cleanup(self) -> None:
        self._socket.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.token_file)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise ShadowError(f"{host}:{port}: cannot listen there ({error.strerror}); pick "
                          "another port, or 0 for a free one") from None  # fmt: skip
    sock.listen(128)
    return sock
