"""Install ssmts as users do, each time into a fresh virtual environment, and check that it works there.

    python scripts/check_install.py wheel    # sdist and wheel (`python -m build`), the wheel installed alone,
                                             # run outside the repository: scripts/install_smoke.py, the
                                             # README's Python snippets, `ssmts tasks list`, `ssmts demo`
    python scripts/check_install.py extras   # one environment per extra, each with the check of its use
    python scripts/check_install.py lowest   # the lowest versions the pyproject allows (the oldest Python it
                                             # claims, `--resolution lowest-direct`), then the quick tests
    python scripts/check_install.py all      # the three, in that order (what CI runs)
    python scripts/check_install.py requirements EXTRA   # run inside an environment: the extra's requirements
                                             # are installed at allowed versions and import together

What is checked runs against the installed package, never the checkout: in an empty directory, or in a
copy of the checkout without the ssmts package (the tests of the lowest step, the docs' API pages, the dev
extra's lint and test collection), after a check that `import ssmts` finds the environment's.

Environments are made by uv (`pip install uv build`, in the test extra), which takes every package
from the registry and keeps a cache, so a second run downloads nothing. Each step prints its command,
its time, and what it resolved; the first failure stops the run with exit status 1.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
# The packages named in the pyproject's dependencies, whose resolved versions each step reports.
DIRECT = (
    "torch torchaudio numpy scipy scikit-learn pandas sktime numba joblib soundfile tqdm matplotlib safetensors"
).split()
QUICK_TESTS = ["-m", "not slow"]
# The wheel carries the demo's 600 clips (about 16 MB zipped); PyPI's default limit is 100 MB, ours is tighter.
MAX_WHEEL_BYTES = 20_000_000

# Run first in every directory where a check imports ssmts: it must come from the environment (a copy of the
# checkout holds no ssmts package, and `python -I` leaves the working directory and PYTHONPATH off sys.path).
INSTALLED_SSMTS = (
    "import sys\n"
    "from pathlib import Path\n"
    "import ssmts\n"
    "where = Path(ssmts.__file__).resolve()\n"
    "if Path(sys.prefix).resolve() not in where.parents:\n"
    "    sys.exit(f'check_install: ssmts is imported from {where}, not from the environment at {sys.prefix}')\n"
    "print('ssmts from', where.parent, flush=True)\n"
)
# pytest in the same process, after INSTALLED_SSMTS: every test then uses the module checked there.
PYTEST_ON_INSTALLED = INSTALLED_SSMTS + "import pytest\nsys.exit(pytest.main(sys.argv[1:]))\n"
# The mutation extra's check: mutmut's whole cycle on one function, with the pyproject's configuration
# narrowed to it (the full run takes an hour); every mutant of it is killed by the tests.
MUTATION_SOURCE, MUTATION_TESTS = "ssmts/training/objectives.py", "tests/training/test_objectives.py"
MUTATION_PATTERN = "ssmts.training.objectives.x_pinball_loss*"
MUTANTS_KILLED = (  # the report passes when nothing was checked: the mutants of the pattern must all be killed
    "import sys\n"
    "sys.path.insert(0, 'scripts')\n"
    "from mutation import read_results\n"
    f"mine = {{n: s for n, s in read_results().items() if n.startswith({MUTATION_PATTERN[:-1]!r})}}\n"
    "killed = sum(s == 'killed' for s in mine.values())\n"
    "print(f'{killed} of {len(mine)} mutants killed')\n"
    "sys.exit(0 if mine and killed == len(mine) else 1)\n"
)

# Per extra: what it installs for, checked as a user would use it: the commands, run in an empty working
# directory, or, for the extras in CHECKOUT_COPY, in a copy of the checkout ("python" is the environment's).
EXTRA_CHECKS: dict[str, list[list[str]]] = {
    "logging": [
        [
            "python",
            "-c",
            "import mlflow, numpy as np\n"
            "from ssmts import SSMClassifier\n"
            "from ssmts.training import MLflowLogger, TensorBoardLogger\n"
            "X = np.random.default_rng(0).standard_normal((24, 12)); y = (X[:, :6].mean(1) > 0).astype(int)\n"
            "tiny = dict(d_model=8, d_state=4, n_layers=1, max_epochs=2, min_steps=0, device='cpu')\n"
            "SSMClassifier(**tiny, callbacks=[MLflowLogger(), TensorBoardLogger('tb')]).fit(X, y)\n"
            "(run,) = mlflow.search_runs(output_format='list', search_all_experiments=True)\n"
            "assert run.info.status == 'FINISHED', run.info.status\n"
            "import pathlib; assert list(pathlib.Path('tb').glob('*/events.out.tfevents.*'))\n"
            "print('MLflow run', run.info.status, 'in', mlflow.get_tracking_uri(), '; TensorBoard events written')\n",
        ]
    ],
    # PickupGestureWiimoteZ ships with aeon only; mr-hydra is aeon's MultiRocket-Hydra, minirocket runs on numba
    "bench": [
        (
            "python -m ssmts.bench classify --sets GunPoint PickupGestureWiimoteZ --models features minirocket "
            "mr-hydra 1nn --threads 1"
        ).split()
    ],
    "vitals": [
        [
            "python",
            "-c",
            "from ssmts.data import load_heartpy_ppg, make_synthetic_vitals\n"
            "real = load_heartpy_ppg(); synthetic = make_synthetic_vitals(n_windows=12)\n"
            "print('heartpy PPG windows', real.train.X.shape, '; neurokit2 windows', synthetic.train.X.shape)\n",
        ]
    ],
    "notebooks": [["python", str(REPOSITORY / "scripts" / "install_notebooks.py"), str(REPOSITORY / "notebooks")]],
    "distributed": [
        [
            "python",
            "-c",
            "import joblib, numpy as np\n"
            "from dask.distributed import Client, LocalCluster\n"
            "from sklearn.model_selection import cross_val_score\n"
            "from ssmts import SSMClassifier\n"
            "X = np.random.default_rng(0).standard_normal((40, 12)); y = (X[:, :6].mean(1) > 0).astype(int)\n"
            "tiny = SSMClassifier(d_model=8, d_state=4, n_layers=1, max_epochs=2, min_steps=0, device='cpu')\n"
            "with LocalCluster(n_workers=2, threads_per_worker=1, host='127.0.0.1', dashboard_address=None) as c, "
            "Client(c), joblib.parallel_backend('dask'):\n"
            "    scores = cross_val_score(tiny, X, y, cv=2, n_jobs=2)\n"
            "print('cross-validated on dask workers:', scores)\n",
        ]
    ],
    # The API pages are rendered from the installed package: the copy of the checkout holds none.
    "docs": [["python", "-I", "-c", INSTALLED_SSMTS], ["mkdocs", "build", "--strict", "-d", "site"]],
    "export": [
        [
            "python",
            "-c",
            "import numpy as np, onnxruntime\n"
            "from ssmts import SSMClassifier\n"
            "X = np.random.default_rng(0).standard_normal((24, 1, 12)).astype(np.float32)\n"
            "y = (X[:, 0, :6].mean(1) > 0).astype(int)\n"
            "clf = SSMClassifier(d_model=8, d_state=4, n_layers=1, max_epochs=2, min_steps=0, device='cpu').fit(X, y)\n"
            "path = clf.export('clf.onnx')\n"
            "session = onnxruntime.InferenceSession(str(path))\n"
            "out = session.run(None, {session.get_inputs()[0].name: X})\n"
            "np.testing.assert_allclose(out[0], clf.predict_proba(X), rtol=1e-4, atol=1e-5)\n"
            "print('ONNX model answers as predict_proba:', out[0].shape)\n",
        ]
    ],
    # Everything the other extras bring, together: installed at allowed versions and importable in one
    # process; then the developer's lint, and every test module collected against the installed package.
    "dev": [
        ["python", "-I", "scripts/check_install.py", "requirements", "dev"],
        ["python", "-m", "ruff", "check", str(REPOSITORY)],  # the sources, the package's included
        ["python", "-m", "ruff", "format", "--check", str(REPOSITORY)],
        ["python", "-I", "-c", PYTEST_ON_INSTALLED, "--collect-only", "-q", "-p", "no:cacheprovider"],
    ],
    # mutmut mutates the checkout's sources and runs its tests there, as `python scripts/mutation.py` does.
    "mutation": [
        ["python", "scripts/mutation.py", "run", "--max-children", "2", MUTATION_PATTERN],
        ["python", "scripts/mutation.py", "report"],
        ["python", "-c", MUTANTS_KILLED],
    ],
}
# Extras checked in a copy of the checkout: with the ssmts package (True: mutmut mutates it) or without.
CHECKOUT_COPY = {"docs": False, "dev": False, "mutation": True}
# What an extra's environment installs besides it: mutmut runs the project's tests.
EXTRA_WITH = {"mutation": "mutation,test"}


def run(command: list[str], *, cwd: Path | None = None, env: dict | None = None, capture: bool = False) -> str:
    """Run a command, print it and its time; stop the check on failure."""
    shown = " ".join(command)
    print(f"\n$ {shown if len(shown) < 300 else shown[:300] + ' ...'}", flush=True)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, text=True, capture_output=capture)
    print(f"  [{time.perf_counter() - start:.1f} s, exit {done.returncode}]", flush=True)
    if done.returncode != 0:
        if capture:
            print(done.stdout[-5000:], done.stderr[-5000:], sep="\n")
        raise SystemExit(f"check_install: failed: {shown[:300]}")
    return done.stdout if capture else ""


def uv() -> str:
    found = shutil.which("uv")
    if found is None:
        raise SystemExit("check_install needs uv: pip install uv (it is in the test extra)")
    return found


def fresh_environment(folder: Path, python: str = sys.executable) -> Path:
    """A new virtual environment without the system's packages; returns its interpreter."""
    run([uv(), "venv", "--quiet", "--python", python, str(folder)])
    return folder / "bin" / "python"


