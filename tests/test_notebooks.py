"""The example notebooks: committed without outputs, generated from build_notebooks.py, and
runnable top to bottom (with SSMTS_NOTEBOOK_QUICK=1, which shrinks data, model and epochs).

Measured on 2 shared CPU cores: the four quick runs take 11 to 15 s each, about 50 s
together, most of it kernel start-up and imports.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="the notebooks extra is not installed (pip install -e '.[notebooks]')")

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
EXPECTED = [
    "01_vital_signs.ipynb",
    "02_audio_sample_rates.ipynb",
    "03_forecasting_sktime.ipynb",
    "04_sklearn_gridsearch.ipynb",
]
CELL_TIMEOUT_S = 300


def load_generator():
    spec = importlib.util.spec_from_file_location("build_notebooks", NOTEBOOK_DIR / "build_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_four_notebooks_are_committed():
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


def test_notebooks_are_what_the_generator_writes():
    generator = load_generator()
    assert sorted(generator.NOTEBOOKS) == EXPECTED
    for name, cells in generator.NOTEBOOKS.items():
        committed = nbformat.read(NOTEBOOK_DIR / name, as_version=4)
        expected = generator.build(cells)
        assert [(c.cell_type, c.source) for c in committed.cells] == [(c.cell_type, c.source) for c in expected.cells], (
            f"{name} differs from notebooks/build_notebooks.py: edit the generator and run "
            "`python notebooks/build_notebooks.py`"
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
        notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK_DIR)}},
    )
    client.execute()  # raises CellExecutionError, with the cell and traceback, on any error
    errors = [output for cell in notebook.cells if cell.cell_type == "code"
              for output in cell.outputs if output.output_type == "error"]
    assert not errors
