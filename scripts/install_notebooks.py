"""Run the example notebooks top to bottom (quick mode) with the Jupyter kernel of the interpreter that
runs this script: scripts/check_install.py uses it to check the notebooks extra in a fresh environment.

    python install_notebooks.py NOTEBOOK_DIR
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def main(folder: Path) -> None:
    os.environ["SSMTS_NOTEBOOK_QUICK"] = "1"  # shrinks data, model and epochs; the kernels inherit it
    for path in sorted(folder.glob("*.ipynb")):
        start = time.perf_counter()
        notebook = nbformat.read(path, as_version=4)
        # Run in the current (empty) directory, so that nothing is read from beside the notebook.
        NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": "."}}).execute()
        print(f"ok  {path.name} ran top to bottom in {time.perf_counter() - start:.0f} s", flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    main(Path(sys.argv[1]))