def install(python: Path, requirement: str, *extra: str) -> None:
    """Install into the environment, and print the resolved versions of the direct dependencies."""
    run([uv(), "pip", "install", "--quiet", "--python", str(python), *extra, requirement])
    frozen = run([uv(), "pip", "freeze", "--python", str(python)], capture=True)
    versions = dict(line.split("==", 1) for line in frozen.splitlines() if "==" in line)
    print("  resolved: " + ", ".join(f"{name} {versions[name]}" for name in DIRECT if name in versions))


def build(out: Path) -> Path:
    """sdist, then the wheel built from it (so the sdist is checked to hold everything too)."""
    run([sys.executable, "-m", "build", "--outdir", str(out), str(REPOSITORY)], capture=True)
    (wheel,) = out.glob("ssmts-*.whl")
    (sdist,) = out.glob("ssmts-*.tar.gz")
    names = zipfile.ZipFile(wheel).namelist()
    clips = [n for n in names if n.startswith("ssmts/data/spoken_commands_mini/") and n.endswith(".wav")]
    weights = [n for n in names if n.endswith(".safetensors")]
    print(
        f"  {wheel.name}: {wheel.stat().st_size / 1e6:.1f} MB, {len(names)} files, {len(clips)} demo clips, "
        f"weights {weights}; {sdist.name}: {sdist.stat().st_size / 1e6:.1f} MB"
    )
    if len(clips) != 600 or not weights:
        raise SystemExit("check_install: the wheel lacks the demo's clips or the pretrained weights")
    if wheel.stat().st_size > MAX_WHEEL_BYTES:
        raise SystemExit(f"check_install: the wheel is over {MAX_WHEEL_BYTES / 1e6:.0f} MB")
    return wheel


