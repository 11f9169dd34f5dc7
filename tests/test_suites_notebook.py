"""notebooks/04_mutation_suite.ipynb runs top to bottom (quick subset) in a real kernel: a
mutation suite of six, validated, an experiment with the SIMULATED agent, and the cells that
point it at a real model or at SWE-bench skipping cleanly here."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from overlay_helpers import needs_fuse
from test_experiment_notebook import kernel_name

NOTEBOOK = Path(__file__).parent.parent / "notebooks" / "04_mutation_suite.ipynb"
SDIST = Path(__file__).resolve().parent.parent / ".venv/sdists/six-1.16.0.tar.gz"

pytestmark = [
    needs_fuse,
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.skipif(not SDIST.exists(), reason=f"{SDIST} is fetched by bash .ci/setup"),
]


def test_notebook_makes_a_suite_of_six_and_labels_the_agent_simulated(tmp_path, monkeypatch):
    monkeypatch.setenv("SK_NOTEBOOK_QUICK", "1")
    monkeypatch.setenv("SK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SK_SIX_SDIST", str(SDIST))
    for name in ("SK_MODEL_BASE_URL", "SK_SWEBENCH"):
        monkeypatch.delenv(name, raising=False)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name=kernel_name(),
                   resources={"metadata": {"path": str(tmp_path)}}).execute()  # fmt: skip
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "\n".join(str(o.get("data", {}).get("text/plain", o.get("text", ""))) +
                     str(o.get("data", {}).get("text/html", "")) for o in outputs)  # fmt: skip
    assert "4 tasks; tried" in text and "tests that used to pass fail" in text
    assert "origin: mutation" in text and "fails_on_task" in text
    assert "SIMULATED" in text and "pairs detect a difference" in text
    assert "reproducible: same frame" in text
    assert "skipped the real-model run" in text and "SWE-bench is not reachable here" in text
