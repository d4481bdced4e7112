"""`python -m ssmts.bench peers` machinery on a tiny configuration, with the peers present and absent."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from ssmts.bench import peers as bench_peers
from ssmts.bench.__main__ import BENCHMARKS

S4_CHECKOUT = os.environ.get("SSMTS_S4D", "/work/peers/s4")
TINY = [
    "--widths",
    "8",
    "--states",
    "4",
    "--lengths",
    "32",
    "--batch",
    "2",
    "--heads",
    "2",
    "--repeats",
    "1",
    "--warmup",
    "1",
    "--threads",
    "1",
]


def _rows(out: str, model: str) -> list[str]:
    return [line for line in out.splitlines() if re.match(rf"^\s*\d+\s+\d+\s+\d+\s+{re.escape(model)}\s", line)]


def test_registered():
    assert BENCHMARKS["peers"] == "ssmts.bench.peers"


def test_tiny_run_with_every_peer_it_can_import(capsys):
    """Every ssmts head count (1, 2, H), the importable peers and the FFT floor get a time; each ssmts row
    a ratio to its structure's peer (when that peer is importable) and to the floor."""
    args = TINY + ["--no-lstm"] + (["--s4d", S4_CHECKOUT] if os.path.isdir(S4_CHECKOUT) else [])
    assert bench_peers.main(args) == 0
    out = capsys.readouterr().out
    loaded = bench_peers.load_peers(bench_peers.PEERS, S4_CHECKOUT if os.path.isdir(S4_CHECKOUT) else None)
    for model in ("ssmts heads=1", "ssmts heads=2", "ssmts heads=8", "fft floor", *loaded.classes):
        (row,) = _rows(out, model)
        assert re.search(r"\s\d+\.\d(\s|$)", row), row
    for model in ("ssmts heads=1", "ssmts heads=2", "ssmts heads=8"):
        assert re.search(r"\d\.\d\dx\s*$", _rows(out, model)[0]), model  # vs the floor, last column
    if "s5" in loaded.classes:
        assert re.search(r"\d\.\d\dx\s+s5\s", _rows(out, "ssmts heads=1")[0])
    if "s4d" in loaded.classes:
        assert re.search(r"\d\.\d\dx\s+s4d\s", _rows(out, "ssmts heads=8")[0])
    assert not _rows(out, "lstm")
    assert "ssmts / fastest peer of its structure" in out or "no ssmts row has a timed peer" in out


def test_tiny_run_with_the_peers_missing(capsys, monkeypatch):
    """Each peer skipped with its reason; ssmts, LSTM and the floor still timed; the streaming table."""

    def missing(name, s4d_path):
        raise ImportError(f"no module named {name!r} (test)")

    monkeypatch.setattr(bench_peers, "load_peer", missing)
    assert bench_peers.main(TINY + ["--markdown", "--step", "--step-count", "5"]) == 0
    out = capsys.readouterr().out
    for name in bench_peers.PEERS:
        assert f"peer {name} skipped: ImportError: no module named '{name}' (test)" in out
        assert re.search(rf"^\| 8 \| 4 \| 32 \| {name} \|  \|  \|  \|  \| skipped: ImportError", out, re.M)
    assert re.search(r"^\| 8 \| 4 \| 32 \| ssmts heads=1 \| \d+\.\d \|  \|  \| \d+\.\d\dx \|", out, re.M)
    assert re.search(r"^\| 8 \| 4 \| 32 \| lstm \| \d+\.\d \|", out, re.M)
    assert "no ssmts row has a timed peer" in out
    assert re.search(r"^\| 8 \| 4 \| 64 \| ssmts heads=8 \| \d+ \| \d+\.\d\dx \|", out, re.M)  # steps, batch 64
    assert re.search(r"^\| 8 \|  \| 1 \| lstm cell \| \d+ \| 1\.00x \|", out, re.M)


def test_s4d_needs_a_checkout():
    with pytest.raises(ImportError, match="no S4 checkout"):
        bench_peers.load_peer("s4d", None)
    with pytest.raises(ImportError, match="no models/s4/s4d.py"):
        bench_peers.load_s4d("/nonexistent/s4")


