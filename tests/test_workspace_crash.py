"""A staging call that returned survives the crash of its process (DESIGN invariant 8).

A child process stages seeded random edits across branches (writes, deletes, forks, drops)
and reports on a pipe what it is about to do and then each acknowledged result; the test
kills it with SIGKILL after a random number of acknowledgements, 40 times, reopens the
folder each time, and finds every acknowledged version, byte-exact, and nothing torn: each
branch is exactly what was acknowledged, or that plus the one change in flight when the kill
came. The next child goes on from what was restored.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from overlay_helpers import snapshot

import shadowkernel as sk

pytestmark = pytest.mark.timeout(600)

KILLS = 40
PATHS = ["pkg/a.py", "pkg/b.py", "pkg/deep/c.py", "notes.txt", "new/thing.py"]
NAMES = ["alpha", "beta", "gamma"]

# A zygote imports shadowkernel once (seconds on a busy machine) and forks one child per round;
# each child opens the workspace (restoring it) and stages until it is killed.
ZYGOTE = """
import hashlib, json, os, random, sys
import shadowkernel as sk
import shadowkernel.workspace

root, state = sys.argv[1], sys.argv[2]
paths, names = json.loads(sys.argv[3]), json.loads(sys.argv[4])

def say(**line):
    os.write(1, (json.dumps(line) + "\\n").encode())  # one write: a whole line or nothing

def files(branch):
    return {p: None if d is None else hashlib.sha256(d).hexdigest() for p, d in branch.files.items()}

def stage_forever(rng):
    ws = sk.Workspace(root, servers=[], state=state, mode="documents")
    while True:
        name = rng.choice(names)
        branch = ws.branches.get(name)
        if branch is None:
            say(intent="fork", branch=name)
            ws.branch(name)
            say(ack="fork", branch=name)
        elif rng.random() < 0.05:
            say(intent="drop", branch=name)
            branch.drop()
            say(ack="drop", branch=name)
        else:
            path = rng.choice(paths)
            if branch.files.get(path) is not None and rng.random() < 0.2:
                data = None
            else:
                size = rng.choice([10, 1000, 100_000])
                data = "".join(rng.choice("abcdefgh \\n") for _ in range(size)) + "\\n"
            digest = None if data is None else hashlib.sha256(data.encode()).hexdigest()
            say(intent="version", branch=name, path=path, digest=digest)
            version = branch.delete(path) if data is None else branch.write(path, data)
            say(ack="version", branch=name, version=version, files=files(branch))

for line in sys.stdin:
    pid = os.fork()
    if pid == 0:
        try:
            stage_forever(random.Random(int(line)))
        finally:
            os._exit(3)
    say(child=pid)
    _, status = os.waitpid(pid, 0)
    say(reaped=pid, status=status)
"""

Model = dict[str, list[dict[str, Any]]]  # branch -> the files of each version


def restored(root: Path, state: Path) -> Model:
    with sk.Workspace(root, servers=[], state=state, mode="documents") as ws:
        return {
            name: [{p: None if d is None else hashlib.sha256(d).hexdigest()
                    for p, d in v.files.items()} for v in b.versions]
            for name, b in ws.branches.items()
        }  # fmt: skip


def apply(model: Model, line: dict[str, Any]) -> Model:
    """The model after an acknowledged line."""
    out = {name: list(versions) for name, versions in model.items()}
    if line["ack"] == "fork":
        out[line["branch"]] = [{}]
    elif line["ack"] == "drop":
        del out[line["branch"]]
    else:
        versions = out[line["branch"]]
        assert line["version"] == len(versions)
        versions.append(line["files"])
    return out


def in_flight(model: Model, intent: dict[str, Any]) -> Model:
    """The model had the change the child was making when it died become durable."""
    name = intent["branch"]
    if intent["intent"] == "fork":
        return {**model, name: [{}]}
    if intent["intent"] == "drop":
        return {n: v for n, v in model.items() if n != name}
    versions = model[name]
    files = {**versions[-1], intent["path"]: intent["digest"]}
    return {**model, name: [*versions, files]}


def crash_once(
    zygote: subprocess.Popen[str], seed: int, acks: int
) -> tuple[list[dict], dict | None]:
    """Fork a child staging with `seed`; SIGKILL it after `acks` acknowledgements; what it said
    (every line it wrote before it died: the zygote says `reaped` after them)."""
    assert zygote.stdin is not None and zygote.stdout is not None
    zygote.stdin.write(f"{seed}\n")
    zygote.stdin.flush()
    said: list[dict] = []
    child = None
    while child is None or sum("ack" in line for line in said) < acks:
        line = json.loads(zygote.stdout.readline() or '{"ended": true}')
        assert "ended" not in line and "reaped" not in line, f"the child ended on its own: {said}"
        if "child" in line:
            child = line["child"]
        else:
            said.append(line)
    os.kill(child, signal.SIGKILL)
    while "reaped" not in (line := json.loads(zygote.stdout.readline())):
        said.append(line)
    assert os.WIFSIGNALED(line["status"]) and os.WTERMSIG(line["status"]) == signal.SIGKILL
    pending = said[-1] if "intent" in said[-1] else None
    return [line for line in said if "ack" in line], pending


def test_every_acknowledged_version_survives_sigkill(tmp_path: Path) -> None:
    root, state = tmp_path / "project", tmp_path / "state"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg/a.py").write_text("A = 1\n")
    (root / "notes.txt").write_text("user notes\n")
    before = snapshot(root)
    rng = random.Random(20261201)
    model: Model = {}
    versions_seen = 0
    zygote = subprocess.Popen(
        [sys.executable, "-c", ZYGOTE, str(root), str(state), json.dumps(PATHS), json.dumps(NAMES)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        for round_ in range(KILLS):
            acks, pending = crash_once(zygote, rng.randrange(2**32), rng.randint(1, 12))
            for line in acks:
                model = apply(model, line)
            found = restored(root, state)
            allowed = [model] + ([in_flight(model, pending)] if pending else [])
            assert found in allowed, (round_, pending, found, model)
            model = found
            versions_seen += sum(len(v) for v in found.values())
    finally:
        zygote.communicate("")  # stdin closes: it exits
    assert versions_seen > KILLS  # the loop staged and restored real work
    assert snapshot(root) == before  # nothing written into the folder
