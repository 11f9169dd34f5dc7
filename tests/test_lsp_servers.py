"""The LSP pool against real language servers (no mocks).

The pool runs on an asyncio loop in a background thread, as in the kernel. The shadow is
played by a temporary folder: before serving a state, the test writes that state's files
(what the FUSE switch does), then calls `sync`. Nothing waits by sleeping: waits are for a
condition, with a bound.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import attrs
import pytest
from run_helpers import as_nobody, as_other_users, run_as
from waiting import wait_until

import shadowkernel as sk
from shadowkernel.errors import NotFound, ServerError
from shadowkernel.lsp import (
    Lint,
    LspPool,
    PullDiagnostics,
    ServerSpec,
    available_servers,
    builtin_specs,
    mark_new,
)

T = TypeVar("T")
INSTALLED = available_servers()


def needs(*names: str) -> pytest.MarkDecorator:
    missing = [n for n in names if not INSTALLED.get(n)]
    return pytest.mark.skipif(bool(missing), reason=f"not installed: {missing} (bash .ci/setup)")


class Loop:
    """An asyncio loop in a thread; `run` submits a coroutine and waits with a bound."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = 90) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def aio() -> Iterator[Loop]:
    loop = Loop()
    yield loop
    loop.close()


@pytest.fixture
def make_pool(aio: Loop) -> Iterator[Callable[..., LspPool]]:
    pools: list[LspPool] = []

    def make(root: Path, servers: list[Any], **kw: Any) -> LspPool:
        pool = LspPool(root, servers, **kw)
        pools.append(pool)
        return pool

    yield make
    for pool in pools:
        aio.run(pool.close())


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def codes(lints: list[Lint], source: str | None = None) -> set[str]:
    return {lint.code for lint in lints if source is None or lint.source.lower() == source}


# -- version-exact diagnostics, per server -------------------------------------------------

BROKEN = "import os\n\n\ndef f() -> int:\n    return undefined_name\n"
FIXED = "def f() -> int:\n    return 1\n"
EXPECTED = {
    "ruff": {"F401", "F821"},
    "pyright": {"reportUndefinedVariable"},
    "basedpyright": {"reportUndefinedVariable"},
    "ty": {"unresolved-reference"},
    "pylsp": None,  # pyflakes messages carry no code: check the message instead
    "jedi-language-server": None,
}


@pytest.mark.slow
@pytest.mark.parametrize("server", ["ruff", "pyright", "ty", "pylsp"])  # basedpyright: benchmark
def test_diagnostics_follow_each_synced_version(aio: Loop, make_pool: Any, tmp_path: Path,
                                                server: str) -> None:  # fmt: skip
    if not INSTALLED[server]:
        pytest.skip(f"{server} not installed (bash .ci/setup)")
    write(tmp_path, {"m.py": FIXED})
    pool = make_pool(tmp_path, [server])

    async def scenario() -> list[list[Lint]]:
        answers = []
        for text in (BROKEN, FIXED, BROKEN):
            await pool.sync({"m.py": text}, [])
            answers.append(await pool.lint(["m.py"]))
        return answers

    broken, fixed, broken_again = aio.run(scenario())
    assert fixed == [], f"{server}: lints for the fixed text: {fixed}"
    assert broken and broken == broken_again
    assert all(lint.path == "m.py" and lint.line >= 1 and lint.column >= 1 for lint in broken)
    if EXPECTED[server] is not None:
        assert EXPECTED[server] <= codes(broken), codes(broken)
    else:
        assert any("undefined_name" in lint.message for lint in broken), broken
    undefined = [lint for lint in broken if "undefined_name" in lint.message]
    assert (undefined[0].line, undefined[0].column) == (5, 12)