def test_ratios_pick_the_fastest_peer_of_the_structure():
    R = bench_peers.Row
    rows = [
        R(8, 4, 32, "ssmts heads=8", 10.0),
        R(8, 4, 32, "ssmts heads=1", 30.0),
        R(8, 4, 32, "ssmts heads=2", 30.0),
        R(8, 4, 32, "s4d", 40.0),
        R(8, 4, 32, "mamba", 20.0),
        R(8, 4, 32, "s5", 60.0),
        R(8, 4, 32, "fft floor", 5.0),
    ]
    bench_peers.add_ratios(rows)
    assert (rows[0].peer, rows[0].vs_peer, rows[0].vs_floor) == ("mamba", 0.5, 2.0)
    assert (rows[1].peer, rows[1].vs_peer) == ("s5", 0.5)
    assert (rows[2].peer, rows[2].vs_peer) == ("mamba", 1.5)
    assert bench_peers.estimate_seconds((16, 1024, 1000.0), 64, 4096, "mamba") == pytest.approx(16.0)
    assert bench_peers.estimate_seconds((16, 1024, 1000.0), 64, 4096, "lstm") == pytest.approx(4.0)
    assert bench_peers.estimate_seconds((16, 1024, 1000.0), 64, 4096, "ssmts heads=1") is None


def test_equal_state_rows(capsys):
    """--equal-state adds S5 with k N/2 modes for each intermediate head count k, and its ratio column."""
    if "s5" not in bench_peers.load_peers(["s5"], None).classes:
        pytest.skip("s5-pytorch is not installed")
    assert bench_peers.main(TINY + ["--no-lstm", "--peers", "s5", "--equal-state"]) == 0
    out = capsys.readouterr().out
    assert "ssmts/s5 same state" in out
    (row,) = _rows(out, "s5 state x2")
    assert re.search(r"\s\d+\.\d(\s|$)", row), row
    assert re.search(r"\d+\.\d\dx\s+s5\s+\d+\.\d\dx\s+\d+\.\d\dx\s*$", _rows(out, "ssmts heads=2")[0])
    assert not _rows(out, "s5 state x8")  # heads = H has S4D's structure, not an equal-state S5
    assert "intermediate heads / S5 with as many modes" in out


def test_equal_state_ratio_and_estimates():
    R = bench_peers.Row
    rows = [R(8, 4, 32, "ssmts heads=2", 30.0), R(8, 4, 32, "s5", 20.0), R(8, 4, 32, "s5 state x2", 60.0)]
    bench_peers.add_ratios(rows)
    assert (rows[0].peer, rows[0].vs_peer, rows[0].vs_equal_state) == ("s5", 1.5, 0.5)
    assert bench_peers.estimate_seconds((16, 1024, 1000.0), 64, 4096, "s5 state x4") == pytest.approx(16.0)
    assert (
        bench_peers.estimate_gb("s5 state x4", 64, 64, 1024, 16)
        > bench_peers.estimate_gb("s5 state x2", 64, 64, 1024, 16)
        > 0
    )


_STAND_IN_S4D = '''
"""A stand-in with the interface of the S4 repository's models/s4/s4d.py: S4D(d_model, d_state,
transposed=True), forward(u (B, H, L)) -> (y (B, H, L), None), importing a helper from the
repository's own src package as the real file does."""
import torch
from torch import nn

from src.models.nn import DropoutNd


class S4D(nn.Module):
    def __init__(self, d_model, d_state=64, dropout=0.0, transposed=True, **kernel_args):
        super().__init__()
        assert transposed
        self.h, self.n = d_model, d_state
        self.D = nn.Parameter(torch.randn(self.h))
        self.log_dt = nn.Parameter(torch.full((self.h,), -3.0))
        self.C = nn.Parameter(torch.randn(self.h, self.n // 2, 2))
        self.A_imag = nn.Parameter(3.14159 * torch.arange(self.n // 2).float().repeat(self.h, 1))
        self.dropout = DropoutNd(dropout)

    def forward(self, u):
        L = u.size(-1)
        dt = torch.exp(self.log_dt)[:, None]
        A = -0.5 + 1j * self.A_imag  # (H, N/2)
        dtA = A * dt
        C = torch.view_as_complex(self.C) * (torch.exp(dtA) - 1.0) / A
        K = 2 * torch.einsum("hn,hnl->hl", C, torch.exp(dtA[:, :, None] * torch.arange(L))).real
        y = torch.fft.irfft(torch.fft.rfft(u, n=2 * L) * torch.fft.rfft(K, n=2 * L), n=2 * L)[..., :L]
        return self.dropout(y + u * self.D[:, None]), None
'''


@pytest.fixture
def stand_in_s4_checkout(tmp_path, monkeypatch):
    """An S4-shaped checkout: models/s4/s4d.py and the src.models.nn package it imports."""
    import sys

    (tmp_path / "models" / "s4").mkdir(parents=True)
    (tmp_path / "models" / "s4" / "s4d.py").write_text(_STAND_IN_S4D)
    package = tmp_path / "src" / "models" / "nn"
    package.mkdir(parents=True)
    for folder in (tmp_path / "src", tmp_path / "src" / "models"):
        (folder / "__init__.py").write_text("")
    (package / "__init__.py").write_text("from torch.nn import Dropout as DropoutNd\n")
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield tmp_path
    for name in [name for name in sys.modules if name == "src" or name.startswith("src.")]:
        del sys.modules[name]


