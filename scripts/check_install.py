"""Install ssmts as users do, each time into a fresh virtual environment, and check that it works there.

    python scripts/check_install.py wheel    # sdist and wheel (`python -m build`), the wheel installed alone,
                                             # run outside the repository: scripts/install_smoke.py, the
                                             # README's Python snippets, `ssmts tasks list`, `ssmts demo`
    python scripts/check_install.py extras   # one environment per extra, each with the check of its use
    python scripts/check_install.py lowest   # the lowest versions the pyproject allows (the oldest Python it
                                             # claims, `--resolution lowest-direct`), then the quick tests
    python scripts/check_install.py all      # the three, in that order (what CI runs)

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
DIRECT = "torch torchaudio numpy scipy scikit-learn pandas sktime joblib soundfile tqdm matplotlib safetensors".split()
QUICK_TESTS = ["-m", "not slow"]
# Where uv resolves otherwise than pip (the README's installer): for aeon's numba<0.64 beside numpy 2.4,
# pip keeps numba 0.63.1 and numpy 2.3, uv takes the pre-releases numba 0.63.0b1/rc1, whose metadata lack
# 0.63.1's numpy<2.4 and which fail to compile against numpy 2.4 (np.trapz is gone). Pre-releases cannot be
# refused wholesale: opentelemetry-semantic-conventions, which MLflow needs, has no other kind.
UV_CONSTRAINTS = "numba!=0.63.0b1,!=0.63.0rc1\n"
# The wheel carries the demo's 600 clips (about 16 MB zipped); PyPI's default limit is 100 MB, ours is tighter.
MAX_WHEEL_BYTES = 20_000_000

# Per extra: what it installs for, checked as a user would use it (run in an empty working directory).
EXTRA_CHECKS: dict[str, list[str]] = {
    "logging": [
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
    ],
    # PickupGestureWiimoteZ ships with aeon only; mr-hydra is aeon's MultiRocket-Hydra, minirocket runs on numba
    "bench": (
        "python -m ssmts.bench classify --sets GunPoint PickupGestureWiimoteZ --models features minirocket mr-hydra 1nn"
        " --threads 1"
    ).split(),
    "vitals": [
        "python",
        "-c",
        "from ssmts.data import load_heartpy_ppg, make_synthetic_vitals\n"
        "real = load_heartpy_ppg(); synthetic = make_synthetic_vitals(n_windows=12)\n"
        "print('heartpy PPG windows', real.train.X.shape, '; neurokit2 windows', synthetic.train.X.shape)\n",
    ],
    "notebooks": ["python", str(REPOSITORY / "scripts" / "install_notebooks.py"), str(REPOSITORY / "notebooks")],
    "distributed": [
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
    ],
    "docs": ["mkdocs", "build", "--strict", "-f", str(REPOSITORY / "mkdocs.yml"), "-d", "site"],
    "export": [
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
    ],
}


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
    constraints = python.parent.parent / "constraints.txt"
    constraints.write_text(UV_CONSTRAINTS)
    run([uv(), "pip", "install", "--quiet", "-c", str(constraints), "--python", str(python), *extra, requirement])
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


def check_extras(tmp: Path, wheel: Path, names: list[str] | None = None) -> None:
    for extra, command in EXTRA_CHECKS.items():
        if names and extra not in names:
            continue
        python = fresh_environment(tmp / f"venv-{extra}")
        install(python, f"{wheel}[{extra}]")
        work = tmp / f"work-{extra}"
        work.mkdir()
        executable = str(python) if command[0] == "python" else str(python.parent / command[0])
        run([executable, *command[1:]], cwd=work, env=outside())


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


def check_lowest(tmp: Path) -> None:
    python = fresh_environment(tmp / "venv-lowest", oldest_python())
    run([str(python), "--version"])
    # The quick tests use the vitals extra's packages too; lowest-direct takes every package named in the
    # project's requirements at its lower bound, and what those need at the newest version that fits. The
    # project is named by its source tree: uv counts a local project's requirements as direct, a wheel's not.
    install(python, f"{REPOSITORY}[test,vitals]", "--resolution", "lowest-direct")
    # The tests import the repository's ssmts, the same code as the wheel; the environment gives the versions.
    run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *QUICK_TESTS], cwd=REPOSITORY)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["wheel", "extras", "lowest", "all"])
    parser.add_argument("--extras", nargs="+", choices=sorted(EXTRA_CHECKS), help="only these extras")
    args = parser.parse_args(argv)
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
