"""An agent backed by any OpenAI-compatible chat-completions endpoint.

`base_url` points it at a local server (vLLM `http://127.0.0.1:8000/v1`, llama.cpp's
`llama-server`, ollama `http://127.0.0.1:11434/v1`); the `openai` package does the HTTP.
Each turn is one stateless request built from the observation (`prompt.messages`), so a
turn can be replayed from its record (each request goes through `transcript.exchange`, so
`sk.experiment(record=..., replay=...)` covers it). The reply is parsed by
`edits.parse_reply`; a reply
that starts an edit block but breaks it is a failed step (kind "output"), not a crash.
"""

from __future__ import annotations

import os
from typing import Any

from . import prompt
from .edits import Proposal
from .observation import Observation
from .transcript import exchange


def openai_client(base_url: str | None, api_key: str | None, timeout: float) -> Any:
    """A client of a chat-completions server; the key defaults to $OPENAI_API_KEY (local
    servers take any)."""
    import openai

    key = api_key or os.environ.get("OPENAI_API_KEY") or "not-needed"
    return openai.OpenAI(base_url=base_url, api_key=key, timeout=timeout, max_retries=0)


class OpenAIChatAgent:
    simulated = False

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        temperature: float = 0.0,
        max_tokens: int = 2048,
        timeout: float = 120.0,
        system: str = prompt.SYSTEM,
        client: Any = None,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.system = system
        self.extra_body = extra_body or {}
        self.name = f"openai-chat({model})"
        self._client, self._key, self._timeout = client, api_key, timeout

    @property
    def client(self) -> Any:
        if self._client is None:  # made on first use, so a replay needs no key nor package
            self._client = openai_client(self.base_url, self._key, self._timeout)
        return self._client

    @property
    def fingerprint(self) -> str:
        return f"openai:{self.base_url}:{self.model}:{self.temperature}:{self.max_tokens}"

    def request(self, obs: Observation) -> dict[str, Any]:
        """The chat-completions request for one turn (plain JSON: recordable)."""
        request: dict[str, Any] = {
            "model": self.model, "messages": prompt.messages(obs, self.system),
            "temperature": self.temperature, "max_tokens": self.max_tokens, "seed": obs.seed,
        }  # fmt: skip
        if self.extra_body:
            request["extra_body"] = self.extra_body
        return request

    def __call__(self, obs: Observation) -> Proposal:
        response = exchange(self.request(obs), self._call)
        text = response["choices"][0]["message"].get("content") or ""
        usage = response.get("usage") or {}
        # The loop parses the text (edits.normalize), so a broken reply is recorded as an
        # "output" failure of this turn rather than as a crash of the agent.
        return Proposal(
            edits=[] if text.strip() == "DONE" else text,
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            reply=text,
        )

    def _call(self, request: dict[str, Any]) -> dict[str, Any]:
        return self.client.chat.completions.create(**request).model_dump(mode="json")

    def __repr__(self) -> str:
        return f"<OpenAIChatAgent {self.model} at {self.base_url or 'api.openai.com'}>"