def test_the_s4d_branch_runs_with_a_checkout_of_that_interface(stand_in_s4_checkout, capsys):
    """CI cannot reach the S4 repository: the s4d rows are built, timed and compared with ssmts heads=H
    from a stand-in checkout with the real file's interface and imports."""
    S4D = bench_peers.load_s4d(stand_in_s4_checkout)
    layer = S4D(8, d_state=4, transposed=True)
    import torch

    assert layer(torch.randn(2, 8, 32))[0].shape == (2, 8, 32)
    assert bench_peers.main(TINY + ["--no-lstm", "--peers", "s4d", "--s4d", str(stand_in_s4_checkout)]) == 0
    out = capsys.readouterr().out
    (row,) = _rows(out, "s4d")
    assert re.search(r"\s\d+\.\d(\s|$)", row), row
    assert re.search(r"\d\.\d\dx\s+s4d\s", _rows(out, "ssmts heads=8")[0])
    assert "peer s4d skipped" not in out
    assert f"peer s4d: {stand_in_s4_checkout.resolve()} @ no git commit" in out  # rows say what they timed


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_s4d_checkout_comes_from_the_environment_and_its_commit_is_printed(
    stand_in_s4_checkout, capsys, monkeypatch
):
    """$SSMTS_S4D locates the checkout when --s4d is not given, and the output names the commit of the
    checkout that was timed, so that its rows can be reproduced."""
    git = ["git", "-C", str(stand_in_s4_checkout), "-c", "user.name=test", "-c", "user.email=test@example.com"]
    git += ["-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "stand-in"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    monkeypatch.setenv("SSMTS_S4D", str(stand_in_s4_checkout))
    assert bench_peers.main(TINY + ["--no-lstm", "--peers", "s4d"]) == 0
    out = capsys.readouterr().out
    assert f"peer s4d: {stand_in_s4_checkout.resolve()} @ {commit}" in out
    (row,) = _rows(out, "s4d")
    assert re.search(r"\s\d+\.\d(\s|$)", row), row


def test_csv_keeps_each_shape_as_it_is_measured_and_autocast_is_stated(tmp_path, capsys):
    """--csv appends every shape's rows when that shape is done (a run stopped by a time limit keeps
    them), with one header over several runs; --autocast bf16 runs every forward under autocast."""
    path = tmp_path / "peers.csv"
    args = TINY + ["--no-lstm", "--peers", "", "--lengths", "16,32", "--autocast", "bf16", "--csv", str(path)]
    assert bench_peers.main(args) == 0
    assert "autocast=bf16" in capsys.readouterr().out
    assert bench_peers.main(args) == 0
    lines = path.read_text().splitlines()
    assert lines[0] == "H,N,L,model,time_ms,note,peak_mb"
    models = ["ssmts heads=1", "ssmts heads=2", "ssmts heads=8", "fft floor"]
    assert [line.split(",")[3] for line in lines[1:]] == models * 4  # 2 runs x 2 lengths
    assert [line.split(",")[2] for line in lines[1:5]] == ["16"] * 4
    assert all(float(line.split(",")[4]) > 0 for line in lines[1:])


def test_the_table_shows_peak_memory_when_measured():
    rows = [bench_peers.Row(8, 4, 32, "ssmts heads=8", 1.5, peak_mb=12.25), bench_peers.Row(8, 4, 32, "s4d", 2.0)]
    bench_peers.add_ratios(rows)
    header, first, second = bench_peers.format_table(rows, markdown=False).splitlines()
    assert header.split()[6:8] == ["peak", "MB"]  # after "fwd+bwd ms"
    assert re.search(r"1\.5\s+12\s+0\.75x\s+s4d", first)
    assert "peak" not in bench_peers.format_table(rows[1:], markdown=False)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_checkout_copied_into_another_repository_names_no_commit(stand_in_s4_checkout, tmp_path):
    """The commit printed is the checkout's own: a copy inside another repository (the GPU run carries
    one inside the project) has none, rather than the surrounding repository's."""
    outer = tmp_path / "outer"
    shutil.copytree(stand_in_s4_checkout, outer / "s4", ignore=shutil.ignore_patterns("outer"))
    git = ["git", "-C", str(outer), "-c", "user.name=test", "-c", "user.email=test@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "-c", "commit.gpgsign=false", "commit", "-q", "-m", "outer"], check=True)
    assert bench_peers.peer_version("s4d", str(outer / "s4")).endswith("@ no git commit")
    assert not bench_peers.peer_version("s4d", str(outer)).endswith("@ no git commit")  # needs models/s4 only to load
