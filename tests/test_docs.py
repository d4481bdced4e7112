"""The documentation site builds with `mkdocs build --strict` (every warning is an error:
broken links and anchors, missing API objects, formulas that cannot be rendered).

Builds a copy of mkdocs.yml and docs/ in a temporary directory, so that the benchmark
results include can be checked with a marker file without touching the working tree.
The headline results (RESULTS_FILE) are included at the top of benchmarks.md; their detail
lives on the pages of RESULT_PAGES, one per topic, each in the navigation.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# slow: mkdocs builds of the whole site
pytestmark = pytest.mark.slow

for module in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python", "latex2mathml"):
    pytest.importorskip(module, reason=f"{module} is not installed: pip install -e '.[docs]'")

ROOT = Path(__file__).resolve().parents[1]
RESULTS_FILE = "benchmarks_results.md"
MARKER = "Marker table written by tests/test_docs.py"
# Detail page of the results -> id of each section it holds (headings of docs/results/*.md).
RESULT_PAGES = {
    "results/classification": [
        "classification-defaults-python-m-ssmtsbench-classify-cv-5",
        "regression-defaults-python-m-ssmtsbench-classify-regression-cv-5",
    ],
    "results/forecasting": [
        "forecast-accuracy-python-m-ssmtsbench-forecast-uschange-exog",
        "interval-coverage-python-m-ssmtsbench-forecast-validation-coverage-0809",
        "backtests-from-many-origins-and-streaming-python-m-ssmtsbench-forecast-backtest-timing",
    ],
    "results/engine": [
        "layer-speed-python-m-ssmtsbench-layer",
        "linearcde-cost-python-m-ssmtsbench-lncde",
        "against-the-peers-own-code-python-m-ssmtsbench-peers",
    ],
    "results/tasks": [
        "state-tracking-ssmts-tasks-run-state-tracking-synthetic-preset-small",
        "ptd-robustness-ssmts-tasks-run-ptd-preset-small",
    ],
    "results/scaling": ["scaling-out-python-m-ssmtsbench-scaling"],
}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    work = tmp_path_factory.mktemp("docs")
    shutil.copy(ROOT / "mkdocs.yml", work / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", work / "docs")
    (work / "ssmts").symlink_to(ROOT / "ssmts", target_is_directory=True)  # mkdocstrings reads from "."
    results = work / "docs" / RESULTS_FILE
    real_results = results.exists()
    if not real_results:
        results.write_text(f"## Measured results\n\n{MARKER}\n\n| model | value |\n|---|---|\n| x | 1 |\n")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "OMP_NUM_THREADS": "1"}
    completed = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(work / "site")],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, f"mkdocs build --strict failed:\n{completed.stdout}\n{completed.stderr}"
    return work / "site", results.read_text(), real_results


def page(site_dir: Path, name: str) -> str:
    path = site_dir / name / "index.html" if name else site_dir / "index.html"
    assert path.exists(), f"page {name!r} was not built"
    return path.read_text(encoding="utf-8")


def test_every_page_of_the_navigation_is_built(site):
    site_dir, _, _ = site
    for name in [
        "",
        "getting-started",
        "concepts",
        "guides/sklearn",
        "guides/sktime",
        "guides/inspecting-models",
        "guides/resampling",
        "guides/slice",
        "guides/tasks-and-data",
        "notebooks",
        "benchmarks",
        "api/ssmts",
        "api/estimators",
        "api/sktime",
        "api/nn",
        "api/plot",
        "api/training",
        "api/data",
        "api/tasks",
        *RESULT_PAGES,
    ]:
        page(site_dir, name)
    assert not (site_dir / "hooks").exists(), "build code must not be published"
    assert not (site_dir / "benchmarks_results").exists(), "the results file is included, not a page of its own"


def test_formulas_are_rendered_to_mathml(site):
    site_dir, _, _ = site
    concepts = page(site_dir, "concepts")
    assert concepts.count("<math") > 30
    assert 'display="block"' in concepts
    assert "arithmatex" not in concepts and "\\(" not in concepts, "a formula was left as raw LaTeX"


def test_api_reference_comes_from_the_docstrings(site):
    site_dir, _, _ = site
    expectations = {
        "api/estimators": ["SSMClassifier", "SSMRegressor", "SSMTransformer", "predict_proba"],
        "api/sktime": [
            "SSMForecaster",
            "SSMPanelClassifier",
            "SSMPanelRegressor",
            "SSMFeaturePanelClassifier",
            "SSMFeaturePanelRegressor",
            "SSMFeaturePanelTransformer",
        ],
        "api/nn": ["SSM", "SSMBackbone", "transfer_function", "frequency_response", "from_matrices", "LinearCDE"],
        "api/plot": ["plot_eigenvalues", "plot_step_sizes", "plot_kernels", "plot_transfer_function", "plot_history"],
        "api/data": ["load_bidmc", "make_synthetic_vitals", "load_speech_commands", "change_rate"],
        "api/training": ["Trainer"],
        "api/tasks": ["run_task", "get_task"],
    }
    for name, objects in expectations.items():
        html = page(site_dir, name)
        for obj in objects:
            assert re.search(rf'id="[\w.]*\b{re.escape(obj)}"', html), f"{obj} is not documented on {name}"


def test_parameters_assembled_at_import_time_are_documented(site):
    """The estimators' constructors and docstrings exist only at run time (docs/hooks/griffe_runtime_classes.py)."""
    site_dir, _, _ = site
    html = page(site_dir, "api/estimators")
    for text in (
        "Backbone parameters",
        "Training parameters",
        "d_model",
        "dt_max",
        "class_weight",
        "objective",
        "Width H of every block.",
    ):
        assert text in html, f"{text!r} missing from the estimators reference"
    assert "required" not in html.split("Backbone parameters", 1)[1].split("Training parameters", 1)[0]