def readme_snippets() -> list[str]:
    """The README's ```python blocks, in order."""
    return re.findall(r"```python\n(.*?)```", (REPOSITORY / "README.md").read_text(), flags=re.S)


def outside() -> dict:
    """The environment of the commands run outside the checkout: nothing points back into the repository."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV") and not k.startswith("MLFLOW")}
    env["MPLBACKEND"] = "Agg"
    return env


def check_wheel(tmp: Path) -> Path:
    wheel = build(tmp / "dist")
    python = fresh_environment(tmp / "venv-wheel")
    install(python, str(wheel))
    work = tmp / "work-wheel"
    work.mkdir()
    env = outside()
    run([str(python), "-I", str(REPOSITORY / "scripts" / "install_smoke.py"), str(REPOSITORY)], cwd=work, env=env)
    cli = str(python.parent / "ssmts")
    run([cli, "tasks", "list"], cwd=work, env=env)
    run([cli, "demo", "--quiet"], cwd=work, env=env)  # the README's main job, on the clips the wheel holds
    for number, snippet in enumerate(readme_snippets(), 1):
        print(f"\nREADME snippet {number}:\n{snippet}")
        run([str(python), "-I", "-c", snippet], cwd=work, env=env)
    return wheel


# Directories of a checkout that are not the project: version control, caches, builds and outputs.
NOT_COPIED = {".git", ".hypothesis", ".ruff_cache", ".pytest_cache", ".benchmarks", ".venv", "__pycache__"}
NOT_COPIED |= {"build", "dist", "site", "mutants", "ssmts-runs"}


def checkout_copy(folder: Path, *, package: bool) -> Path:
    """The checkout's project files copied into `folder` (created); the ssmts package only if `package`.
    Without it, what runs there (tests, the docs' API pages) imports ssmts from the environment."""

    def left_out(directory: str, names: list[str]) -> set[str]:
        skipped = {name for name in names if name in NOT_COPIED or name.endswith(".egg-info")}
        if not package and Path(directory).resolve() == REPOSITORY:
            skipped.add("ssmts")
        return skipped

    shutil.copytree(REPOSITORY, folder, ignore=left_out, symlinks=True)
    return folder


def narrow_mutation_config(pyproject: Path) -> None:
    """The [tool.mutmut] of a copy's pyproject.toml limited to MUTATION_SOURCE and MUTATION_TESTS."""
    text = pyproject.read_text()
    narrowed, n = re.subn(r"(?m)^source_paths = \[.*\]$", f'source_paths = ["{MUTATION_SOURCE}"]', text)
    narrowed, m = re.subn(
        r"(?m)^pytest_add_cli_args_test_selection = \[.*\]$",
        f'pytest_add_cli_args_test_selection = ["{MUTATION_TESTS}"]',
        narrowed,
    )
    if (n, m) != (1, 1):
        raise SystemExit("check_install: [tool.mutmut] lacks a one-line source_paths or test selection")
    pyproject.write_text(narrowed)


def extra_commands(python: Path, commands: list[list[str]]) -> list[list[str]]:
    """An extra's check commands with "python" and console scripts taken from the environment."""
    return [[str(python) if c[0] == "python" else str(python.parent / c[0]), *c[1:]] for c in commands]


def check_extras(tmp: Path, wheel: Path, names: list[str] | None = None) -> None:
    for extra, commands in EXTRA_CHECKS.items():
        if names and extra not in names:
            continue
        python = fresh_environment(tmp / f"venv-{extra}")
        install(python, f"{wheel}[{EXTRA_WITH.get(extra, extra)}]")
        work = tmp / f"work-{extra}"
        if extra in CHECKOUT_COPY:
            checkout_copy(work, package=CHECKOUT_COPY[extra])
        else:
            work.mkdir()
        if extra == "mutation":
            narrow_mutation_config(work / "pyproject.toml")
        # the environment's console scripts (mutmut, ruff) first on PATH, as in an activated environment
        env = outside()
        env["PATH"] = f"{python.parent}{os.pathsep}{env.get('PATH', '')}"
        for command in extra_commands(python, commands):
            run(command, cwd=work, env=env)


def oldest_python() -> str:
    """An interpreter of the oldest Python the pyproject claims (requires-python), or stop."""
    text = (REPOSITORY / "pyproject.toml").read_text()
    oldest = re.search(r'requires-python\s*=\s*">=\s*(3\.\d+)"', text).group(1)
    # pyenv's own interpreters first: its shim on PATH answers only for the globally selected version
    candidates = [*sorted(Path.home().glob(f".pyenv/versions/{oldest}.*/bin/python")), shutil.which(f"python{oldest}")]
    for candidate in candidates:
        if candidate and subprocess.run([str(candidate), "--version"], capture_output=True).returncode == 0:
            return str(candidate)
    raise SystemExit(f"check_install: no Python {oldest} found (the pyproject claims >= {oldest}); install one")


def lowest_test_command(python: Path) -> list[str]:
    """The quick tests, run by `python` on the ssmts installed in its environment (PYTEST_ON_INSTALLED)."""
    return [str(python), "-I", "-c", PYTEST_ON_INSTALLED, "-q", "-p", "no:cacheprovider", *QUICK_TESTS]


def check_lowest(tmp: Path) -> None:
    python = fresh_environment(tmp / "venv-lowest", oldest_python())
    run([str(python), "--version"])
    # The quick tests use the vitals extra's packages too; lowest-direct takes every package named in the
    # project's requirements at its lower bound, and what those need at the newest version that fits. The
    # project is named by its source tree: uv counts a local project's requirements as direct, a wheel's not.
    # uv builds and installs it (not editable): the package in the environment is what the tests exercise.
    install(python, f"{REPOSITORY}[test,vitals]", "--resolution", "lowest-direct")
    # The tests, from a copy of the checkout without the package (the files they read are there), import the
    # installed ssmts, and their subprocesses too (their working directory holds no ssmts either).
    work = checkout_copy(tmp / "work-lowest", package=False)
    run(lowest_test_command(python), cwd=work, env=outside())


def extra_requirements(extra: str, requires: list[str]) -> list:
    """The requirements (packaging.Requirement) an extra of ssmts brings, through the extras it names
    (dev names the others); requires: ssmts' requirement strings, as importlib.metadata gives them."""
    from packaging.requirements import Requirement

    found = []
    for text in requires:
        requirement = Requirement(text)
        marker = requirement.marker
        if marker is None or not marker.evaluate({"extra": extra}) or marker.evaluate({"extra": ""}):
            continue  # not of this extra (or of every install)
        if requirement.name == "ssmts":
            for named in sorted(requirement.extras):
                found += extra_requirements(named, requires)
        else:
            found.append(requirement)
    return found


def check_requirements(extra: str) -> None:
    """Inside an environment: every requirement of `extra` is installed at a version it allows, and the
    modules of all of them import together in one process (two extras' packages may install side by side
    and still not load together: a compiled package built against another numpy)."""
    import importlib
    import importlib.metadata as metadata

    from packaging.utils import canonicalize_name

    # once each, though several extras may name one (statsmodels: notebooks and test)
    requirements = list({str(r): r for r in extra_requirements(extra, metadata.requires("ssmts") or [])}.values())
    if not requirements:
        raise SystemExit(f"check_install: ssmts has no extra {extra!r} (or it requires nothing)")
    modules_of: dict[str, list[str]] = {}
    for module, distributions in metadata.packages_distributions().items():
        for distribution in distributions:
            modules_of.setdefault(canonicalize_name(distribution), []).append(module)
    problems = []
    for requirement in requirements:
        name, shown = canonicalize_name(requirement.name), f"{requirement.name}{requirement.specifier}"
        try:
            version = metadata.version(requirement.name)
        except metadata.PackageNotFoundError:
            problems.append(f"{shown}: not installed")
            continue
        if not requirement.specifier.contains(version, prereleases=True):
            problems.append(f"{shown}: {version} is installed")
            continue
        for module in sorted(m for m in modules_of.get(name, []) if m.isidentifier() and not m.startswith("_")):
            try:
                importlib.import_module(module)
            except Exception as error:  # noqa: BLE001 - any failure to load is the finding
                problems.append(f"{shown}: import {module} failed ({type(error).__name__}: {error})")
        print(f"  {requirement.name} {version}: {', '.join(sorted(modules_of.get(name, []))) or 'no modules'}")
    if problems:
        raise SystemExit("check_install: the " + extra + " extra does not work:\n  " + "\n  ".join(problems))
    print(f"the {extra} extra: {len(requirements)} requirements installed, their modules import together")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["wheel", "extras", "lowest", "all", "requirements"])
    parser.add_argument("extra", nargs="?", help="requirements: the extra whose requirements to check")
    parser.add_argument("--extras", nargs="+", choices=sorted(EXTRA_CHECKS), help="only these extras")
    args = parser.parse_args(argv)
    if args.what == "requirements":
        if not args.extra:
            parser.error("requirements needs the name of an extra")
        check_requirements(args.extra)
        return 0
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ssmts-install-") as folder:
        tmp = Path(folder)
        if args.what in ("wheel", "all"):
            wheel = check_wheel(tmp)
        if args.what in ("extras", "all"):
            check_extras(tmp, wheel if args.what == "all" else build(tmp / "dist"), args.extras)
        if args.what in ("lowest", "all"):
            check_lowest(tmp)
    print(f"\ncheck_install {args.what}: passed in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
