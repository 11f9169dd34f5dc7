"""notebooks/03_lint_feedback_experiment.ipynb runs top to bottom (quick subset), its tool-calling
section against the scripted local server it starts (labelled as such), then replayed."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from nbclient import NotebookClient
from overlay_helpers import HAS_FUSE

NOTEBOOK = Path(__file__).parent.parent / "notebooks" / "03_lint_feedback_experiment.ipynb"

pytestmark = pytest.mark.skipif(not HAS_FUSE, reason="needs /dev/fuse and fusermount3")


def kernel_name() -> str:
    """The shadowkernel kernel when it is installed, else python3."""
    return "shadowkernel" if "shadowkernel" in KernelSpecManager().find_kernel_specs() \
        else "python3"  # fmt: skip


@pytest.mark.slow
def test_notebook_runs_and_labels_the_agent_simulated(tmp_path, monkeypatch):
    monkeypatch.setenv("SK_NOTEBOOK_QUICK", "1")
    monkeypatch.setenv("SK_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("SK_MODEL_BASE_URL", raising=False)
    monkeypatch.delenv("SK_TOOL_BASE_URL", raising=False)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                 "all_proxy"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name=kernel_name(),
                   resources={"metadata": {"path": str(tmp_path)}}).execute()  # fmt: skip
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "\n".join(str(o.get("data", {}).get("text/plain", o.get("text", ""))) for o in outputs)
    assert "SIMULATED" in text and "6 tasks" in text and "reproducible" in text
    assert any("image/png" in o.get("data", {}) for o in outputs)
    timeline = [o["data"] for o in outputs if "application/vnd.shadowkernel.timeline+json"
                in o.get("data", {})]  # fmt: skip
    assert timeline and timeline[0]["application/vnd.shadowkernel.timeline+json"]["simulated"]
    assert "skipped the real-model run" in text
    # the tool-calling section: a scripted server, labelled so, then replayed without it
    assert "SCRIPTED local server (not a model)" in text
    assert "replayed 8 cells" in text and "the same rows" in text and "cost_per_solved" in text
