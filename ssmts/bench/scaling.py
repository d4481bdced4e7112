"""`python -m ssmts.bench scaling`: wall-clock speed-up of the scale-out engines on this machine.

    dask   a 12-fit grid (3 x 2 parameters, cv=2) of SSMClassifier on sklearn's digits read as
           64-step sequences, then the refit of the best on all of them (GridSearchCV's, serial in the
           main process): one process (1 thread) vs a LocalCluster of 1 and of 2 single-threaded
           workers on 127.0.0.1 (joblib's dask backend)
    ddp    fit_model of one network (width 32, batch 64; width 256, batch 256), the same global
           batch: 1 process vs 2 gloo processes (torch.multiprocessing, 127.0.0.1), 1 thread each

Prints seconds and the ratios; --quick shrinks both to a smoke run.
"""

from __future__ import annotations

import argparse
import os
import socket
import time

import numpy as np
import torch

GRID = {"d_model": [8, 16, 24], "lr": [3e-3, 1e-2]}


def _digits():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    return X, y


def _grid_search(n_jobs: int, max_epochs: int, backend: str | None):
    import joblib
    from sklearn.model_selection import GridSearchCV

    from ssmts.estimators import SSMClassifier

    X, y = _digits()
    search = GridSearchCV(
        SSMClassifier(d_state=8, n_layers=1, max_epochs=max_epochs, device="cpu", random_state=0),
        GRID,
        cv=2,
        n_jobs=n_jobs,
    )
    started = time.perf_counter()
    if backend is None:
        search.fit(X, y)
    else:
        with joblib.parallel_backend(backend, scatter=[X, y]):
            search.fit(X, y)
    return time.perf_counter() - started, search.best_score_


def bench_dask(max_epochs: int) -> list[tuple[str, float, float]]:
    from distributed import Client, LocalCluster

    rows = []
    torch.set_num_threads(1)
    rows.append(("one process, 1 thread", *_grid_search(1, max_epochs, None)))
    for workers in (1, 2):
        cluster = LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            silence_logs=40,
        )
        with Client(cluster) as client:
            # Workers are fresh processes: import torch and ssmts before the clock starts.
            client.run(lambda: __import__("ssmts.estimators"))
            rows.append((f"dask, {workers} worker(s) x 1 thread", *_grid_search(-1, max_epochs, "dask")))
        cluster.close()
    return rows


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ddp_data():
    X, y = _digits()
    x = torch.from_numpy(((X - X.mean()) / X.std()).astype(np.float32))[:, None, :]
    from ssmts.training import SequenceData

    return SequenceData(x, torch.from_numpy(y).long())


class _Network:
    """A picklable factory: SequenceHead on an SSMBackbone of the given width."""

    def __init__(self, width: int):
        self.width = width

    def __call__(self):
        from ssmts.nn import SequenceHead, SSMBackbone

        return SequenceHead(SSMBackbone(1, self.width, 2, None, d_state=16), 10)


def _ddp_fit(distributed: bool, epochs: int, width: int, batch: int) -> float:
    from ssmts.training import TrainerConfig, fit_model
    from ssmts.training.objectives import weighted_cross_entropy

    config = TrainerConfig(max_epochs=epochs, batch_size=batch, device="cpu", random_state=0, distributed=distributed)
    started = time.perf_counter()
    fit_model(_Network(width), _ddp_data(), weighted_cross_entropy(), config, seed=0)
    return time.perf_counter() - started


def _ddp_worker(rank: int, world: int, port: int, epochs: int, out: str, width: int, batch: int) -> None:
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    try:
        seconds = _ddp_fit(True, epochs, width, batch)
        if rank == 0:
            with open(out, "w") as f:
                f.write(str(seconds))
    finally:
        dist.destroy_process_group()


def bench_ddp(epochs: int, width: int, batch: int) -> list[tuple[str, float]]:
    import tempfile

    import torch.multiprocessing as mp

    torch.set_num_threads(1)
    rows = [("1 process, 1 thread", _ddp_fit(False, epochs, width, batch))]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "seconds")
        mp.spawn(_ddp_worker, args=(2, _free_port(), epochs, out, width, batch), nprocs=2, join=True)
        rows.append(("DDP, 2 processes x 1 thread (gloo)", float(open(out).read())))
    return rows


def _print_speedups(title: str, rows: list[tuple], extra: tuple[str, str] | None = None) -> None:
    """rows: (engine, seconds, *extra value); speed-ups against the first row."""
    base = rows[0][1]
    print(f"\n{title}")
    print(f"{'engine':<36} {'seconds':>8} {'speed-up':>9}" + (f" {extra[0]:>17}" if extra else ""))
    for name, seconds, *more in rows:
        line = f"{name:<36} {seconds:>8.1f} {base / seconds:>8.2f}x"
        print(line + (" " + extra[1].format(*more) if extra else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ssmts.bench scaling", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run (1 epoch)")
    parser.add_argument("--only", choices=("dask", "ddp"), help="run one of the two")
    args = parser.parse_args(argv)
    epochs = 1 if args.quick else 5
    print(f"ssmts scaling benchmark: {os.cpu_count()} CPU cores, torch {torch.__version__}, {epochs} epoch(s)")
    if args.only in (None, "dask"):
        _print_speedups(
            "12-fit grid search (SSMClassifier on digits, cv=2)",
            bench_dask(epochs),
            extra=("best CV accuracy", "{:>17.3f}"),
        )
    if args.only in (None, "ddp"):
        for width, batch in ((32, 64), (256, 256)):
            _print_speedups(
                f"one network, width {width}, global batch {batch} (digits, 1797 sequences of 64 steps)",
                bench_ddp(epochs, width, batch),
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
