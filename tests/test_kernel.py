"""The shadowkernel kernel through jupyter_client: every magic's happy path and bad inputs.

One real kernel (the installed `shadowkernel` kernelspec) serves the module, over a copy of
notebooks/sample_project, with ruff and jedi-language-server. Tests use their own branch
names. Errors must be one-line UsageErrors (no traceback). Nothing waits by sleeping.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from kernel_helpers import Kernel, copy_sample, kernel
from overlay_helpers import OFFLINE_NEEDS_NAMESPACES, needs_fuse

pytestmark = [needs_fuse, pytest.mark.timeout(180)]

TIMELINE = "application/vnd.shadowkernel.timeline+json"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_sample(tmp_path_factory.mktemp("kernel") / "project")


@pytest.fixture(scope="module")
def k(project: Path) -> Iterator[Kernel]:
    with kernel() as running:
        out = running.ok(f"%shadow open {project} --servers ruff jedi-language-server")
        assert "open with ruff, jedi-language-server" in out.stdout
        yield running


def test_kernel_identifies_itself(k: Kernel) -> None:
    k.client.kernel_info()
    reply = k.client.get_shell_msg(timeout=30)
    assert reply["content"]["implementation"] == "shadowkernel"
    assert "%shadow open" in reply["content"]["banner"]


def test_workspace_is_in_the_namespace(k: Kernel, project: Path) -> None:
    assert k.value("type(ws).__name__") == "'Workspace'"
    assert k.value("ws.root") == repr(str(project))


def test_shadow_status_and_bad_opens(k: Kernel, project: Path) -> None:
    status = k.ok("%shadow status").stdout
    assert str(project) in status and "ruff" in status and "served" in status
    assert "not a directory" in k.usage_error("%shadow open /no/such/folder")
    assert "needs PATH" in k.usage_error("%shadow open")
    message = k.usage_error(f"%shadow open {project} --servers no-such-server")
    assert "no-such-server" in message
    assert "invalid choice" in k.usage_error("%shadow reopen")
    # The failed opens left the open shadow alone.
    assert k.value("ws.closed") == "False"


def test_branch_lifecycle(k: Kernel, project: Path) -> None:
    k.ok("%branch new life")
    assert "exists" in k.usage_error("%branch new life")
    listing = k.ok("%branch list").data("text/plain")[0]
    assert "life" in listing
    k.ok("%%stage life notes.txt\nhello\n")
    diff = k.ok("%branch diff life")
    assert "+hello" in diff.data("text/plain")[0] and diff.data("text/html")
    assert not (project / "notes.txt").exists()
    accepted = k.ok("%branch accept life").stdout
    assert "notes.txt" in accepted and (project / "notes.txt").read_text() == "hello\n"
    k.ok("%branch drop life")
    assert "unknown branch 'life'" in k.usage_error("%branch diff life")
    assert "needs NAME" in k.usage_error("%branch new")


def test_stage_content_patch_and_replace(k: Kernel, project: Path) -> None:
    before = (project / "inventory/stock.py").read_text()
    k.ok("%branch new st")
    assert "st v1: write inventory/new.py" in k.ok("%%stage st inventory/new.py\nX = 1\n").stdout
    patch = "--- a/inventory/new.py\n+++ b/inventory/new.py\n@@ -1 +1 @@\n-X = 1\n+X = 2\n"
    assert "st v2: patch" in k.ok(f"%%stage st --patch\n{patch}").stdout
    assert k.value("ws.branches['st'].read('inventory/new.py')") == repr("X = 2\n")
    blocks = (
        "<<<<<<< SEARCH\nimport os\n=======\nimport sys\n>>>>>>> REPLACE\n"
        "<<<<<<< SEARCH\n    def level(self, sku: str) -> int:\n=======\n"
        "    def stock_level(self, sku: str) -> int:\n>>>>>>> REPLACE\n"
    )
    assert (
        "st v3: write inventory/stock.py"
        in k.ok(f"%%stage st inventory/stock.py --replace\n{blocks}").stdout
    )
    staged = k.value("ws.branches['st'].read('inventory/stock.py')")
    assert "import sys" in staged and "def stock_level(" in staged
    assert (project / "inventory/stock.py").read_text() == before  # the user's file: untouched


def test_stage_bad_input(k: Kernel) -> None:
    k.ok("%branch new bad")
    assert "unknown branch 'nope'" in k.usage_error("%%stage nope x.py\nX = 1\n")
    assert k.usage_error("%%stage bad --patch\nthis is not a diff\n")
    assert "does not occur" in k.usage_error(
        "%%stage bad main.py --replace\n<<<<<<< SEARCH\nnot in the file\n=======\nx\n>>>>>>> REPLACE\n"
    )
    assert "not closed" in k.usage_error(
        "%%stage bad main.py --replace\n<<<<<<< SEARCH\nx\n=======\n"
    )
    assert "needs PATH" in k.usage_error("%%stage bad\nX = 1\n")
    assert "not both" in k.usage_error("%%stage bad main.py --patch --replace\nx\n")
    assert "../escape.py" in k.usage_error("%%stage bad ../escape.py\nX = 1\n")
    assert k.value("ws.branches['bad'].version") == "0"  # nothing was staged


def test_malformed_patch_names_the_problem(k: Kernel) -> None:
    k.ok("%branch new mal")
    message = k.usage_error(
        "%%stage mal --patch\n--- a/main.py\n+++ b/main.py\n@@ -1 +1 @@\n-not the first line\n+x\n"
    )
    assert "main.py" in message
    assert k.value("ws.branches['mal'].version") == "0"


def test_lint_table(k: Kernel) -> None:
    k.ok("%branch new li")
    out = k.ok("%lint li inventory/stock.py inventory/report.py --server ruff")
    html = out.data("text/html")[0]
    assert "F401" in html and "F821" in html and "old" in html and "shadowkernel-lints" in html
    assert "#d1242f" in html  # the error is coloured
    k.ok(
        "%%stage li inventory/report.py --replace\n<<<<<<< SEARCH\nfrom .stock import Stock\n"
        "=======\nimport json\nfrom .stock import Stock\n>>>>>>> REPLACE\n"
    )
    new = k.ok("%lint li --new-only --server ruff")
    html = new.data("text/html")[0]
    assert "json" in html and "● new" in html and "F821" not in html
    # The table is a DataFrame in Out/_, usable in code.
    assert k.value("bool(len(_)) and bool(_['new'].all())") == "True"


def test_lint_bad_input(k: Kernel) -> None:
    assert "unknown branch 'zz'" in k.usage_error("%lint zz")
    k.ok("%branch new lb")
    assert "pyright" in k.usage_error("%lint lb main.py --server pyright")  # not in this shadow
    assert "no/such.py" in k.usage_error("%lint lb no/such.py --server ruff")
    assert "unrecognized arguments" in k.usage_error("%lint lb --bogus")


def test_lint_help_explains_itself(k: Kernel) -> None:
    reply = k.run("%lint?").reply
    page = reply["content"]["payload"][0]["data"]["text/plain"]
    assert "--new-only" in page and "--server" in page and "new" in page


def test_navigation(k: Kernel) -> None:
    k.ok("%branch new nav")
    goto = k.ok("%goto nav main.py:3:24")  # Item in `from inventory import Item, Stock`
    assert "inventory/stock.py:8:" in goto.data("text/plain")[0]
    refs = k.ok("%refs nav inventory/stock.py:14:7")  # class Stock
    assert "main.py" in refs.data("text/plain")[0]
    hover = k.ok("%hover nav main.py:3:24")
    assert "Item" in hover.data("text/markdown")[0]


def test_navigation_bad_positions(k: Kernel) -> None:
    k.ok("%branch new nb")
    assert "PATH:LINE:COLUMN" in k.usage_error("%goto nb main.py:3")
    assert "PATH:LINE:COLUMN" in k.usage_error("%hover nb main.py:x:1")
    assert "1-based" in k.usage_error("%refs nb main.py:0:1")
    assert "line" in k.usage_error("%goto nb main.py:999:1").lower()
    assert "unknown branch" in k.usage_error("%goto nowhere main.py:1:1")


@pytest.mark.fallback(OFFLINE_NEEDS_NAMESPACES, unless="namespaces")
def test_shadow_run_shell_and_python(k: Kernel, project: Path) -> None:
    k.ok("%branch new run")
    k.ok(
        "%%stage run inventory/report.py --replace\n<<<<<<< SEARCH\n"
        '    lines.append(f"total value: {total_value:.2f}")\n=======\n'
        '    lines.append(f"total value: {stock.value():.2f}")\n>>>>>>> REPLACE\n'
    )
    out = k.ok("%%shadow_run run --timeout 60\npython main.py && echo made > out.txt")
    text = out.data("text/plain")[0]
    assert "exit 0" in text and "total value: 3.50" in text and "out.txt" in text
    assert "total value: 3.50" in out.data("text/html")[0]
    assert not (project / "out.txt").exists()
    py = k.ok(
        "%%shadow_run run --python\nimport sys\nprint('py', sys.version_info[0])\nsys.exit(3)"
    )
    assert "exit 3" in py.data("text/plain")[0] and "py 3" in py.data("text/plain")[0]
    result = k.value("_.exit_code")
    assert result == "3"


@pytest.mark.fallback(OFFLINE_NEEDS_NAMESPACES, unless="namespaces")
def test_shadow_run_bad_input(k: Kernel) -> None:
    k.ok("%branch new rb")
    assert "unknown branch" in k.usage_error("%%shadow_run nobranch\ntrue")
    assert "positive" in k.usage_error("%%shadow_run rb --timeout 0\ntrue")
    assert "empty" in k.usage_error("%%shadow_run rb\n\n")
    timed = k.ok("%%shadow_run rb --timeout 1\nsleep 30")
    assert "timed out" in timed.data("text/plain")[0]


def test_code_api_from_a_thread_while_a_cell_blocks(k: Kernel) -> None:
    """An agent thread's lint is served while the cell's own thread is blocked."""
    k.ok("%branch new agent")
    out = k.ok(
        "import threading\n"
        "results = []\n"
        "t = threading.Thread(target=lambda: results.append(ws.branches['agent'].lint(['main.py'], servers=['ruff'])))\n"
        "t.start(); t.join(60)\n"
        "print('served', len(results))"
    )
    assert "served 1" in out.stdout


def test_timeline_display_and_follow(k: Kernel) -> None:
    snapshot = k.ok("%timeline --no-follow")
    bundle = snapshot.data(TIMELINE, kinds=("display_data",))[0]
    assert bundle["schema"] == 1 and bundle["events"]
    assert snapshot.data("text/html", kinds=("display_data",))
    # An agent thread that lints once per step; the cell releases a step each time it shows
    # or updates the timeline, so the agent and the follow loop alternate deterministically.
    k.ok(
        "import threading\nsteps = [threading.Event() for _ in range(3)]\n"
        "def agent(branch):\n"
        "    for step in steps:\n"
        "        step.wait(30)\n"
        "        branch.lint(['main.py'], servers=['ruff'])\n"
        "%branch new follow"
    )
    k.ok("start_agent(agent, ws.branches['follow'])")
    followed = k.run(
        "import IPython\n"
        "from shadowkernel.kernel import live\n"
        "def release():\n"
        "    next((s for s in steps if not s.is_set()), threading.Event()).set()\n"
        "shown, updated = live.display, IPython.display.DisplayHandle.update\n"
        "def show(*a, **kw):\n"
        "    handle = shown(*a, **kw); release(); return handle\n"
        "def update(self, obj, **kw):\n"
        "    updated(self, obj, **kw); release()\n"
        "live.display, IPython.display.DisplayHandle.update = show, update\n"
        "try:\n"
        "    get_ipython().run_line_magic('timeline', '--interval 0.2')\n"
        "finally:\n"
        "    live.display, IPython.display.DisplayHandle.update = shown, updated\n"
    )
    assert followed.status == "ok", followed.error
    updates = [m for m in followed.messages if m["msg_type"] == "update_display_data"]
    shown = [m for m in followed.messages if m["msg_type"] == "display_data"]
    assert len(shown) == 1 and len(updates) >= 3
    display_id = shown[0]["content"]["transient"]["display_id"]
    assert all(u["content"]["transient"]["display_id"] == display_id for u in updates)
    sizes = [len(u["content"]["data"][TIMELINE]["events"]) for u in updates]
    assert sizes == sorted(sizes) and sizes[-1] > len(bundle["events"])
    assert json.dumps(updates[-1]["content"]["data"][TIMELINE])


def test_arguments_split_as_a_shell_splits_them(k: Kernel, project: Path) -> None:
    """A quoted path with a space is one path, quotes removed, staged and accepted by that
    name (IPython's own splitting kept the quotes: a folder named `"docs` was written)."""
    k.ok('%branch new "quoted"')
    assert k.value("sorted(ws.branches)").count("'quoted'") == 1
    staged = k.ok('%%stage quoted "docs/release notes.txt"\nhello\n').stdout
    assert "quoted v1: write docs/release notes.txt" in staged
    k.ok("%%stage quoted docs/it\\'s\\ here.txt\nescaped\n")  # backslash escapes work too
    assert k.value("sorted(ws.branches['quoted'].files)") == repr(
        ["docs/it's here.txt", "docs/release notes.txt"]
    )
    accepted = k.ok("%branch accept 'quoted'").stdout
    assert "docs/release notes.txt" in accepted
    assert (project / "docs" / "release notes.txt").read_text() == "hello\n"
    assert (project / "docs" / "it's here.txt").read_text() == "escaped\n"
    assert not [p for p in project.iterdir() if '"' in p.name or "'" in p.name]
    message = k.usage_error('%%stage quoted "docs/unclosed.txt\nX = 1\n')
    assert "no closing quotation" in message and "close the quote" in message
    k.ok("%branch drop quoted")


def test_shadow_run_keep_and_diff_scratch(k: Kernel, project: Path) -> None:
    """Without --keep a run's writes go to the scratch layer (`%branch diff --scratch` lists
    them, accept leaves them out); with --keep they become the branch's next version. (With
    --net: an offline run needs the sandbox, which the fallback's child lacks.)"""
    k.ok("%branch new keep")
    k.ok("%%shadow_run keep --net\necho scratch > scratch.txt")
    assert "scratch.txt" not in k.ok("%branch diff keep").data("text/plain")[0]
    assert "scratch.txt" in k.ok("%branch diff keep --scratch").data("text/plain")[0]
    kept = k.ok("%%shadow_run keep --keep --net\necho kept > kept.txt").data("text/plain")[0]
    assert "kept as version 1" in kept
    assert k.value("ws.branches['keep'].read('kept.txt')") == repr("kept\n")
    assert "+kept" in k.ok("%branch diff keep").data("text/plain")[0]
    assert "--scratch goes with %branch diff" in k.usage_error("%branch list --scratch")
    page = k.run("%%shadow_run?").reply["content"]["payload"][0]["data"]["text/plain"]
    assert "--keep" in page and "scratch layer" in page and "stays in the branch" not in page
    k.ok("%branch drop keep")


def test_small_messages(k: Kernel) -> None:
    k.ok("%branch new dup")
    message = k.usage_error("%branch new dup")
    assert "exists" in message and "%branch drop dup" in message
    assert "takes no NAME" in k.usage_error("%branch list dup")
    required = k.usage_error("%lint")
    assert "required: branch" in required and "paths" not in required
    for magic in ("%%stage", "%%shadow_run"):
        page = k.run(f"{magic}?").reply["content"]["payload"][0]["data"]["text/plain"]
        usage = [line.strip() for line in page.splitlines() if line.strip().startswith("%")]
        assert usage[0].startswith(f"{magic} ["), usage
    k.ok("%branch drop dup")


def test_close_with_nothing_open_says_so(project: Path) -> None:
    with kernel() as other:
        assert "no shadow is open: nothing to close" in other.ok("%shadow close").stdout
