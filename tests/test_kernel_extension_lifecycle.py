"""The extension's lifecycle and the panel's branch list, through jupyter_client and real kernels.

`%unload_ext shadowkernel` takes back everything `%load_ext` registered (every magic, the
display formatters, `start_agent`) and closes the shadow (mount and servers gone, checked in
/proc); `%load_ext` then works again. A `%shadow panel` opened before any branch existed
lints a branch made later: the test plays the front end on the widgets' comms (a pick is an
`update` of the picker's index, a click a `custom` message to the button) and reads what the
Output widget was sent: the lint table, or why there is none. Nothing sleeps.
"""

from __future__ import annotations

import ast
import html
from pathlib import Path
from typing import Any

import pytest
from kernel_helpers import Kernel, alive, copy_sample, kernel, shadow_mounts, wait_for
from overlay_helpers import needs_fuse

pytestmark = [needs_fuse, pytest.mark.timeout(240)]

# Every magic the extension registers, as (kind, name), read from its Magics classes.
MAGIC_NAMES = (
    "from shadowkernel.kernel.magics import MAGICS as __magics\n"
    "__magic_names = sorted({(kind, name) for m in __magics for kind, names in m.magics.items() "
    "for name in names})"
)
# Which of them the shell has now, and what else of the extension's it holds.
REGISTERED = (
    "{'magics': sorted((kind, name) for kind, name in __magic_names "
    "if name in get_ipython().magics_manager.magics[kind]), "
    "'formatters': sorted({t.__name__ for f in get_ipython().display_formatter.formatters.values() "
    "for t in f.type_printers if isinstance(t, type) and t.__name__ in "
    "('DataFrame', 'RunResult', 'Diff')}), "
    "'names': sorted(n for n in ('ws', 'start_agent') if n in get_ipython().user_ns)}"
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return copy_sample(tmp_path / "project")


def _registered(k: Kernel) -> dict[str, Any]:
    return ast.literal_eval(k.value(REGISTERED))


def _open_and_lint(k: Kernel, project: Path) -> dict[str, Any]:
    """Open a shadow, lint on it; its mount point and the pids of its overlay and servers."""
    k.ok(f"%shadow open {project} --servers ruff --mode fuse")  # mounted at once
    k.ok("%branch new a")
    assert "F401" in k.ok("%lint a inventory/stock.py").data("text/html")[0]
    return ast.literal_eval(
        k.value(
            "{'mount': ws.shadows[0].mountpoint, 'overlay': ws.shadows[0]._process.pid, "
            "'servers': [s.pid for s in ws.statistics()['servers'][0].values()]}"
        )
    )


@pytest.mark.parametrize("name", ["python3", "shadowkernel"])
def test_unload_ext_takes_everything_back_and_load_ext_works_again(
    project: Path, name: str
) -> None:
    with kernel(name) as k:
        if name == "python3":
            k.ok("%load_ext shadowkernel")
        k.ok(MAGIC_NAMES)
        magics = ast.literal_eval(k.value("__magic_names"))
        assert {("line", "shadow"), ("line", "branch"), ("line", "lint"), ("cell", "stage"),
                ("cell", "shadow_run"), ("line", "timeline")} <= set(magics)  # fmt: skip
        loaded = _registered(k)
        assert loaded["magics"] == magics and loaded["names"] == ["start_agent"]
        assert loaded["formatters"] == ["DataFrame", "Diff", "RunResult"]
        shadow = _open_and_lint(k, project)
        assert shadow["mount"] in shadow_mounts() and all(map(alive, shadow["servers"]))

        k.ok("%unload_ext shadowkernel")
        assert _registered(k) == {"magics": [], "formatters": [], "names": []}
        assert "%shadow` not found" in k.usage_error("%shadow status")
        assert "%%stage` not found" in k.usage_error("%%stage a x.py\nx = 1\n")
        # The shadow closed with it: unmounted, its overlay and servers ended.
        wait_for(lambda: shadow["mount"] not in shadow_mounts(), 20, "the shadow to unmount")
        for pid in [shadow["overlay"], *shadow["servers"]]:
            wait_for(lambda pid=pid: not alive(pid), 20, f"process {pid} to exit")

        k.ok("%load_ext shadowkernel")
        assert _registered(k) == loaded
        opened = k.ok(f"%shadow open {project} --servers ruff").stdout
        assert "1 branch restored" in opened  # the closed shadow let go of the folder's branches
        assert "F401" in k.ok("%lint a inventory/stock.py").data("text/html")[0]


# -- the panel ----------------------------------------------------------------------------------


def _send(k: Kernel, comm_id: str, data: dict[str, Any]) -> list[dict[str, Any]]:
    """A comm message to a widget, as a front end sends it; the iopub messages its handling
    sent, up to the kernel going idle after it."""
    message = k.client.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
    k.client.shell_channel.send(message)
    sent = []
    while True:
        reply = k.client.get_iopub_msg(timeout=120)
        if reply["parent_header"].get("msg_id") != message["header"]["msg_id"]:
            continue
        if reply["msg_type"] == "status" and reply["content"]["execution_state"] == "idle":
            return sent
        sent.append(reply)


def _click(k: Kernel, ids: dict[str, str]) -> list[dict[str, Any]]:
    """Click the panel's lint button; the outputs the Output widget was last sent."""
    sent = _send(k, ids["button"], {"method": "custom", "content": {"event": "click"}})
    errors = [m["content"] for m in sent if m["msg_type"] == "error"]
    assert not errors, errors
    states = [m["content"]["data"]["state"] for m in sent if m["msg_type"] == "comm_msg"
              and m["content"]["comm_id"] == ids["output"]]  # fmt: skip
    shown = [s["outputs"] for s in states if "outputs" in s]
    assert shown, f"the click changed no output: {sent}"
    return shown[-1]


def _lint_table(k: Kernel, ids: dict[str, str]) -> str:
    """Click the lint button; the lint table it showed, as HTML with its entities decoded."""
    outputs = _click(k, ids)
    shown = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert shown, f"the click showed no lints: {outputs}"
    return html.unescape(shown[-1])


def test_a_panel_lints_branches_made_after_it_opened(project: Path) -> None:
    with kernel() as k:
        k.ok(f"%shadow open {project} --servers ruff --in-memory")
        k.ok("panel = %shadow panel\npanel")
        ids = ast.literal_eval(
            k.value("{w: getattr(panel, w).model_id for w in ('picker', 'button', 'output')}")
        )
        assert k.value("panel.picker.options") == "()"
        said = "".join(o.get("text", "") for o in _click(k, ids))
        assert "cannot lint: no branch to lint yet: create one with %branch new NAME" in said

        k.ok("%branch new late")
        k.ok("%%stage late inventory/extra.py\nimport sys\n")
        table = _lint_table(k, ids)
        assert "branch 'late' v1" in table and "inventory/extra.py:1:8" in table
        assert k.value("panel.picker.options") == "('late',)"

        # A branch made later (sorted first) leaves the pick alone; picking it lints it.
        k.ok("%branch new early")
        assert "branch 'late' v1" in _lint_table(k, ids)
        assert k.value("panel.picker.options") == "('early', 'late')"
        _send(k, ids["picker"], {"method": "update", "state": {"index": 0}, "buffer_paths": []})
        assert "branch 'early' v0: 0 lints" in _lint_table(k, ids)