@needs("ruff")
def test_ruff_hears_about_its_configuration_not_other_files(aio: Loop, make_pool: Any,
                                                            tmp_path: Path) -> None:  # fmt: skip
    write(tmp_path, {"m.py": "import os\n", "other.py": "x = 1\n"})
    pool = make_pool(tmp_path, ["ruff"])

    async def scenario() -> tuple[set[str], set[str], list[str]]:
        await pool.sync({"m.py": "import os\n"}, [])
        before = codes(await pool.lint(["m.py"]))
        client = pool.client("ruff")
        sent = []
        real = client.files_changed

        async def spy(events: Any) -> None:
            sent.extend(events)
            await real(events)

        client.files_changed = spy
        (tmp_path / "other.py").write_text("x = 2\n")
        (tmp_path / "ruff.toml").write_text('[lint]\nignore = ["F401"]\n')
        await pool.sync({"m.py": "import os\n"}, ["other.py", "ruff.toml"])
        after = codes(await pool.lint(["m.py"]))
        return before, after, [path for path, _ in sent]

    before, after, sent = aio.run(scenario())
    assert "F401" in before and "F401" not in after  # the new configuration took effect
    assert sent == ["ruff.toml"]  # a .py file on disk would only cost ruff a re-check


@needs("ruff")
def test_quick_fixes_come_from_code_actions(aio: Loop, make_pool: Any, tmp_path: Path) -> None:
    pool = make_pool(tmp_path, ["ruff"])
    aio.run(pool.sync({"m.py": BROKEN}, []))
    [unused] = [lint for lint in aio.run(pool.lint()) if lint.code == "F401"]
    titles = [fix.title for fix in unused.fixes]
    assert any("Remove unused import" in title for title in titles), titles
    removal = next(f for f in unused.fixes if "Remove unused import" in f.title)
    assert removal.edits[0].path == "m.py" and removal.edits[0].line == 1


MANY = "import os\nimport sys\n\n\ndef f() -> int:\n    return undefined_name + missing\n"


@pytest.mark.parametrize("server", ["ruff", "pyright"])
def test_quick_fixes_per_file_or_from_data_equal_those_asked_per_diagnostic(aio: Loop, make_pool: Any,
                                                                      tmp_path: Path, server: str) -> None:  # fmt: skip
    if not INSTALLED[server]:
        pytest.skip(f"{server} not installed (bash .ci/setup)")
    pool = make_pool(tmp_path, [server])

    async def both() -> tuple[dict, dict]:
        await pool.sync({"m.py": MANY}, [])
        lints = await pool.lint(["m.py"])
        batched = {(x.line, x.column, x.code): sorted(x.fixes, key=repr) for x in lints}
        client = pool.client(server)
        one_by_one = {}  # asked of the server itself, one diagnostic at a time
        for d in await client.diagnostics("m.py"):
            key = (d.range.start.line + 1, d.range.start.character + 1, str(d.code))
            actions = await client.code_actions("m.py", [d])
            one_by_one[key] = sorted((pool._fix(client, a) for a in actions), key=repr)
        return batched, one_by_one

    batched, one_by_one = aio.run(both())
    assert len(batched) >= 2
    assert batched == one_by_one
    if server == "ruff":
        assert any(batched.values())  # ruff offers fixes here; the comparison is not vacuous


@dataclass(frozen=True)
class OnlyCodes(PullDiagnostics):
    """A quirk defined outside shadowkernel: pull, then keep only some codes."""

    codes: frozenset[str] = frozenset()

    async def final(self, client: Any, path: Any) -> list[Any]:
        return [d for d in await super().final(client, path) if str(d.code) in self.codes]


@needs("ruff")
def test_a_server_with_its_own_diagnostics_mode_is_one_spec(aio: Loop, make_pool: Any,
                                                            tmp_path: Path) -> None:  # fmt: skip
    only = OnlyCodes(codes=frozenset({"F821"}))
    spec = attrs.evolve(builtin_specs()["ruff"], name="ruff-F821", diagnostics=only)
    pool = make_pool(tmp_path, ["ruff", spec])
    aio.run(pool.sync({"m.py": BROKEN}, []))
    assert codes(aio.run(pool.lint(servers=["ruff"], fixes=False))) == {"F401", "F821"}
    assert codes(aio.run(pool.lint(servers=["ruff-F821"], fixes=False))) == {"F821"}
    assert pool.statistics()["ruff-F821"].state == "running"


