"""Tool-calling agents over the two APIs people use: chat completions and Messages.

    agent = sk.OpenAIToolAgent("gpt-4.1-mini")                      # or base_url= for vLLM,
    agent = sk.OpenAIToolAgent("qwen", base_url="http://127.0.0.1:8000/v1")  # llama.cpp, ...
    agent = sk.AnthropicToolAgent("claude-sonnet-4-5")
    df = sk.experiment(agent, suite, ["none", "on-edit", "guard", "lint-tool"], seeds=3)

Each is a `ChatFormat` (how its API spells tools, tool calls and tool results) plus the call
through its official client (`openai`, `anthropic`; `max_retries=0`, so a failure is a
failed cell, not a silent retry). The loop itself is `tool_loop.tool_episode`. A request is
plain JSON, stateless (the whole conversation each time), so it can be recorded and replayed
(`transcript.py`); responses are the client's objects dumped to JSON.
"""

from __future__ import annotations

import os
from typing import Any

from .openai_chat import openai_client
from .tool_loop import SYSTEM, Call, Reply, tool_episode
from .transcript import JSON


class ChatCompletionsFormat:
    """OpenAI's chat completions: `tools` of type function, `tool_calls`, role "tool"."""

    def __init__(self, model: str, temperature: float, max_tokens: int, seed: int | None
                 ) -> None:  # fmt: skip
        self.model, self.temperature, self.max_tokens, self.seed = (model, temperature,
                                                                    max_tokens, seed)  # fmt: skip

    def request(self, system: str, messages: list[JSON], tools: list[JSON]) -> JSON:
        request: JSON = {
            "model": self.model, "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "messages": [{"role": "system", "content": system}, *messages],
            "tools": [{"type": "function", "function": {
                "name": t["name"], "description": t["description"],
                "parameters": t["input_schema"]}} for t in tools],
        }  # fmt: skip
        if self.seed is not None:
            request["seed"] = self.seed
        return request

    def reply(self, response: JSON) -> Reply:
        message = response["choices"][0]["message"]
        calls = tuple(Call(c["id"], c["function"]["name"], c["function"].get("arguments") or "")
                      for c in message.get("tool_calls") or ())  # fmt: skip
        usage = response.get("usage") or {}
        return Reply(message.get("content") or "", calls, usage.get("prompt_tokens"),
                     usage.get("completion_tokens"))  # fmt: skip

    def assistant(self, response: JSON) -> JSON:
        message = response["choices"][0]["message"]
        out: JSON = {"role": "assistant", "content": message.get("content")}
        if message.get("tool_calls"):
            out["tool_calls"] = [{"id": c["id"], "type": "function", "function": {
                "name": c["function"]["name"], "arguments": c["function"].get("arguments") or ""}}
                for c in message["tool_calls"]]  # fmt: skip
        return out

    def results(self, answers: list[tuple[Call, str, bool]]) -> list[JSON]:
        return [{"role": "tool", "tool_call_id": c.id, "content": text}
                for c, text, _ in answers]  # fmt: skip


class MessagesFormat:
    """Anthropic's Messages API: `tools` with input_schema, `tool_use` and `tool_result`."""

    def __init__(self, model: str, temperature: float | None, max_tokens: int) -> None:
        self.model, self.temperature, self.max_tokens = model, temperature, max_tokens

    def request(self, system: str, messages: list[JSON], tools: list[JSON]) -> JSON:
        request = {"model": self.model, "max_tokens": self.max_tokens, "system": system,
                   "messages": messages, "tools": tools}  # fmt: skip
        if self.temperature is not None:  # the current client no longer takes it by name
            request["extra_body"] = {"temperature": self.temperature}
        return request

    def reply(self, response: JSON) -> Reply:
        blocks = response.get("content") or []
        text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        calls = tuple(Call(b["id"], b["name"], b.get("input") or {})
                      for b in blocks if b.get("type") == "tool_use")  # fmt: skip
        usage = response.get("usage") or {}
        return Reply(text, calls, usage.get("input_tokens"), usage.get("output_tokens"))

    def assistant(self, response: JSON) -> JSON:
        keep = {"text": ("type", "text"), "tool_use": ("type", "id", "name", "input")}
        blocks = [{k: b[k] for k in keep[b["type"]] if k in b}
                  for b in response.get("content") or [] if b.get("type") in keep]  # fmt: skip
        return {"role": "assistant", "content": blocks}

    def results(self, answers: list[tuple[Call, str, bool]]) -> list[JSON]:
        return [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": c.id, "content": text, "is_error": error}
            for c, text, error in answers]}]  # fmt: skip


