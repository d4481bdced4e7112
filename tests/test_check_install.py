"""scripts/check_install.py's own logic, without its installs: the checks run against the installed
package (a copy of the checkout without ssmts, and a guard that refuses any other ssmts), every extra
has a check, and an extra's requirements are checked installed and importable together."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def check_install():
    spec = importlib.util.spec_from_file_location("check_install", ROOT / "scripts" / "check_install.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# In the lowest-versions check the tests run from a copy of the checkout without ssmts/, against the
# package installed in that environment: the tests below that need the checkout's ssmts skip there.
FROM_CHECKOUT = (ROOT / "ssmts" / "__init__.py").is_file()
needs_checkout = pytest.mark.skipif(
    not FROM_CHECKOUT, reason="the tests run from a copy without ssmts/, against the installed package"
)


def _pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _requires() -> list[str]:
    """ssmts' requirement strings of the extras, as importlib.metadata gives them for an installed ssmts."""
    extras = _pyproject()["project"]["optional-dependencies"]
    return [f'{requirement}; extra == "{extra}"' for extra, listed in extras.items() for requirement in listed]


@needs_checkout
def test_a_copy_without_the_package_holds_the_tests_and_their_files_but_no_ssmts(check_install, tmp_path):
    work = check_install.checkout_copy(tmp_path / "copy", package=False)
    assert not (work / "ssmts").exists() and not (work / ".git").exists()
    for needed in ("tests/conftest.py", "pyproject.toml", "mkdocs.yml", "docs/index.md", "scripts/mutation.py"):
        assert (work / needed).is_file(), needed
    with_package = check_install.checkout_copy(tmp_path / "with", package=True)
    assert (with_package / "ssmts" / "__init__.py").is_file()


@needs_checkout
def test_the_guard_refuses_an_ssmts_that_is_not_the_environments(check_install, tmp_path):
    """Here ssmts comes from the checkout (an editable install, or the working directory): refused by name."""
    done = subprocess.run(
        [sys.executable, "-I", "-c", check_install.INSTALLED_SSMTS], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode != 0 and "not from the environment at" in done.stderr, done.stderr
    assert f"{Path(sys.prefix).resolve()}" in done.stderr or sys.prefix in done.stderr


def test_the_guard_accepts_an_ssmts_installed_in_the_environment(check_install, tmp_path):
    environment = tmp_path / "env"
    venv.create(environment, with_pip=False)
    python = environment / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    (site / "ssmts").mkdir(parents=True)
    (site / "ssmts" / "__init__.py").write_text("")
    done = subprocess.run([str(python), "-I", "-c", check_install.INSTALLED_SSMTS], capture_output=True, text=True)
    assert done.returncode == 0 and f"ssmts from {(site / 'ssmts').resolve()}" in done.stdout, done.stderr


def test_the_lowest_step_runs_the_quick_tests_isolated_from_the_checkout(check_install):
    command = check_install.lowest_test_command(Path("/env/bin/python"))
    assert command[:4] == ["/env/bin/python", "-I", "-c", check_install.PYTEST_ON_INSTALLED]
    assert command[-2:] == check_install.QUICK_TESTS
    assert check_install.PYTEST_ON_INSTALLED.startswith(check_install.INSTALLED_SSMTS)  # the guard first


def test_every_extra_has_a_check_and_the_docs_and_dev_checks_use_no_checkout_package(check_install):
    extras = set(_pyproject()["project"]["optional-dependencies"])
    # test: installed and run by the lowest step; every other extra by a check of its use
    assert set(check_install.EXTRA_CHECKS) == extras - {"test"}
    assert check_install.CHECKOUT_COPY == {"docs": False, "dev": False, "mutation": True}
    docs = check_install.EXTRA_CHECKS["docs"]
    assert docs[0] == ["python", "-I", "-c", check_install.INSTALLED_SSMTS]
    assert all(str(ROOT) not in part for command in docs for part in command)  # nothing read from the checkout


def test_the_dev_extra_brings_every_other_extra_but_mutation(check_install):
    requires = _requires()
    dev = {requirement.name for requirement in check_install.extra_requirements("dev", requires)}
    others = {
        requirement.name
        for extra in set(_pyproject()["project"]["optional-dependencies"]) - {"dev", "mutation"}
        for requirement in check_install.extra_requirements(extra, requires)
    }
    assert dev == others and "mutmut" not in dev
    notebooks = {r.name for r in check_install.extra_requirements("notebooks", requires)}
    assert {"heartpy", "neurokit2", "nbclient"} <= notebooks  # through ssmts[vitals]


def test_the_requirements_check_names_a_missing_or_too_old_package(check_install, monkeypatch, capsys):
    import importlib.metadata

    pytest.importorskip("packaging")
    monkeypatch.setattr(
        importlib.metadata,
        "requires",
        lambda name: ['ssmts-no-such-package>=1; extra == "probe"', 'numpy>=999; extra == "probe"', "numpy>=1.0"],
    )
    with pytest.raises(SystemExit) as raised:
        check_install.check_requirements("probe")
    message = str(raised.value)
    assert "the probe extra does not work" in message and "ssmts-no-such-package>=1: not installed" in message
    assert f"numpy>=999: {importlib.metadata.version('numpy')} is installed" in message
    monkeypatch.setattr(importlib.metadata, "requires", lambda name: ['numpy>=1.0; extra == "probe"'])
    check_install.check_requirements("probe")  # an installed, importable requirement passes
    assert "numpy" in capsys.readouterr().out


def test_the_mutation_check_narrows_mutmuts_configuration_to_one_module(check_install, tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text((ROOT / "pyproject.toml").read_text())
    check_install.narrow_mutation_config(pyproject)
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads(pyproject.read_text())["tool"]["mutmut"]
    assert config["source_paths"] == [check_install.MUTATION_SOURCE]
    assert config["pytest_add_cli_args_test_selection"] == [check_install.MUTATION_TESTS]
    assert (ROOT / check_install.MUTATION_SOURCE).is_file() and (ROOT / check_install.MUTATION_TESTS).is_file()
    pyproject.write_text("[tool.mutmut]\n")
    with pytest.raises(SystemExit, match="lacks a one-line source_paths"):
        check_install.narrow_mutation_config(pyproject)