# -- the cross-file case: interleaved branches equal fresh servers -----------------------------

LIB = "def greet(name: str) -> str:\n    return 'hi ' + name\n"
LIB_RENAMED = "def welcome(name: str) -> str:\n    return 'hi ' + name\n"
USE = "from lib import greet\n\nprint(greet('x'))\n"


def state_files(state: str) -> dict[str, str]:
    return {"lib.py": LIB_RENAMED if state == "A" else LIB, "use.py": USE}


def staged(state: str) -> dict[str, str]:
    return {"lib.py": LIB_RENAMED} if state == "A" else {}


@pytest.mark.slow
@needs("pyright", "ty")
def test_interleaved_branches_match_fresh_servers(aio: Loop, make_pool: Any,
                                                  tmp_path: Path) -> None:  # fmt: skip
    root = tmp_path / "shadow"
    write(root, state_files("B"))
    pool = make_pool(root, ["pyright", "ty"])

    async def serve(state: str) -> list[Lint]:
        write(root, state_files(state))  # the FUSE switch
        await pool.sync(staged(state), ["lib.py"])
        return await pool.lint(["use.py"], fixes=False)

    answers = {state: [] for state in "AB"}  # type: ignore[var-annotated]
    for state in "ABAABBAB":
        answers[state].append(aio.run(serve(state)))
    for state, seen in answers.items():
        assert all(answer == seen[0] for answer in seen), f"state {state} drifted: {seen}"
    a, b = answers["A"][0], answers["B"][0]
    assert b == [], f"state B (greet exists) got lints: {b}"
    assert {lint.source.lower() for lint in a} == {"pyright", "ty"}, a
    assert all(lint.line == 1 and "greet" in lint.message for lint in a), a

    for state in "AB":  # a fresh pool, started on that state, agrees
        fresh_root = tmp_path / f"fresh{state}"
        write(fresh_root, state_files(state))
        fresh = make_pool(fresh_root, ["pyright", "ty"])
        aio.run(fresh.sync(staged(state), []))
        assert aio.run(fresh.lint(["use.py"], fixes=False)) == answers[state][0]


@needs("ruff", "pyright")
def test_a_server_not_asked_catches_up_when_asked(aio: Loop, make_pool: Any,
                                                  tmp_path: Path) -> None:  # fmt: skip
    """A switch syncs no server: the request that asks one brings it to the state of that
    moment. Ruff lints at every switch; pyright, asked at some, misses the others (the disk
    changed under it: lib.py's greet renamed, back, renamed) and still answers exactly."""
    root = tmp_path / "shadow"
    write(root, state_files("B"))
    pool = make_pool(root, ["ruff", "pyright"])
    aio.run(pool.start())

    async def switch(state: str, n: int) -> None:
        write(root, state_files(state))  # the FUSE switch
        await pool.sync({**staged(state), "use.py": USE + f"x = undefined_{n}\n"}, ["lib.py"])

    def messages(lints: list[Lint]) -> str:
        return " ".join(lint.message for lint in lints)

    asked = {2: "A", 4: "B", 5: "A"}  # when pyright is asked, and the state then
    for n, state in enumerate("ABABBA"):
        aio.run(switch(state, n))
        ruff = aio.run(pool.lint(["use.py"], ["ruff"], fixes=False))
        assert f"undefined_{n}" in messages(ruff), ruff
        pyright = pool.client("pyright")
        assert pyright is not None
        if n not in asked:  # untouched by the switch: the text it was last asked about
            seen = pyright.documents["use.py"].text if "use.py" in pyright.documents else ""
            assert f"undefined_{n}" not in seen
            continue
        lints = aio.run(pool.lint(["use.py"], ["pyright"], fixes=False))
        assert f"undefined_{n}" in messages(lints), lints
        assert f"undefined_{n - 1}" not in messages(lints), lints
        renamed = [lint for lint in lints if lint.line == 1 and "greet" in lint.message]
        assert bool(renamed) == (state == "A"), (n, state, lints)


# -- delta lints against a real server ---------------------------------------------------------


