"""The shadowkernel kernel as a teacher drives it in front of a class, through jupyter_client:
cells run again, `%magic?` help on every magic, a `%shadow open` stopped half-way.

Errors must be one-line UsageErrors (no traceback). Nothing waits by sleeping: the
interrupted open is held on a FIFO the project's `shadowkernel.toml` is, which the open reads.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from kernel_helpers import Kernel, Outcome, copy_sample, kernel
from overlay_helpers import needs_fuse

pytestmark = [needs_fuse, pytest.mark.timeout(180)]

HELP = {  # what a teacher types, and the usage line its page must show
    "%shadow?": "%shadow [--servers",
    "%branch?": "%branch [--scratch] [--reset]",
    "%%stage?": "%%stage [--patch] [--replace] branch [path]",
    "%stage?": "%%stage [--patch] [--replace] branch [path]",
    "%lint?": "%lint [--new-only]",
    "%goto?": "%goto branch position",
    "%refs?": "%refs branch position",
    "%hover?": "%hover branch position",
    "%%shadow_run?": "%%shadow_run [--timeout S]",
    "%shadow_run?": "%%shadow_run [--timeout S]",
    "%timeline?": "%timeline [--no-follow]",
}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_sample(tmp_path_factory.mktemp("teaching") / "project")


@pytest.fixture(scope="module")
def k(project: Path) -> Iterator[Kernel]:
    with kernel() as running:
        running.ok(f"%shadow open {project} --servers ruff --in-memory")
        yield running


def help_page(k: Kernel, code: str) -> str:
    outcome = k.ok(code)
    payload = outcome.reply["content"]["payload"]
    assert payload, f"{code}: no help page ({outcome.stdout.strip()!r})"
    return payload[0]["data"]["text/plain"]


@pytest.mark.parametrize("code", list(HELP))
def test_every_magic_has_help(k: Kernel, code: str) -> None:
    assert HELP[code] in help_page(k, code)


def test_branch_help_says_what_reset_does(k: Kernel) -> None:
    page = help_page(k, "%branch?")
    assert "--reset" in page and "drop it" in page and "unless --reset" in page


@pytest.mark.parametrize(("line", "name"), [("%stage a main.py", "stage"),
                                            ("%shadow_run a", "shadow_run")])  # fmt: skip
def test_a_cell_magic_on_one_line_says_how_to_use_it(k: Kernel, line: str, name: str) -> None:
    message = k.usage_error(line)
    assert f"%%{name} is a cell magic" in message and f"%%{name}?" in message


def test_branch_new_again_keeps_the_work_unless_reset(k: Kernel) -> None:
    assert "branch 'again' forked from" in k.ok("%branch new again --reset").stdout
    k.ok("%%stage again notes.txt\nhello\n")
    message = k.usage_error("%branch new again")
    assert "exists (v1, 1 file(s) touched)" in message and "--reset" in message
    assert k.value("ws.branches['again'].read('notes.txt')") == repr("hello\n")  # kept
    again = k.ok("%branch new again --reset").stdout
    assert "forked again" in again and "dropped the old one: v1, 1 file(s) touched" in again
    assert k.value("(ws.branches['again'].version, len(ws.branches['again'].files))") == "(0, 0)"
    assert "--reset goes with %branch new" in k.usage_error("%branch diff again --reset")


def test_a_staging_cell_run_again_says_it_is_applied_already(k: Kernel) -> None:
    k.ok("%branch new twice --reset")
    blocks = "<<<<<<< SEARCH\nimport os\n=======\nimport sys\n>>>>>>> REPLACE\n"
    replace = f"%%stage twice inventory/stock.py --replace\n{blocks}"
    k.ok(replace)
    message = k.usage_error(replace)
    assert "applied already in branch 'twice' (v1)" in message
    assert "%branch new twice --reset" in message
    patch = '--- a/main.py\n+++ b/main.py\n@@ -1 +1 @@\n-"""Print a report of a small stock."""\n+"""A report."""\n'  # noqa: E501
    k.ok(f"%%stage twice --patch\n{patch}")
    assert "applied already in branch 'twice' (v2)" in k.usage_error(
        f"%%stage twice --patch\n{patch}"
    )
    # A search text that is simply wrong keeps its plain message.
    wrong = (
        "%%stage twice main.py --replace\n<<<<<<< SEARCH\nnot there\n=======\nx\n>>>>>>> REPLACE\n"
    )
    assert "does not occur" in k.usage_error(wrong)
    assert k.value("ws.branches['twice'].version") == "2"


def test_opening_again_names_the_in_memory_branches_it_forgets(tmp_path: Path) -> None:
    project = copy_sample(tmp_path / "project")
    with kernel() as k:
        k.ok(f"%shadow open {project} --servers ruff --in-memory\n%branch new kept")
        k.ok("%%stage kept notes.txt\nhello\n")
        again = k.ok(f"%shadow open {project} --servers ruff --in-memory").stdout
        assert "its in-memory branches are gone: kept (v1)" in again
        assert "gone" not in k.ok(f"%shadow open {project} --servers ruff --in-memory").stdout


def test_an_interrupted_open_leaves_the_folder_free_to_open(tmp_path: Path) -> None:
    """Stopping `%shadow open` half-way (servers are slow, the class is waiting) must not
    leave a workspace behind that holds the folder's branches: the next open works."""
    project = copy_sample(tmp_path / "project")
    config = project / "shadowkernel.toml"
    os.mkfifo(config)
    with kernel() as k:
        msg_id = k.client.execute(f"%shadow open {project} --servers ruff", stop_on_error=False)
        with open(config, "w"):  # returns once the open reads the file
            k.manager.interrupt_kernel()
            reply = k.client.get_shell_msg(timeout=60)
            while reply["parent_header"].get("msg_id") != msg_id:  # kernel_info's, at start
                reply = k.client.get_shell_msg(timeout=60)
            interrupted = Outcome(reply, k.iopub_until_idle(msg_id))
            assert interrupted.error is not None and interrupted.error[0] == "KeyboardInterrupt"
            config.unlink()  # the open holds the FIFO; the next one finds no configuration
        # The writer closed: the interrupted open goes on with an empty configuration.
        opened = k.ok(f"%shadow open {project} --servers ruff")
        assert "open with ruff" in opened.stdout
        k.ok("%branch new after")
        assert k.value("sorted(ws.branches)") == "['after']"
        assert k.value("len(__import__('shadowkernel').workspace.open_workspaces())") == "1"
