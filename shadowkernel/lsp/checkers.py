"""Disk-bound checkers: whole-project commands run in the shadow, parsed into Lint rows.

Language servers see open documents; these tools only see the disk, which is fine because
the shadow *is* the branch's disk. Each checker is a command plus a pure parser of its
output (tested directly). Caches are kept out of the shadow (`--no-cache`,
`--cache-dir=/dev/null`, CARGO_TARGET_DIR in the temp dir) so a check adds no overrides.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import NotFound, PathError, ServerError
from ..paths import rel, relative_to
from ..text.ranges import TextEdit
from .lints import Fix, Lint
from .specs import find_program


@dataclass(frozen=True)
class Checker:
    name: str
    argv: tuple[str, ...]
    parse: Callable[[str, Path], list[Lint]]
    ok_codes: frozenset[int] = frozenset({0, 1})
    install: str = ""
    search: tuple[str, ...] = ()
    env: Callable[[Path], dict[str, str]] = field(default=lambda root: {})


def _relative(filename: str, root: Path) -> str:
    if not os.path.isabs(filename):
        return rel(filename)
    for folder in (root, root.resolve()):
        with contextlib.suppress(PathError):  # below it, but through '..': try the next
            below = relative_to(filename, str(folder))
            if below is not None:
                return below
    return filename


def parse_ruff(output: str, root: Path) -> list[Lint]:
    """`ruff check --output-format=json`: 1-based rows/columns, end exclusive."""
    lints = []
    for item in json.loads(output or "[]"):
        fix = item.get("fix") or {}
        lints.append(Lint(
            path=_relative(item["filename"], root),  # type: ignore[arg-type]
            line=item["location"]["row"], column=item["location"]["column"],
            end_line=item["end_location"]["row"], end_column=item["end_location"]["column"],
            severity=item.get("severity") or "error",
            code=item.get("code") or "", source="ruff", message=item["message"],
            fixes=_ruff_fixes(fix, item["filename"], root),
        ))  # fmt: skip
    return lints


def _ruff_fixes(fix: dict[str, Any], filename: str, root: Path) -> tuple[Fix, ...]:
    if not fix:
        return ()
    path = _relative(filename, root)
    edits = tuple(
        TextEdit(path, e["location"]["row"], e["location"]["column"],  # type: ignore[arg-type]
             e["end_location"]["row"], e["end_location"]["column"], e["content"])
        for e in fix.get("edits", ())
    )  # fmt: skip
    return (Fix(fix.get("message") or "Apply fix", edits),)


def parse_mypy(output: str, root: Path) -> list[Lint]:
    """`mypy -O json`: one object per line, 0-based columns (end exclusive)."""
    lints = []
    for line in output.splitlines():
        if not line.startswith("{"):
            continue
        item = json.loads(line)
        column = max(item.get("column", 0), 0) + 1
        end_line = item.get("end_line") or item["line"]
        end_column = (item["end_column"] + 1) if item.get("end_column") is not None else column
        message = item["message"] + (f" ({item['hint']})" if item.get("hint") else "")
        lints.append(Lint(_relative(item["file"], root), item["line"], column,  # type: ignore[arg-type]
                          end_line, end_column, item.get("severity", "error"),
                          item.get("code") or "", "mypy", message))  # fmt: skip
    return lints


_TSC = re.compile(r"^(?P<file>.+?)\((?P<line>\d+),(?P<col>\d+)\): (?P<sev>error|warning|message) "
                  r"TS(?P<code>\d+): (?P<msg>.*)$")  # fmt: skip


def parse_tsc(output: str, root: Path) -> list[Lint]:
    """`tsc --noEmit --pretty false`: `file(line,col): error TS1234: message` (+ indented
    continuation lines, appended to the message). tsc gives no end: end = start."""
    lints: list[Lint] = []
    for line in output.splitlines():
        match = _TSC.match(line)
        if match:
            ln, col = int(match["line"]), int(match["col"])
            lints.append(Lint(_relative(match["file"], root), ln, col, ln, col,  # type: ignore[arg-type]
                              match["sev"], f"TS{match['code']}", "tsc", match["msg"]))  # fmt: skip
        elif lints and line.startswith(" "):
            last = lints[-1]
            lints[-1] = Lint(**{**last.__dict__, "message": last.message + "\n" + line.strip()})
    return lints


def parse_cargo(output: str, root: Path) -> list[Lint]:
    """`cargo check --message-format=json`: compiler messages with 1-based spans."""
    lints = []
    for line in output.splitlines():
        if not line.startswith("{"):
            continue
        item = json.loads(line)
        message = item.get("message") or {}
        if item.get("reason") != "compiler-message" or not message.get("spans"):
            continue
        span = next((s for s in message["spans"] if s.get("is_primary")), message["spans"][0])
        level = {"error": "error", "warning": "warning", "note": "information",
                 "help": "hint"}.get(message.get("level", ""), "error")  # fmt: skip
        lints.append(Lint(_relative(span["file_name"], root),  # type: ignore[arg-type]
                          span["line_start"], span["column_start"], span["line_end"],
                          span["column_end"], level, (message.get("code") or {}).get("code") or "",
                          "cargo", message.get("message", "")))  # fmt: skip
    return lints


def _cargo_env(root: Path) -> dict[str, str]:
    # Build products would become (large) overrides in the shadow: keep them outside.
    digest = hashlib.sha1(str(root).encode()).hexdigest()[:12]
    return {"CARGO_TARGET_DIR": os.path.join(tempfile.gettempdir(), f"shadowkernel-cargo-{digest}")}


CHECKERS: dict[str, Checker] = {
    c.name: c
    for c in [
        Checker("ruff", ("ruff", "check", "--output-format=json", "--no-cache", "--exit-zero", "."),
                parse_ruff, install="pip install ruff"),
        Checker("mypy", ("mypy", "-O", "json", "--cache-dir=/dev/null", "."), parse_mypy,
                install="pip install mypy"),
        Checker("tsc", ("tsc", "--noEmit", "--pretty", "false"), parse_tsc,
                ok_codes=frozenset({0, 1, 2}), search=("node/node_modules/.bin",),
                install="bash .ci/setup (or: npm install --prefix <venv>/node typescript@5)"),
        Checker("cargo", ("cargo", "check", "--message-format=json", "--quiet"), parse_cargo,
                ok_codes=frozenset({0, 101}), env=_cargo_env,
                install="https://rustup.rs (curl ... | sh), then cargo is on PATH"),
    ]
}  # fmt: skip


def _argv(checker: Checker, root: Path) -> list[str]:
    program = find_program(checker.argv[0], checker.search)
    if program is None:
        raise ServerError(f"checker {checker.name!r} is not installed ({checker.argv[0]!r} not "
                          f"found). To install it: {checker.install}")  # fmt: skip
    argv = [program, *checker.argv[1:]]
    if checker.name == "tsc" and not (root / "tsconfig.json").exists():
        # Without a tsconfig, tsc checks nothing: name the files.
        argv += sorted(str(p.relative_to(root)) for p in root.rglob("*.ts")
                       if "node_modules" not in p.parts)  # fmt: skip
    return argv


async def run_checker(name: str, root: Path, timeout: float = 300) -> list[Lint]:
    """Run checker `name` with cwd=root and parse its output into Lint rows."""
    checker = CHECKERS.get(name)
    if checker is None:
        raise NotFound(f"checker {name!r} is unknown; known: {', '.join(CHECKERS)}")
    process = await asyncio.create_subprocess_exec(
        *_argv(checker, root), cwd=root, env={**os.environ, **checker.env(root)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise ServerError(
            f"checker {name!r} did not finish within {timeout:g} s; raise timeout"
        ) from None
    if process.returncode not in checker.ok_codes:
        tail = (err or out).decode(errors="replace").strip()[-800:]
        raise ServerError(f"checker {name!r} failed with exit code {process.returncode}: {tail}")
    return checker.parse(out.decode(errors="replace"), root)