@needs("ruff")
def test_delta_lints_mark_only_what_the_edit_introduced(aio: Loop, make_pool: Any,
                                                       tmp_path: Path) -> None:  # fmt: skip
    base_text = "import os\n\nx = missing\n"
    new_text = "import sys\nimport os\n\nx = missing\ny = also_missing\n"
    write(tmp_path, {"m.py": base_text})
    pool = make_pool(tmp_path, ["ruff"])

    async def both() -> tuple[list[Lint], list[Lint]]:
        await pool.sync({}, [])
        base = await pool.lint(["m.py"], fixes=False)
        await pool.sync({"m.py": new_text}, [])
        return base, await pool.lint(["m.py"], fixes=False)

    base, new = aio.run(both())
    flags = mark_new(new, base, {"m.py": base_text}, {"m.py": new_text})  # type: ignore[dict-item]
    fresh = {(lint.line, lint.message.split("\n")[0]) for lint, f in zip(new, flags, strict=True)
             if f}  # fmt: skip
    assert {line for line, _ in fresh} == {1, 5}, fresh  # `import sys` and `also_missing`
    assert not any(f for lint, f in zip(new, flags, strict=True) if lint.line in (2, 4))


# -- crashes, missing servers, idle shutdown ----------------------------------------------------


@pytest.mark.slow
@needs("pyright")
def test_server_killed_mid_request_is_restarted(aio: Loop, make_pool: Any, tmp_path: Path) -> None:
    write(tmp_path, {"m.py": FIXED})
    pool = make_pool(tmp_path, ["pyright"])

    async def kill_during_lint() -> list[Lint] | ServerError:
        await pool.sync({"m.py": BROKEN}, [])
        task = asyncio.ensure_future(pool.lint(["m.py"], fixes=False))
        await wait_until(lambda: (c := pool.client("pyright")) is not None
                         and "textDocument/diagnostic" in c.endpoint.in_flight,
                         30, "a pull request in flight", longest=0.002)  # fmt: skip
        os.killpg(pool.client("pyright").process.pid, signal.SIGKILL)  # type: ignore[union-attr]
        try:
            return await task
        except ServerError as error:
            return error

    outcome = aio.run(kill_during_lint())
    if isinstance(outcome, ServerError):  # allowed: a clear error naming the crash
        assert "pyright" in str(outcome) and "exit" in str(outcome)
    else:  # retried once on a fresh server: the answer is the right one
        assert codes(outcome) == {"reportUndefinedVariable"}
    stats = pool.statistics()["pyright"]
    assert stats.restarts == 1 and stats.state == "running"
    assert codes(aio.run(pool.lint(["m.py"], fixes=False))) == {"reportUndefinedVariable"}


@needs("ruff", "pyright")
def test_a_node_servers_helper_threads_run_below_the_thread_that_answers(
    aio: Loop, make_pool: Any, tmp_path: Path
) -> None:
    write(tmp_path, {"m.py": FIXED})
    pool = make_pool(tmp_path, ["ruff", "pyright"])
    aio.run(pool.sync({"m.py": BROKEN}, []))
    assert codes(aio.run(pool.lint(["m.py"], fixes=False)), "pyright") == {
        "reportUndefinedVariable"
    }
    own = os.getpriority(os.PRIO_PROCESS, 0)
    node = pool.statistics()["pyright"].pid  # the script's shebang runs node in this process
    assert os.path.basename(os.readlink(f"/proc/{node}/exe")) == "node"
    threads = thread_nices(node)
    assert threads.pop(node) == own  # the thread that answers keeps the client's priority
    assert len(threads) >= 4  # V8's platform workers at least
    assert set(threads.values()) == {min(19, own + 10)}
    ruff = thread_nices(pool.statistics()["ruff"].pid)  # ruff's threads do its real work
    assert len(ruff) > 1 and set(ruff.values()) == {own}


