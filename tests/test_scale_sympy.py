"""A big real project (sympy 1.13.3, ~1,500 Python files, from its sdist on PyPI): answers
that take a type checker longer than its request timeout.

A first check of one of sympy's modules costs basedpyright 5-20 s of CPU (it analyses most
of sympy behind it), more on a loaded machine: a fixed per-request timeout would fail the
first lint of a big project. A server that keeps working is waited for; a server that sits
idle (here: stopped) still times out after its request timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from overlay_helpers import needs_fuse

import shadowkernel as sk
from shadowkernel.errors import ServerError, ShadowError
from shadowkernel.lsp import available_servers
from shadowkernel.lsp.specs import builtin_specs

pytestmark = [
    needs_fuse,
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.skipif(not available_servers()["basedpyright"], reason="needs basedpyright"),
]

DEEP = "sympy/polys/domains/finitefield.py"  # imports much of sympy: seconds to check
QUICK = 2.0  # seconds: far below what a first check of DEEP takes


@pytest.fixture(scope="module")
def sympy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from shadowkernel.evals import pypi

    try:
        return pypi.unpack("sympy", "1.13.3", tmp_path_factory.mktemp("sympy"))
    except ShadowError as error:
        pytest.skip(f"sympy 1.13.3 unavailable: {error}")


@pytest.fixture(scope="module")
def ws(sympy: Path) -> Iterator[sk.Workspace]:
    spec = attrs.evolve(builtin_specs()["basedpyright"], request_timeout=QUICK)
    with sk.Workspace(sympy, servers=[spec], lanes=1, state=None) as workspace:
        yield workspace


def test_a_working_server_is_waited_for_past_its_request_timeout(ws: sk.Workspace) -> None:
    branch = ws.branch("deep")
    branch.replace(DEEP, "class FiniteField(", "def _added(x: int) -> str:\n    return x\n\n\n"
                   "class FiniteField(")  # fmt: skip
    table = branch.lint([DEEP])
    mine = table[table["new"] & (table["severity"] == "error")]
    assert "reportReturnType" in set(mine["code"]), table[["line", "code", "message"]]
    assert len(table) > 50  # the whole module was checked, not an empty answer


def test_an_idle_server_still_times_out(ws: sk.Workspace) -> None:
    branch = ws.branch("stopped")
    branch.replace(DEEP, "class FiniteField(", "X = 1\n\n\nclass FiniteField(")
    pids = server_pids(ws)
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        with pytest.raises(ServerError, match="idle"):
            branch.lint([DEEP])
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)


def server_pids(ws: sk.Workspace) -> list[int]:
    """The basedpyright process of the one lane, and its children (node)."""
    from shadowkernel.lsp.client import _process_tree

    (lane,) = ws._scheduler.lanes
    (client,) = lane.pool._servers.running()
    return _process_tree(client.process.pid)


def test_a_shutdown_does_not_wait_for_a_working_server(ws: sk.Workspace, sympy: Path) -> None:
    """Patience is for answers, not for a shutdown: a server busy checking is killed once its
    shutdown timeout passes, so closing a workspace never waits out a long check. A patient
    shutdown would wait for the check (a cold module: tens of seconds) and see the server
    exit by itself, with status 0. (Last in the file: it stops the lane's server.)"""
    (lane,) = ws._scheduler.lanes
    ws.bridge.call(lane.pool.start())  # the server runs (already, after the tests above)
    client = lane.pool.client("basedpyright")
    assert client is not None
    cold = "sympy/physics/continuum_mechanics/beam.py"  # not checked by the tests above

    async def shut_down_while_checking() -> None:
        await client.put(cold, (sympy / cold).read_text())
        params = {"textDocument": {"uri": client.uri(cold)}}
        checking = asyncio.ensure_future(client.request("textDocument/diagnostic", params))
        while "textDocument/diagnostic" not in client.endpoint.in_flight:
            await asyncio.sleep(0.01)
        await client.shutdown(timeout=3)
        with contextlib.suppress(ShadowError):  # the server is gone: the check with it
            await checking

    ws.bridge.call(shut_down_while_checking())
    assert client.process.returncode == -signal.SIGKILL  # killed, not waited for


def test_a_server_that_keeps_working_is_waited_for_a_bounded_time(sympy: Path) -> None:
    """Patience ends: after 20 windows of work without an answer, the lint is a ServerError
    that says so. A fresh server's first checks of six big modules (a minute of CPU here)
    take far longer than 20 windows of 1 s. (Shorter windows made the server's start, its
    registration of pull diagnostics, a wait a loaded machine could outlast.)"""
    spec = attrs.evolve(builtin_specs()["basedpyright"], request_timeout=1.0)
    working = r"kept working for 20 s \(20 times its request_timeout of 1 s\)"
    with (
        sk.Workspace(sympy, servers=[spec], lanes=1, state=None) as workspace,
        pytest.raises(ServerError, match=working),
    ):
        workspace.branch("long").lint(BIG)


BIG = [
    "sympy/functions/elementary/trigonometric.py",
    "sympy/physics/quantum/spin.py",
    "sympy/matrices/dense.py",
    "sympy/solvers/ode/single.py",
    "sympy/integrals/risch.py",
    "sympy/printing/latex.py",
]