class _ToolAgent:
    """What both agents share: the episode, the name on the timeline, the fingerprint."""

    simulated = False
    tool_calling = True  # sk.experiment runs `episode` instead of the propose/stage loop
    name: str  # on the timeline and in the results, e.g. "openai-tools(gpt-4.1)"

    def __init__(self, model: str, base_url: str | None, max_turns: int, system: str) -> None:
        self.model, self.base_url, self.max_turns, self.system = (model, base_url, max_turns,
                                                                  system)  # fmt: skip

    def _format(self, seed: int) -> Any:
        raise NotImplementedError

    def _call(self, request: JSON) -> JSON:
        raise NotImplementedError

    def episode(self, branch: Any, task: Any, check: Any, condition: Any, *, seed: int = 0,
                budget: int | None = None) -> Any:  # fmt: skip
        """One cell: requests are the timeline's under this agent's name."""
        from ..sched import acting_for

        with acting_for(self.name):
            return tool_episode(self._format(seed), self._call, branch, task, check, condition,
                                seed=seed, max_turns=self.max_turns,
                                system=self.system)  # fmt: skip

    def __call__(self, obs: Any) -> Any:
        raise TypeError(f"{self.name} calls tools; run it with sk.experiment (or its "
                        "episode(branch, task, check, condition))")  # fmt: skip


class OpenAIToolAgent(_ToolAgent):
    """A tool-calling loop over any chat-completions endpoint (OpenAI, vLLM, llama.cpp,
    ollama): `base_url` picks the server, `api_key` defaults to $OPENAI_API_KEY."""

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None,
                 *, temperature: float = 0.0, max_tokens: int = 2048, max_turns: int = 20,
                 timeout: float = 120.0, system: str = SYSTEM, seed: bool = True,
                 client: Any = None) -> None:  # fmt: skip
        super().__init__(model, base_url, max_turns, system)
        self.temperature, self.max_tokens, self.seed = temperature, max_tokens, seed
        self.name = f"openai-tools({model})"
        self._client, self._key, self._timeout = client, api_key, timeout

    @property
    def client(self) -> Any:
        if self._client is None:  # made on first use, so a replay needs no key nor package
            self._client = openai_client(self.base_url, self._key, self._timeout)
        return self._client

    @property
    def fingerprint(self) -> str:
        return (f"openai-tools:{self.base_url}:{self.model}:{self.temperature}:"
                f"{self.max_tokens}:{self.max_turns}:{hash_text(self.system)}")  # fmt: skip

    def _format(self, seed: int) -> ChatCompletionsFormat:
        return ChatCompletionsFormat(self.model, self.temperature, self.max_tokens,
                                     seed if self.seed else None)  # fmt: skip

    def _call(self, request: JSON) -> JSON:
        return self.client.chat.completions.create(**request).model_dump(mode="json")

    def __repr__(self) -> str:
        return f"<OpenAIToolAgent {self.model} at {self.base_url or 'api.openai.com'}>"


class AnthropicToolAgent(_ToolAgent):
    """A tool-calling loop over Anthropic's Messages API (`base_url` for a compatible
    server; `api_key` defaults to $ANTHROPIC_API_KEY; `temperature` is sent only when given,
    as recent models take none)."""

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None,
                 *, temperature: float | None = None, max_tokens: int = 2048, max_turns: int = 20,
                 timeout: float = 120.0, system: str = SYSTEM,
                 client: Any = None) -> None:  # fmt: skip
        super().__init__(model, base_url, max_turns, system)
        self.temperature, self.max_tokens = temperature, max_tokens
        self.name = f"anthropic-tools({model})"
        self._client, self._key, self._timeout = client, api_key, timeout

    @property
    def client(self) -> Any:
        if self._client is None:
            import anthropic

            key = self._key or os.environ.get("ANTHROPIC_API_KEY") or "not-needed"
            self._client = anthropic.Anthropic(base_url=self.base_url, api_key=key,
                                               timeout=self._timeout, max_retries=0)  # fmt: skip
        return self._client

    @property
    def fingerprint(self) -> str:
        return (f"anthropic-tools:{self.base_url}:{self.model}:{self.temperature}:"
                f"{self.max_tokens}:{self.max_turns}:{hash_text(self.system)}")  # fmt: skip

    def _format(self, seed: int) -> MessagesFormat:
        return MessagesFormat(self.model, self.temperature, self.max_tokens)

    def _call(self, request: JSON) -> JSON:
        return self.client.messages.create(**request).model_dump(mode="json")

    def __repr__(self) -> str:
        return f"<AnthropicToolAgent {self.model} at {self.base_url or 'api.anthropic.com'}>"


def hash_text(text: str) -> str:
    import hashlib

    return hashlib.blake2b(text.encode(), digest_size=6).hexdigest()