HELPERS_AS_NOBODY = """
import asyncio, os, sys
from shadowkernel.lsp import LspPool
async def main():
    async with LspPool(sys.argv[1], ["pyright"]) as pool:
        await pool.sync({"m.py": "x = undefined_name\\n"}, [])
        codes = sorted({lint.code for lint in await pool.lint(["m.py"], fixes=False)})
        node = pool.statistics()["pyright"].pid
        nices = {int(t): os.getpriority(os.PRIO_PROCESS, int(t))
                 for t in os.listdir(f"/proc/{node}/task")}
        own = os.getpriority(os.PRIO_PROCESS, 0)
        print(codes, nices.pop(node) - own, sorted({n - own for n in nices.values()}),
              len(nices) >= 4)
asyncio.run(main())
"""


@needs("pyright")
@as_other_users
def test_a_normal_users_node_server_runs_its_helper_threads_below_its_main_one(
    tmp_path: Path,
) -> None:
    """As the user `nobody` (no privilege to raise a priority back): pyright's helper threads
    go 10 nice levels down from the client's, its main thread stays at the client's."""
    project = Path(tempfile.mkdtemp(prefix="sk-nobody-"))
    try:
        project.chmod(0o755)
        found = run_as(as_nobody(tmp_path), "-c", HELPERS_AS_NOBODY, str(project))
        own = os.getpriority(os.PRIO_PROCESS, 0)  # the child's too
        assert found == f"['reportUndefinedVariable'] 0 [{min(19, own + 10) - own}] True"
    finally:
        shutil.rmtree(project, ignore_errors=True)


@pytest.mark.parametrize("server", ["pyright", "basedpyright"])
def test_pyright_asks_for_its_settings_and_loads_its_configuration_once(
    aio: Loop, make_pool: Any, tmp_path: Path, server: str
) -> None:
    # Sent its settings as well (didChangeConfiguration), pyright loaded them and its
    # configuration file a second time, and checked everything again.
    if not INSTALLED.get(server):
        pytest.skip(f"not installed: {server} (bash .ci/setup)")
    write(tmp_path, {"m.py": FIXED, "pyrightconfig.json": '{"reportUndefinedVariable": "warning"}'})
    pool = make_pool(tmp_path, [server])
    aio.run(pool.sync({"m.py": BROKEN}, []))
    lints = aio.run(pool.lint(["m.py"], fixes=False))
    assert [lint.severity for lint in lints if lint.code == "reportUndefinedVariable"] == [
        "warning"
    ]
    log = pool.client(server).stderr  # type: ignore[union-attr]
    assert sum("Loading configuration file" in line for line in log) == 1


@needs("pyright")
def test_pyright_gets_its_settings_by_asking_for_them(
    aio: Loop, make_pool: Any, tmp_path: Path
) -> None:
    """Not sent them, pyright still has its settings: the client answers its requests."""
    strict = attrs.evolve(builtin_specs()["pyright"],
                          settings={"python": {"analysis": {"typeCheckingMode": "strict"}}})  # fmt: skip
    assert strict.pulls_settings
    write(tmp_path, {"m.py": FIXED})
    pool = make_pool(tmp_path, [strict])
    aio.run(pool.sync({"m.py": "def f(x):\n    return x\n"}, []))
    assert "reportMissingParameterType" in codes(aio.run(pool.lint(["m.py"], fixes=False)))


def thread_nices(pid: int) -> dict[int, int]:
    return {int(tid): os.getpriority(os.PRIO_PROCESS, int(tid))
            for tid in os.listdir(f"/proc/{pid}/task")}  # fmt: skip


@needs("ruff")
def test_server_killed_between_requests_restarts_on_next_use(aio: Loop, make_pool: Any,
                                                             tmp_path: Path) -> None:  # fmt: skip
    pool = make_pool(tmp_path, ["ruff"])
    aio.run(pool.sync({"m.py": BROKEN}, []))
    first = aio.run(pool.lint())
    pid = pool.statistics()["ruff"].pid
    os.kill(pid, signal.SIGKILL)
    aio.run(wait_until(lambda: pool.statistics()["ruff"].state == "crashed", 30, "crash seen"))
    assert aio.run(pool.lint()) == first
    stats = pool.statistics()["ruff"]
    assert stats.restarts == 1 and stats.pid != pid and stats.rss > 0


def test_missing_server_names_how_to_install(aio: Loop, make_pool: Any, tmp_path: Path) -> None:
    spec = ServerSpec("imaginary-ls", ("imaginary-language-server", "--stdio"), ("python",),
                      install="pip install imaginary-ls")  # fmt: skip
    pool = make_pool(tmp_path, [spec])
    aio.run(pool.sync({"m.py": "x = 1\n"}, []))
    with pytest.raises(ServerError, match=r"imaginary-ls.*not installed.*pip install imaginary-ls"):
        aio.run(pool.lint())
    if not INSTALLED["gopls"]:
        go = make_pool(tmp_path, ["gopls"])
        aio.run(go.sync({"main.go": "package main\n"}, []))
        with pytest.raises(ServerError, match="go install golang.org/x/tools/gopls"):
            aio.run(go.lint())


@needs("ruff")
def test_idle_server_is_shut_down_and_started_again(aio: Loop, make_pool: Any,
                                                    tmp_path: Path) -> None:  # fmt: skip
    pool = make_pool(tmp_path, ["ruff"], idle_timeout=0.2)
    aio.run(pool.sync({"m.py": BROKEN}, []))
    first = aio.run(pool.lint())
    aio.run(wait_until(lambda: pool.statistics()["ruff"].state == "stopped", 30, "idle stop"))
    assert aio.run(pool.lint()) == first
    stats = pool.statistics()["ruff"]
    assert (stats.starts, stats.restarts, stats.state) == (2, 0, "running")


# -- files nobody handles, the user's disk untouched -------------------------------------------


@needs("ruff")
def test_file_no_server_handles(aio: Loop, make_pool: Any, tmp_path: Path) -> None:
    pool = make_pool(tmp_path, ["ruff"])
    aio.run(pool.sync({"notes.txt": "anything\n", "m.py": BROKEN}, ["notes.txt"]))
    assert {lint.path for lint in aio.run(pool.lint())} == {"m.py"}
    assert aio.run(pool.lint(["notes.txt"])) == []
    with pytest.raises(NotFound, match="no server in this pool handles it"):
        aio.run(pool.definition("notes.txt", 1, 1))
    assert pool.statistics()["ruff"].open_documents == 1


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in root.rglob("*") if p.is_file()}  # fmt: skip


@needs("ruff", "pyright")
def test_synced_content_is_never_written_to_disk(aio: Loop, make_pool: Any,
                                                 tmp_path: Path) -> None:  # fmt: skip
    write(tmp_path, {"m.py": FIXED, "lib.py": LIB})
    before = snapshot(tmp_path)
    pool = make_pool(tmp_path, ["ruff", "pyright"])

    async def work() -> list[Lint]:
        await pool.sync({"m.py": BROKEN, "new.py": "import lib\nlib.nope\n"}, [])
        lints = await pool.lint()
        await pool.definition("new.py", 1, 8)
        await pool.close()
        return lints

    lints = aio.run(work())
    assert {"m.py", "new.py"} <= {lint.path for lint in lints}
    assert snapshot(tmp_path) == before


def test_bad_paths_are_rejected(aio: Loop, make_pool: Any, tmp_path: Path) -> None:
    pool = make_pool(tmp_path, ["ruff"])
    with pytest.raises(ValueError, match="leaves the workspace"):
        aio.run(pool.sync({"../outside.py": "x"}, []))
    with pytest.raises(NotFound, match="neither staged nor a file"):
        aio.run(pool.lint(["absent.py"]))


# -- navigation ------------------------------------------------------------------------------------


