"""compile_commands.json seen from the shadow, for clangd.

A project's compilation database names the user's folder (CMake writes absolute paths), so a
server rooted at the shadow would compile the user's files, headers included, and a branch's
edits would never count. clangd is therefore given a copy, written outside the project, in
which the folder's path is replaced by the shadow's and relative directories are made
absolute there (`--compile-commands-dir`). The copy is made when the server starts; a switch
that changes the database restarts the server (its spec's `restart_on`).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import ArgumentError

# Where build systems put the database, as clangd looks for it.
PLACES = ("compile_commands.json", "build/compile_commands.json")


def translate(
    entries: Any, project: str, root: str, where: str = "compile_commands.json"
) -> list[dict[str, Any]]:
    """The entries with the `project` folder replaced by `root` in every path they name, and
    relative directories made absolute below `root` (pure)."""
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ArgumentError(f"{where}: a compilation database is a JSON list of objects")
    project, root = project.rstrip("/"), root.rstrip("/")

    def moved(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        return root if value == project else value.replace(project + "/", root + "/")

    out = []
    for entry in entries:
        directory = moved(str(entry.get("directory", ".")))
        if not os.path.isabs(directory):
            directory = os.path.normpath(os.path.join(root, directory))
        changed = {key: moved(value) for key, value in entry.items()}
        if isinstance(entry.get("arguments"), list):
            changed["arguments"] = [moved(argument) for argument in entry["arguments"]]
        out.append({**changed, "directory": directory})
    return out


def clangd_arguments(root: Path, project: Path) -> Sequence[str]:
    """`--compile-commands-dir` naming a translated copy of the project's database, when it
    has one (read at the shadow, so the branch shown at start)."""
    for place in PLACES:
        source = root / place
        if source.is_file():
            try:
                entries = json.loads(source.read_text(encoding="utf-8"))
            except ValueError as error:
                raise ArgumentError(f"{place}: not valid JSON: {error}") from None
            into = _folder(root)
            data = translate(entries, os.fspath(project), os.fspath(root), place)
            (into / "compile_commands.json").write_text(json.dumps(data, indent=1))
            return [f"--compile-commands-dir={into}"]
    return []


def _folder(root: Path) -> Path:
    key = hashlib.sha1(os.fspath(root).encode()).hexdigest()[:12]
    folder = Path(tempfile.gettempdir()) / f"shadowkernel-compdb-{key}"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder
