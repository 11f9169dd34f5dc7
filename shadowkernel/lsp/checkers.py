"""Disk-bound checkers: whole-project commands whose output becomes Lint rows.

Language servers see open documents; these tools only see the disk, which is fine because
a branch's view *is* its disk. Each checker is data (its command, which files decide its
output, how it exits) plus a pure parser of its output, tested directly against the tool's
own output. Running one is not this layer's business: `workspace/checkers.py` runs it as a
sandboxed run at the branch's exact version and caches its rows per content of the files it
reads. Caches are kept out of the project (`--no-cache`, `--cache-dir=/dev/null`,
CARGO_TARGET_DIR in the temp dir), so a check writes nothing a branch could keep.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import PathError
from ..paths import rel, relative_to
from ..text.ranges import TextEdit
from .lints import Fix, Lint

Parser = Callable[[str, Sequence[str]], list[Lint]]  # (output, the project's roots) -> rows


@dataclass(frozen=True)
class Checker:
    """One checker: `argv` run at the project's root; `reads`, base-name globs of the files
    whose content decides its output (its cache key); `ok_codes`, the exit codes that mean
    "checked" (finding problems included); its rows come from `stream` ("stdout"/"stderr")."""

    name: str
    argv: tuple[str, ...]
    parse: Parser
    reads: tuple[str, ...]
    ok_codes: frozenset[int] = frozenset({0, 1})
    stream: str = "stdout"
    install: str = ""
    search: tuple[str, ...] = ()
    env: Callable[[str], dict[str, str]] = field(default=lambda root: {})


def _relative(filename: str, roots: Sequence[str]) -> str:
    if not os.path.isabs(filename):
        return rel(filename)
    for folder in roots:
        with contextlib.suppress(PathError):  # below it, but through '..': try the next
            below = relative_to(filename, str(folder))
            if below is not None:
                return below
    return filename


def parse_ruff(output: str, roots: Sequence[str]) -> list[Lint]:
    """`ruff check --output-format=json`: 1-based rows/columns, end exclusive."""
    lints = []
    for item in json.loads(output or "[]"):
        fix = item.get("fix") or {}
        lints.append(Lint(
            path=_relative(item["filename"], roots),  # type: ignore[arg-type]
            line=item["location"]["row"], column=item["location"]["column"],
            end_line=item["end_location"]["row"], end_column=item["end_location"]["column"],
            severity=item.get("severity") or "error",
            code=item.get("code") or "", source="ruff", message=item["message"],
            fixes=_ruff_fixes(fix, item["filename"], roots),
        ))  # fmt: skip
    return lints


def _ruff_fixes(fix: dict[str, Any], filename: str, roots: Sequence[str]) -> tuple[Fix, ...]:
    if not fix:
        return ()
    path = _relative(filename, roots)
    edits = tuple(
        TextEdit(path, e["location"]["row"], e["location"]["column"],  # type: ignore[arg-type]
             e["end_location"]["row"], e["end_location"]["column"], e["content"])
        for e in fix.get("edits", ())
    )  # fmt: skip
    return (Fix(fix.get("message") or "Apply fix", edits),)


def parse_mypy(output: str, roots: Sequence[str]) -> list[Lint]:
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
        lints.append(Lint(_relative(item["file"], roots), item["line"], column,  # type: ignore[arg-type]
                          end_line, end_column, item.get("severity", "error"),
                          item.get("code") or "", "mypy", message))  # fmt: skip
    return lints


_TSC = re.compile(r"^(?P<file>.+?)\((?P<line>\d+),(?P<col>\d+)\): (?P<sev>error|warning|message) "
                  r"TS(?P<code>\d+): (?P<msg>.*)$")  # fmt: skip


def parse_tsc(output: str, roots: Sequence[str]) -> list[Lint]:
    """`tsc --noEmit --pretty false`: `file(line,col): error TS1234: message` (+ indented
    continuation lines, appended to the message). tsc gives no end: end = start."""
    lints: list[Lint] = []
    for line in output.splitlines():
        match = _TSC.match(line)
        if match:
            ln, col = int(match["line"]), int(match["col"])
            lints.append(Lint(_relative(match["file"], roots), ln, col, ln, col,  # type: ignore[arg-type]
                              match["sev"], f"TS{match['code']}", "tsc", match["msg"]))  # fmt: skip
        elif lints and line.startswith(" "):
            last = lints[-1]
            lints[-1] = Lint(**{**last.__dict__, "message": last.message + "\n" + line.strip()})
    return lints


def parse_cargo(output: str, roots: Sequence[str]) -> list[Lint]:
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
        lints.append(Lint(_relative(span["file_name"], roots),  # type: ignore[arg-type]
                          span["line_start"], span["column_start"], span["line_end"],
                          span["column_end"], level, (message.get("code") or {}).get("code") or "",
                          "cargo", message.get("message", "")))  # fmt: skip
    return lints


_GO = re.compile(r"^(?:vet: )?(?P<file>[^\s:][^:]*\.go):(?P<line>\d+):(?P<col>\d+): (?P<msg>.+)$")


def parse_go_vet(output: str, roots: Sequence[str]) -> list[Lint]:
    """`go vet ./...` (stderr): `file.go:line:col: message`, type errors prefixed `vet: `;
    `# package` headers and the rest are not rows. go vet gives no end: end = start."""
    lints = []
    for line in output.splitlines():
        if match := _GO.match(line.strip()):
            ln, col = int(match["line"]), int(match["col"])
            lints.append(Lint(_relative(match["file"], roots), ln, col, ln, col,  # type: ignore[arg-type]
                              "error", "", "go vet", match["msg"]))  # fmt: skip
    return lints


def _cargo_env(root: str) -> dict[str, str]:
    # Build products would become (large) overrides in the shadow: keep them outside.
    digest = hashlib.sha1(root.encode()).hexdigest()[:12]
    return {"CARGO_TARGET_DIR": os.path.join(tempfile.gettempdir(), f"shadowkernel-cargo-{digest}")}


_PY = ("*.py", "*.pyi", "pyproject.toml", "setup.cfg", "mypy.ini", ".mypy.ini", "ruff.toml",
       ".ruff.toml")  # fmt: skip
_TS = ("*.ts", "*.tsx", "*.mts", "*.cts", "*.d.ts", "tsconfig*.json", "package.json")

CHECKERS: dict[str, Checker] = {
    c.name: c
    for c in [
        Checker("ruff", ("ruff", "check", "--output-format=json", "--no-cache", "--exit-zero", "."),
                parse_ruff, _PY, install="pip install ruff"),
        Checker("mypy", ("mypy", "-O", "json", "--cache-dir=/dev/null", "."), parse_mypy, _PY,
                ok_codes=frozenset({0, 1}), install="pip install mypy"),
        Checker("tsc", ("tsc", "--noEmit", "--pretty", "false"), parse_tsc, _TS,
                ok_codes=frozenset({0, 1, 2}), search=("node/node_modules/.bin",),
                install="bash .ci/setup (or: npm install --prefix <venv>/node typescript@5)"),
        Checker("go vet", ("go", "vet", "./..."), parse_go_vet, ("*.go", "go.mod", "go.sum"),
                ok_codes=frozenset({0, 1, 2}), stream="stderr",
                install="bash .ci/setup (or: apt-get install golang-go)"),
        Checker("cargo", ("cargo", "check", "--message-format=json", "--quiet"), parse_cargo,
                ("*.rs", "Cargo.toml", "Cargo.lock"), ok_codes=frozenset({0, 101}), env=_cargo_env,
                install="https://rustup.rs (curl ... | sh), then cargo is on PATH"),
    ]
}  # fmt: skip


def checker_argv(checker: Checker, program: str, ts_files: Sequence[str] = ()) -> list[str]:
    """The command line with its program resolved; tsc without a tsconfig.json checks
    nothing, so it is given the project's .ts files (`ts_files`)."""
    return [program, *checker.argv[1:], *(ts_files if checker.name == "tsc" else ())]