@needs("pyright")
def test_navigation_is_one_based_and_workspace_relative(aio: Loop, make_pool: Any,
                                                        tmp_path: Path) -> None:  # fmt: skip
    write(tmp_path, {"lib.py": LIB, "use.py": USE})
    pool = make_pool(tmp_path, ["ruff", "pyright"])
    staged_use = "# 😀 moved\n" + USE  # staged only: line numbers shift by one
    aio.run(pool.sync({"use.py": staged_use}, []))
    [target] = aio.run(pool.definition("use.py", 4, 7))
    assert (target.path, target.line, target.column, target.end_column) == ("lib.py", 1, 5, 10)
    refs = aio.run(pool.references("lib.py", 1, 5))
    assert {(r.path, r.line) for r in refs} >= {("lib.py", 1), ("use.py", 2), ("use.py", 4)}
    hover = aio.run(pool.hover("use.py", 4, 7))
    assert hover is not None and "def greet(name: str) -> str" in hover.text
    assert (hover.line, hover.column) == (4, 7)
    symbols = aio.run(pool.symbols("lib.py"))
    assert [(s.name, s.kind, s.line) for s in symbols][:2] == [
        ("greet", "function", 1),
        ("name", "variable", 1),
    ]


@needs("jedi-language-server")
def test_jedi_language_server_definition(aio: Loop, make_pool: Any, tmp_path: Path) -> None:
    write(tmp_path, {"lib.py": LIB, "use.py": USE})
    pool = make_pool(tmp_path, ["jedi-language-server"])
    aio.run(pool.sync({}, []))
    [target] = aio.run(pool.definition("use.py", 3, 7))
    assert (target.path, target.line) == ("lib.py", 1)


@needs("ruff", "jedi-language-server")
def test_ruff_lints_and_jedi_navigates(tmp_path: Path) -> None:
    """jedi-language-server beside ruff (the README's first example, the tour, the MCP
    server's default) answers navigation and is never waited for in a lint: its lints, syntax
    errors published a fixed second after each change, are off (ruff reports them too)."""
    write(tmp_path, {"lib.py": LIB, "use.py": USE})
    with sk.Workspace(tmp_path, servers=["ruff", "jedi-language-server"], state=None) as ws:
        branch = ws.branch("a")
        branch.write("use.py", USE + "print(greet('y'\n")  # a syntax error
        table = branch.lint()
        assert not table.empty and set(table["source"]) == {"Ruff"}, table.to_dict("records")
        with pytest.raises(sk.ArgumentError, match="jedi-language-server: kept for navigation"):
            branch.lint(servers=["jedi-language-server"])
        branch.write("use.py", USE)
        [target] = branch.definition("use.py", 3, 7)
        assert (target.path, target.line) == ("lib.py", 1)


@needs("jedi-language-server")
def test_a_lint_where_no_server_lints_says_so(tmp_path: Path) -> None:
    """An empty table would read as clean code."""
    write(tmp_path, {"lib.py": LIB})
    with sk.Workspace(tmp_path, servers=["jedi-language-server"], state=None) as ws:
        branch = ws.branch("a")
        branch.write("lib.py", LIB + "print(greet('y'\n")
        with pytest.raises(sk.ArgumentError, match="no language server of this workspace lints"):
            branch.lint()
        assert [s.name for s in branch.symbols("lib.py")][:1] == ["greet"]


# -- TypeScript ----------------------------------------------------------------------------------

TS_BROKEN = "const n: number = 'text';\nexport const m = n + missing;\n"
TS_FIXED = "const n: number = 1;\nexport const m = n + 1;\n"


@pytest.mark.slow
@pytest.mark.parametrize("server", ["typescript-language-server", "tsgo"])
def test_typescript_servers_follow_versions(aio: Loop, make_pool: Any, tmp_path: Path,
                                            server: str) -> None:  # fmt: skip
    if not INSTALLED[server]:
        pytest.skip(f"{server} not installed (bash .ci/setup)")
    write(tmp_path, {"a.ts": TS_FIXED})
    pool = make_pool(tmp_path, [server])

    async def scenario() -> list[list[Lint]]:
        answers = []
        for text in (TS_BROKEN, TS_FIXED, TS_BROKEN):
            await pool.sync({"a.ts": text}, [])
            answers.append(await pool.lint(fixes=False))
        return answers

    broken, fixed, again = aio.run(scenario())
    assert fixed == [] and broken == again
    assert {(lint.line, str(lint.code)) for lint in broken} == {(1, "2322"), (2, "2304")}
