"""What a model reads in a tool result's text block and in a tool error (pure text).

Hosts that read only the text block still need the answer, so most tools' text is their
JSON (compact); a run's is a short summary with its output's tail, since its structured
result already carries the (capped) output and repeating it doubles the result; read_file's
is the file's text as it is (a page of it, then where the rest is).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from typing import Any

TEXT_TAIL = 2000  # characters of each stream a run's summary repeats


def one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def argument_error(tool: str, error: Any) -> str:
    """A pydantic ValidationError as one sentence naming the (first) argument."""
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "arguments"
    if first["type"] == "missing":
        return f"{tool}: argument {where!r} is required"
    given = first.get("input")
    shown = "" if isinstance(given, Mapping) else f" (got {json.dumps(given)[:60]})"
    return f"{tool}: argument {where!r}: {first['msg'].rstrip('.').lower()}{shown}"


def unknown_arguments(tool: str, unknown: Sequence[str], taken: Sequence[str]) -> str:
    """Arguments a tool does not take, each with the nearest one it does, and its list."""
    named = []
    for name in unknown:
        near = difflib.get_close_matches(name, taken, n=1)
        named.append(f"{name!r} (did you mean {near[0]!r}?)" if near else repr(name))
    nouns = "argument" if len(unknown) == 1 else "arguments"
    takes = ", ".join(taken) or "no arguments"
    return f"{tool}: unknown {nouns} {', '.join(named)}; {tool} takes {takes}"


def wrong_type(tool: str, name: str, wanted: str, given: Any) -> str:
    """An argument of the wrong JSON type, e.g. the string "yes" for a boolean."""
    kinds = {str: "a string", bool: "a boolean", int: "a number", float: "a number",
             list: "an array", dict: "an object"}  # fmt: skip
    kind = kinds.get(type(given), type(given).__name__)
    return f"{tool}: argument {name!r}: give {wanted}, not {kind} (got {json.dumps(given)[:60]})"


def summary(tool: str, result: Mapping[str, Any]) -> str:
    if tool == "run":
        return run_summary(result)
    if tool == "read_file":  # the text itself, not escaped again in JSON
        return str(result["content"]) + page_note(result)
    return json.dumps(result, separators=(",", ":"), ensure_ascii=False)


def page_note(page: Mapping[str, Any]) -> str:
    """After a page of a file that does not end the file: where the rest is."""
    if not page["more"]:
        return ""
    return (f"\n\n[read_file: characters {page['offset']} to {page['next_offset']} of "
            f"{page['total_chars']}; more from offset={page['next_offset']}]")  # fmt: skip


def run_summary(answer: Mapping[str, Any]) -> str:
    result = answer["result"]
    if result["timed_out"]:
        status = f"timed out after {result['duration']:.1f} s and was killed"
    elif result["cancelled"]:
        status = "was cancelled"
    else:
        status = f"exited {result['exit_code']} after {result['duration']:.1f} s"
    lines = [f"run on {answer['branch']} (now version {answer['version']}) {status}"]
    for stream in ("stdout", "stderr"):
        text, total = result[stream], result[f"{stream}_bytes"]
        if text:
            tail = text if len(text) <= TEXT_TAIL else "..." + text[-TEXT_TAIL:]
            lines.append(f"{stream} ({total} bytes, last {min(len(text), TEXT_TAIL)} "
                         f"characters):\n{tail}")  # fmt: skip
    if result["written"]:
        lines.append(f"wrote: {', '.join(result['written'][:20])}")
    lines.extend(result["notes"])
    return "\n".join(lines)
