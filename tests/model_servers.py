"""The one fake in the agent tests: small HTTP servers on 127.0.0.1 that speak a model API.

`ChatServer` answers POST /v1/chat/completions, `MessagesServer` POST /v1/messages, each with
scripted replies (a list of tool calls per turn, or a text), and records every request body,
so tests see exactly what the model was shown. The `openai` and `anthropic` clients make real
HTTP requests to them; nothing else is faked.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Turn = list[tuple[str, dict[str, Any]]] | str  # tool calls (name, arguments) or a final text


class _Server:
    path = ""

    def __init__(self, script: list[Turn]) -> None:
        self.script, self.requests = list(script), []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append(body)
                turn = fake.script.pop(0) if fake.script else "done"
                answer = json.dumps(fake.answer(body, turn, len(fake.requests))).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def answer(self, body: dict[str, Any], turn: Turn, n: int) -> dict[str, Any]:
        raise NotImplementedError

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


class ChatServer(_Server):
    """Chat completions with `tools`/`tool_calls`."""

    def answer(self, body: dict[str, Any], turn: Turn, n: int) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if isinstance(turn, str):
            message["content"] = turn
        else:
            message["tool_calls"] = [
                {"id": f"call_{n}_{i}", "type": "function",
                 "function": {"name": name, "arguments": json.dumps(args)}}
                for i, (name, args) in enumerate(turn)]  # fmt: skip
        return {"id": f"c{n}", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "message": message,
                             "finish_reason": "stop" if isinstance(turn, str) else "tool_calls"}],
                "usage": {"prompt_tokens": 1000 + n, "completion_tokens": 20 + n,
                          "total_tokens": 1020 + 2 * n}}  # fmt: skip


class MessagesServer(_Server):
    """Anthropic's Messages API with `tool_use`/`tool_result`."""

    def answer(self, body: dict[str, Any], turn: Turn, n: int) -> dict[str, Any]:
        if isinstance(turn, str):
            content: list[dict[str, Any]] = [{"type": "text", "text": turn}]
        else:
            content = [{"type": "tool_use", "id": f"toolu_{n}_{i}", "name": name, "input": args}
                       for i, (name, args) in enumerate(turn)]  # fmt: skip
        return {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": body["model"],
                "content": content, "stop_reason": "end_turn" if isinstance(turn, str)
                else "tool_use", "stop_sequence": None,
                "usage": {"input_tokens": 2000 + n, "output_tokens": 30 + n}}  # fmt: skip


@contextmanager
def serving(kind: type[_Server], script: list[Turn]) -> Iterator[Any]:
    server = kind(script)
    try:
        yield server
    finally:
        server.close()
