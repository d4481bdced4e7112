"""The example notebooks: committed without outputs, each paired by jupytext with a py:percent
file holding the same cells (edit the .py, then `jupytext --sync notebooks/*.py`), and
runnable top to bottom (with SSMTS_NOTEBOOK_QUICK=1, which shrinks data, model and epochs).

Measured on 2 shared CPU cores: the quick runs take 11 to 15 s each, about a minute
together, most of it kernel start-up and imports.
"""

from __future__ import annotations

from pathlib import Path

import pytest

# slow: every notebook, top to bottom: about 45 seconds
pytestmark = pytest.mark.slow

nbformat = pytest.importorskip(
    "nbformat", reason="the notebooks extra is not installed (pip install -e '.[notebooks]')"
)

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
EXPECTED = [
    "01_vital_signs.ipynb",
    "02_audio_sample_rates.ipynb",
    "03_forecasting_sktime.ipynb",
    "04_sklearn_gridsearch.ipynb",
    "05_state_tracking.ipynb",
    "06_ptd_robustness.ipynb",
    "07_forecasting_in_depth.ipynb",
]
CELL_TIMEOUT_S = 300
PAIRING = "ipynb,py:percent"


def cells(notebook):
    return [(cell.cell_type, cell.source) for cell in notebook.cells]


def test_the_notebooks_are_committed():
    assert sorted(p.name for p in NOTEBOOK_DIR.glob("*.ipynb")) == EXPECTED


@pytest.mark.parametrize("name", EXPECTED)
def test_committed_notebook_has_no_outputs(name):
    """Outputs are never committed, so a notebook cannot show results its code no longer gives."""
    notebook = nbformat.read(NOTEBOOK_DIR / name, as_version=4)
    nbformat.validate(notebook)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code_cells
    for index, cell in enumerate(code_cells):
        assert cell.outputs == [], f"{name}: code cell {index} has stored outputs"
        assert cell.execution_count is None, f"{name}: code cell {index} has an execution count"
    assert notebook.metadata.kernelspec.name == "python3"
    # Every notebook must honour the quick switch, or the execution test below gets slow.
    assert any("SSMTS_NOTEBOOK_QUICK" in cell.source for cell in code_cells), name


def test_each_notebook_has_its_paired_py_file():
    assert sorted(p.name for p in NOTEBOOK_DIR.glob("*.py")) == [name.replace(".ipynb", ".py") for name in EXPECTED]


@pytest.mark.parametrize("name", EXPECTED)
def test_notebook_and_its_py_file_hold_the_same_cells(name):
    jupytext = pytest.importorskip("jupytext", reason="the notebooks extra is not installed")
    committed = nbformat.read(NOTEBOOK_DIR / name, as_version=4)
    assert committed.metadata.get("jupytext", {}).get("formats") == PAIRING, f"{name} is not paired as {PAIRING}"
    paired = NOTEBOOK_DIR / name.replace(".ipynb", ".py")
    text = jupytext.read(paired)
    assert text.metadata.get("jupytext", {}).get("formats") == PAIRING, f"{paired.name} is not paired as {PAIRING}"
    assert cells(text) == cells(committed), (
        f"{name} and {paired.name} differ: after editing the .py file run `jupytext --sync notebooks/{paired.name}`"
    )


@pytest.mark.parametrize("name", EXPECTED)
def test_notebook_runs_top_to_bottom(name, monkeypatch):
    pytest.importorskip("nbclient", reason="the notebooks extra is not installed")
    pytest.importorskip("ipykernel", reason="the notebooks extra is not installed")
    from jupyter_client.kernelspec import KernelSpecManager
    from nbclient import NotebookClient

    if "python3" not in KernelSpecManager().find_kernel_specs():
        pytest.skip("no 'python3' Jupyter kernel is installed")
    monkeypatch.setenv("SSMTS_NOTEBOOK_QUICK", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    notebook = nbformat.read(NOTEBOOK_DIR / name, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK_DIR)}},
    )
    client.execute()  # raises CellExecutionError, with the cell and traceback, on any error
    errors = [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if output.output_type == "error"
    ]
    assert not errors