def test_the_defaults_of_each_estimator_are_tabled_from_the_estimators(site):
    """n_layers is declared with 4, the classifiers start from 3 and the other network faces from 2: the
    group's table names the faces that differ, and the faces table gives each its own value (both read
    from the classes)."""
    import re

    from ssmts import SSMClassifier
    from ssmts.sktime import SSMForecaster

    site_dir, _, _ = site
    html = page(site_dir, "guides/sklearn")
    assert "The defaults of each estimator" in html
    text = re.sub(r"<[^>]+>", "", html)
    row = re.search(r"n_layers\s*4\s*((?:\d+\s*){2,8})", text)
    assert row is not None, "no n_layers row in the faces table"
    assert row.group(1).split()[0] == str(SSMClassifier().n_layers) == "3"
    assert f"SSMForecaster {SSMForecaster().d_model}" in text  # the Backbone table names the forecaster's d_model


def test_benchmarks_page_includes_the_results_file(site):
    site_dir, results_text, real_results = site
    html = page(site_dir, "benchmarks")
    assert "python -m ssmts.bench layer" in html and "python -m ssmts.bench forecast" in html
    if real_results:
        first_words = next(line for line in results_text.splitlines() if line.strip()).lstrip("#").strip()
        assert first_words in html
    else:
        assert MARKER in html


def test_results_detail_pages_hold_every_section(site):
    site_dir, _, _ = site
    for name, sections in RESULT_PAGES.items():
        html = page(site_dir, name)
        for section in sections:
            assert f'id="{section}"' in html, f"section {section!r} missing from {name}"
    assert "MiniRocket" in page(site_dir, "results/classification")
    assert "| H | N | L |" not in page(site_dir, "results/engine"), "a table of the peers was not rendered"


def test_headline_results_link_to_every_detail_page(site):
    site_dir, _, real_results = site
    if not real_results:
        pytest.skip(f"docs/{RESULTS_FILE} is absent: the marker table has no links")
    html = page(site_dir, "benchmarks")
    # The classification defaults against MiniRocket and 1-NN on the test splits lead the page.
    assert html.index("Measured results") < html.index("Layer efficiency")
    for text in (
        "ssm (the defaults, M)",
        "MiniRocket",
        "1-NN ED",
        "the defaults</strong>",
        "SSM MASE",
        "SSM layer (defaults)",
        "fft floor",
    ):
        assert text in html, f"{text!r} missing from the headline results"
    for name, sections in RESULT_PAGES.items():
        for section in sections:
            assert f'href="../{name}/#{section}"' in html, f"the headline results do not link to {name}#{section}"


