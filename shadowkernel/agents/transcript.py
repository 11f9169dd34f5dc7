"""Every model request and response of a cell, recorded as JSON lines, and replayed from them.

Agents that talk to a model send each request through `exchange(request, call)`: a plain
JSON request in, a plain JSON response out. Outside an experiment that only calls. Inside a
cell, `experiment(..., record=DIR)` makes the cell's `Transcript` current (a context variable,
so cells on other threads keep theirs) and each exchange appends one line to the cell's file:
the request, the response, the token usage the response reported and the latency. With
`replay=DIR` the same exchange answers from the file without calling anything, after
checking that the request is the one recorded at that position (a replay that would show the
model something else stops with `ReplayError` naming the first difference), so an experiment
re-runs without a model or a network and gives the same rows.

Caveat: latency is wall time and is recorded, never replayed into a row's reproducible
columns.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import ShadowError

JSON = dict[str, Any]


class ReplayError(ShadowError):
    """A replayed cell asked the model something its record does not hold."""


def cell_file(folder: str | os.PathLike[str], cell: str) -> str:
    """The file of a cell's exchanges: its name made safe for a file system."""
    safe = re.sub(r"[^A-Za-z0-9_.+-]+", "_", cell).strip("_")
    return os.path.join(os.fspath(folder), f"{safe}.jsonl")


class Transcript:
    """The exchanges of one cell: appended to (`record`) or read back in order (`replay`)."""

    def __init__(self, path: str, mode: str) -> None:
        if mode not in ("record", "replay"):
            raise ValueError(f"mode={mode!r}")
        self.path, self.mode = path, mode
        self._lock = threading.Lock()
        self._lines: list[JSON] | None = None  # read at the first replayed request
        if mode == "record":
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            open(path, "w").close()  # a cell run again records afresh
        self._next = 0

    def exchange(self, request: JSON, call: Callable[[JSON], JSON]) -> JSON:
        with self._lock:
            if self.mode == "replay":
                return self._replayed(request)
            began = time.perf_counter()
            response = call(request)
            line = {"turn": self._next, "request": request, "response": response,
                    "usage": usage_of(response),
                    "latency": time.perf_counter() - began}  # fmt: skip
            with open(self.path, "a") as f:
                f.write(json.dumps(line, sort_keys=True) + "\n")
            self._next += 1
            return response

    def _replayed(self, request: JSON) -> JSON:
        if self._lines is None:  # a missing record fails the cell's first request, not the run
            self._lines = read_lines(self.path)
        if self._next >= len(self._lines):
            raise ReplayError(f"{self.path}: the record holds {len(self._lines)} requests; the "
                              f"replay asked for request {self._next + 1}")  # fmt: skip
        line = self._lines[self._next]
        if canonical(line["request"]) != canonical(request):
            raise ReplayError(f"{self.path}: request {self._next + 1} differs from the record "
                              f"({first_difference(line['request'], request)})")  # fmt: skip
        self._next += 1
        return line["response"]


def read_lines(path: str) -> list[JSON]:
    try:
        with open(path) as f:
            return [json.loads(x) for x in f if x.strip()]
    except FileNotFoundError:
        raise ReplayError(f"{path}: no record of this cell; run the experiment with "
                          "record= first") from None  # fmt: skip


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def first_difference(recorded: Any, asked: Any, where: str = "request") -> str:
    """Where two JSON values first differ, as a path (for the replay's error)."""
    if isinstance(recorded, dict) and isinstance(asked, dict):
        for key in sorted(set(recorded) | set(asked)):
            if canonical(recorded.get(key)) != canonical(asked.get(key)):
                return first_difference(recorded.get(key), asked.get(key), f"{where}.{key}")
    if isinstance(recorded, list) and isinstance(asked, list):
        for i, (a, b) in enumerate(zip(recorded, asked, strict=False)):
            if canonical(a) != canonical(b):
                return first_difference(a, b, f"{where}[{i}]")
        return f"{where}: {len(recorded)} items recorded, {len(asked)} asked"
    return f"{where}: recorded {canonical(recorded)[:120]}, asked {canonical(asked)[:120]}"


def usage_of(response: JSON) -> JSON:
    """Token counts as the response reports them (chat completions or Messages API)."""
    usage = response.get("usage") or {}
    prompt = usage.get("prompt_tokens", usage.get("input_tokens"))
    completion = usage.get("completion_tokens", usage.get("output_tokens"))
    return {"prompt_tokens": prompt, "completion_tokens": completion}


_CURRENT: contextvars.ContextVar[Transcript | None] = contextvars.ContextVar(
    "shadowkernel_transcript", default=None)  # fmt: skip


@contextlib.contextmanager
def current(transcript: Transcript | None) -> Iterator[Transcript | None]:
    """Make `transcript` the one this thread's exchanges go through."""
    token = _CURRENT.set(transcript)
    try:
        yield transcript
    finally:
        _CURRENT.reset(token)


def exchange(request: JSON, call: Callable[[JSON], JSON]) -> JSON:
    """One model request: recorded or replayed when a cell's transcript is current."""
    transcript = _CURRENT.get()
    return call(request) if transcript is None else transcript.exchange(request, call)
