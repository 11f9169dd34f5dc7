"""An agent backed by any OpenAI-compatible chat-completions endpoint.

`base_url` points it at a local server (vLLM `http://127.0.0.1:8000/v1`, llama.cpp's
`llama-server`, ollama `http://127.0.0.1:11434/v1`); the `openai` package does the HTTP.
Each turn is one stateless request built from the observation (`prompt.messages`), so a
turn can be replayed from its record. The reply is parsed by `edits.parse_reply`; a reply
that starts an edit block but breaks it is a failed step (kind "output"), not a crash.
"""

from __future__ import annotations

import os
from typing import Any

from . import prompt
from .edits import Proposal
from .observation import Observation


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
        if client is None:
            import openai

            key = api_key or os.environ.get("OPENAI_API_KEY") or "not-needed"
            client = openai.OpenAI(base_url=base_url, api_key=key, timeout=timeout,
                                   max_retries=0)  # fmt: skip
        self.client = client

    @property
    def fingerprint(self) -> str:
        return f"openai:{self.base_url}:{self.model}:{self.temperature}:{self.max_tokens}"

    def __call__(self, obs: Observation) -> Proposal:
        response = self.client.chat.completions.create(
            model=self.model, messages=prompt.messages(obs, self.system),
            temperature=self.temperature, max_tokens=self.max_tokens, seed=obs.seed,
            extra_body=self.extra_body or None,
        )  # fmt: skip
        text = response.choices[0].message.content or ""
        usage = getattr(response, "usage", None)
        # The loop parses the text (edits.normalize), so a broken reply is recorded as an
        # "output" failure of this turn rather than as a crash of the agent.
        return Proposal(
            edits=[] if text.strip() == "DONE" else text,
            prompt_tokens=getattr(usage, "prompt_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None),
            reply=text,
        )

    def __repr__(self) -> str:
        return f"<OpenAIChatAgent {self.model} at {self.base_url or 'api.openai.com'}>"