# A page of the site cited from code, tests, notebooks or the README: docs/<page>.md, optionally
# followed by #<heading id> (the form of the docstrings and parameter docs; help() shows it as is
# and docs/hooks/params_tables.py turns it into a link).
DOCS_REFERENCE = re.compile(r"\bdocs/([\w./-]+\.md)(?:#([\w-]+))?")
# Where the project's text lives: these folders (their text files) and the top-level files.
CITING_DIRS = ("ssmts", "tests", "docs", "notebooks", "docs_snippets", "scripts", ".ci")
CITING_SUFFIXES = {".py", ".md", ".ipynb", ".yml", ".yaml", ".toml", ".txt", ".cfg", ".ini", ".sh", ""}


def _citing_files() -> list[Path]:
    found = [path for path in ROOT.iterdir() if path.is_file() and path.suffix in CITING_SUFFIXES]
    for folder in CITING_DIRS:
        found += [
            path
            for path in (ROOT / folder).rglob("*")
            if path.is_file() and path.suffix in CITING_SUFFIXES and "__pycache__" not in path.parts
        ]
    return sorted(found)


def test_nothing_cites_a_file_outside_the_repository():
    """The math lives in docs/concepts.md; no text points at a notes file that is not in the repository,
    or at a numbered section of a page (headings have names, not numbers)."""
    outside = "ssm-math" + ".md"  # spelled in two pieces so that this file does not cite it
    numbered = re.compile(r"\.md\W{0,3}(?:section|sec\.|§)\s*\d", re.IGNORECASE)
    files = _citing_files()
    assert ROOT / "ssmts" / "training" / "params.py" in files and ROOT / "README.md" in files
    for path in files:
        if path == Path(__file__).resolve():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        assert outside not in text and outside.replace("-", "_") not in text, (
            f"{path.relative_to(ROOT)} cites a file that is not in the repository; cite docs/concepts.md#<heading>"
        )
        assert not numbered.search(text), f"{path.relative_to(ROOT)} cites a numbered section of a page"


def test_every_docs_reference_resolves_to_a_page_and_a_heading(site):
    """Every docs/<page>.md[#id] in the code, tests, notebooks and the README names a page of the
    repository and, with #id, a heading of the built page; the code cites docs/concepts.md by section."""
    site_dir, _, _ = site
    references = []
    for path in _citing_files():
        if path.is_relative_to(ROOT / "docs") or path == Path(__file__).resolve():
            continue  # the pages link to each other relatively, and mkdocs --strict checks those links
        text = path.read_text(encoding="utf-8", errors="replace")
        references += [(path.relative_to(ROOT), m.group(1), m.group(2)) for m in DOCS_REFERENCE.finditer(text)]
    cited = {(page, anchor) for _, page, anchor in references}
    assert ("concepts.md", "initialization-hippo-its-normal-part-and-ptd") in cited, sorted(cited)
    assert len({anchor for page, anchor in cited if page == "concepts.md"}) >= 6, sorted(cited)
    problems = []
    for where, page, anchor in references:
        if not (ROOT / "docs" / page).is_file():
            problems.append(f"{where}: docs/{page} does not exist")
        elif anchor is not None:
            name = page.removesuffix(".md").removesuffix("index").rstrip("/")
            built = site_dir / name / "index.html" if name else site_dir / "index.html"
            if not built.is_file() or f'id="{anchor}"' not in built.read_text(encoding="utf-8"):
                problems.append(f"{where}: docs/{page} has no heading #{anchor}")
        elif page == "concepts.md" and where.parts[0] == "ssmts":
            problems.append(f"{where}: cite a section of docs/concepts.md (docs/concepts.md#<heading>)")
    assert not problems, "\n".join(problems)


def test_parameter_docs_link_to_the_concepts_page(site):
    """docs/hooks/params_tables.py turns a parameter doc's docs/concepts.md#id into a link (checked by --strict)."""
    site_dir, _, _ = site
    html = page(site_dir, "guides/sklearn")
    assert 'href="../../concepts/#initialization-hippo-its-normal-part-and-ptd"' in html
    concepts = page(site_dir, "concepts")
    for section in ("how-ssmts-finds-the-perturbation", "simpler-starts"):
        assert f'id="{section}"' in concepts
    assert "S4D-Inv" in concepts.split('id="simpler-starts"', 1)[1]
