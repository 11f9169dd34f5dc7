"""OpenAIChatAgent against a tiny chat-completions server on 127.0.0.1 (started here)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from overlay_helpers import HAS_FUSE

import shadowkernel as sk
from shadowkernel.agents import OpenAIChatAgent
from shadowkernel.agents.edits import Proposal, Replace, normalize
from shadowkernel.agents.loop import run_episode
from shadowkernel.agents.observation import LintShown, Observation
from shadowkernel.evals import builtin_suite, make_checker

SUITE = builtin_suite()
SLUG = SUITE["textkit-slugify-runs"]


class FakeChat:
    """Serves /v1/chat/completions with queued replies; records each request body."""

    def __init__(self, replies: list[str]) -> None:
        self.replies, self.requests = list(replies), []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append((self.path, body))
                text = fake.replies.pop(0) if fake.replies else "DONE"
                answer = json.dumps({
                    "id": f"c{len(fake.requests)}", "object": "chat.completion", "created": 0,
                    "model": body["model"],
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": text}}],
                    "usage": {"prompt_tokens": 100 + len(fake.requests),
                              "completion_tokens": 7, "total_tokens": 107},
                }).encode()  # fmt: skip
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def no_proxy(monkeypatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                 "all_proxy"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")


@pytest.fixture
def fake() -> Iterator[FakeChat]:
    server = FakeChat([])
    yield server
    server.close()


def test_one_turn_sends_the_prompt_and_parses_the_reply(fake, no_proxy):
    fake.replies.append("Fix:\n\np/m.py\n<<<<<<< SEARCH\nreturn a - b\n=======\nreturn a + b\n"
                        ">>>>>>> REPLACE\n")  # fmt: skip
    agent = OpenAIChatAgent("tiny-model", base_url=fake.url, temperature=0.2)
    lint = LintShown("p/m.py", 2, 12, "F821", "Undefined name `c`", "error", True)
    out = agent(Observation("Add, do not subtract.", {"p/m.py": "def f(a, b):\n    return a - b\n"},
                            lints=(lint,), turn=1, seed=3))  # fmt: skip
    assert isinstance(out, Proposal)
    assert normalize(out.edits) == (Replace("p/m.py", "return a - b\n", "return a + b\n"),)
    assert (out.prompt_tokens, out.completion_tokens) == (101, 7)
    path, body = fake.requests[0]
    assert path == "/v1/chat/completions" and body["model"] == "tiny-model"
    assert body["temperature"] == 0.2 and body["seed"] == 3
    system, user = body["messages"]
    assert system["role"] == "system" and "SEARCH" in system["content"]
    assert (
        "Add, do not subtract." in user["content"] and "F821 Undefined name `c`" in user["content"]
    )


@pytest.mark.skipif(not HAS_FUSE, reason="needs /dev/fuse and fusermount3")
def test_the_loop_with_a_chat_model_records_reported_tokens(fake, no_proxy):
    old, new = SLUG.solution[0].old, SLUG.solution[0].new
    fake.replies += [
        "I am not sure what to do.\n<<<<<<< SEARCH\n",  # a broken block: a failed step
        f"{SLUG.files[0]}\n<<<<<<< SEARCH\n{old}=======\n{new}>>>>>>> REPLACE\n",
    ]
    agent = OpenAIChatAgent("tiny-model", base_url=fake.url)
    with sk.Workspace(SUITE.workspace_root) as ws:
        branch = ws.branch("chat")
        episode = run_episode(agent, branch, SLUG, make_checker(SUITE), "new-lints", budget=3)
    assert episode.solved and episode.turns == 2
    first, second = episode.steps
    assert first.error_kind == "output" and "SEARCH" in first.error
    assert second.tokens_reported and second.prompt_tokens == 102
    assert second.completion_tokens == 7
    assert "failed (output)" in fake.requests[1][1]["messages"][1]["content"]
