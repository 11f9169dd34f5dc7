"""A small JSON-RPC 2.0 endpoint over LSP's Content-Length framing, on asyncio streams.

Why not pygls: its 2.1.1 client fails to decode some results with current cattrs and answers
unknown server requests with errors, which makes pyright exit. Here every request the server
sends gets an answer from the handler (which never raises for unknown methods), every request
we send has a timeout (a window a server that keeps working extends: patience.py) and is
cancelled with `$/cancelRequest` when abandoned.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ..errors import ServerError
from .patience import Idle, StillWorking, Worker, patiently

log = logging.getLogger(__name__)

RequestHandler = Callable[[str, Any], Awaitable[Any]]
NotificationHandler = Callable[[str, Any], None]

SERVER_CANCELLED = -32802
CONTENT_MODIFIED = -32801


class ServerCrashed(ServerError):
    """The server process ended while a request was in flight (the pool may retry once)."""


class FramingError(ServerError, ValueError):
    """The server's output is not LSP framing: nothing after it can be trusted."""


class ResponseError(ServerError):
    """The server answered a request with a JSON-RPC error."""

    def __init__(self, message: str, code: int, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.data = data


def encode(message: dict[str, Any]) -> bytes:
    body = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def content_length(header: bytes) -> int:
    """The body length from a header block; FramingError when it has none."""
    for line in header.decode("ascii", "replace").split("\r\n"):
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length" and value.strip().isdigit():
            return int(value.strip())
    raise FramingError(f"LSP header without a valid Content-Length: {header!r}")


async def read_message(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    """The next message, or None at end of stream."""
    try:
        header = await reader.readuntil(b"\r\n\r\n")
        message: dict[str, Any] = json.loads(await reader.readexactly(content_length(header)))
        return message
    except (asyncio.IncompleteReadError, ConnectionError):
        return None


def unanswered(error: TimeoutError, doing: str, window: float) -> str:
    """Why a wait for a server to do `doing` ended, from `patiently`'s error."""
    if isinstance(error, StillWorking):
        return (
            f"kept working for {error.waited:g} s ({round(error.waited / window)} times its "
            f"request_timeout of {window:g} s) and did not {doing}"
        )
    if isinstance(error, Idle):
        return f"did not {doing} within {error.waited:g} s and sat idle for the last {window:g} s"
    return f"did not {doing} within {window:g} s"


class Endpoint:
    """One JSON-RPC peer: send requests/notifications, dispatch what arrives."""

    def __init__(
        self,
        name: str,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        on_request: RequestHandler,
        on_notification: NotificationHandler,
        server: Worker | None = None,
    ) -> None:
        """`server`: its processes, watched to tell a slow answer from a lost one
        (patience.py); without it a request's timeout is a fixed deadline."""
        self.name = name
        self.server = server
        self._reader = reader
        self._writer = writer
        self._on_request = on_request
        self._on_notification = on_notification
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[str, asyncio.Future[Any]]] = {}
        self._closed_reason: str | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.closed = asyncio.Event()
        self._reader_task = asyncio.create_task(self._read_loop(), name=f"{name}-reader")

    @property
    def in_flight(self) -> list[str]:
        """Methods of requests sent and not yet answered."""
        return [method for method, _ in self._pending.values()]

    async def request(self, method: str, params: Any, timeout: float, patient: bool = True) -> Any:
        """The server's answer. `patient`: a server that keeps working gets more windows of
        `timeout` (patience.py); else `timeout` is a deadline (a shutdown, say)."""
        if self._closed_reason is not None:
            raise ServerCrashed(f"{self.name}: cannot send {method}: {self._closed_reason}")
        request_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = (method, future)
        try:
            message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
            await self._send(message)
            watched = self.server if patient else None
            return await patiently(asyncio.shield(future), timeout, watched)
        except TimeoutError as error:
            await self._cancel(request_id)
            why = unanswered(error, f"answer {method}", timeout)
            raise ServerError(f"{self.name} {why}; the request was cancelled. Retry, or raise "
                              "the server's request_timeout") from None  # fmt: skip
        except asyncio.CancelledError:
            await self._cancel(request_id)
            raise
        finally:
            self._pending.pop(request_id, None)

    async def notify(self, method: str, params: Any) -> None:
        if self._closed_reason is not None:
            raise ServerCrashed(f"{self.name}: cannot send {method}: {self._closed_reason}")
        await self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def close(self, reason: str) -> None:
        """Fail everything pending with `reason` and stop reading."""
        self._fail_pending(reason)
        self._reader_task.cancel()
        with contextlib.suppress(Exception):
            self._writer.close()

    async def _cancel(self, request_id: int) -> None:
        if self._closed_reason is None:
            with contextlib.suppress(Exception):
                await self._send({"jsonrpc": "2.0", "method": "$/cancelRequest",
                                  "params": {"id": request_id}})  # fmt: skip

    async def _send(self, message: dict[str, Any]) -> None:
        try:
            self._writer.write(encode(message))
            await self._writer.drain()
        except (ConnectionError, RuntimeError) as error:
            self._fail_pending(f"the connection broke ({error})")
            raise ServerCrashed(f"{self.name}: {self._closed_reason}") from None

    async def _read_loop(self) -> None:
        try:
            while (message := await read_message(self._reader)) is not None:
                self._dispatch(message)
            self._fail_pending("the server closed its output (it exited)")
        except asyncio.CancelledError:
            raise
        except Exception as error:  # a framing error: nothing after it can be trusted
            log.exception("%s: unreadable message", self.name)
            self._fail_pending(f"the server sent an unreadable message ({error})")

    def _dispatch(self, message: dict[str, Any]) -> None:
        if "method" not in message:
            self._resolve(message)
        elif "id" in message:
            self._spawn(self._answer(message))
        else:
            try:
                self._on_notification(message["method"], message.get("params"))
            except Exception:
                log.exception("%s: notification handler failed", self.name)

    def _resolve(self, message: dict[str, Any]) -> None:
        entry = self._pending.get(message.get("id"))  # type: ignore[arg-type]
        if entry is None or entry[1].done():
            return  # an answer to a request we already gave up on
        method, future = entry
        if "error" in message:
            error = message["error"] or {}
            future.set_exception(ResponseError(
                f"{self.name} answered {method} with error {error.get('code')}: "
                f"{error.get('message')}", error.get("code", 0), error.get("data"),
            ))  # fmt: skip
        else:
            future.set_result(message.get("result"))

    async def _answer(self, message: dict[str, Any]) -> None:
        try:
            result = await self._on_request(message["method"], message.get("params"))
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        except Exception as error:
            log.exception("%s: request handler for %s failed", self.name, message["method"])
            reply = {"jsonrpc": "2.0", "id": message["id"],
                     "error": {"code": -32603, "message": str(error)}}  # fmt: skip
        with contextlib.suppress(ServerError):
            await self._send(reply)

    def _spawn(self, coroutine: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _fail_pending(self, reason: str) -> None:
        if self._closed_reason is None:
            self._closed_reason = reason
        for method, future in self._pending.values():
            if not future.done():
                future.set_exception(ServerCrashed(f"{self.name} failed during {method}: {reason}"))
        self.closed.set()
