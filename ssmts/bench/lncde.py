"""Cost of the LinearCDE (SLiCE) structures: `python -m ssmts.bench lncde [options]`
(or `python -m ssmts.bench.lncde`).

For every structure, hidden size d and length L it prints the parameter count and, for each of
the three compute modes (the sequential recurrence, the associative scan and the chunked scan),
the time of a forward pass (no gradient) and of a forward plus backward pass (what a training
step pays: the gradient of the parameters and of the input, for a fixed output gradient); each
the median of a few runs after a warm-up. The scan's per-step
composition cost is sum_j b_j^3 multiply-adds for blocks b_j (d^3 for dense, DPLR and WH, whose
products have no structure), so block-diagonal and diagonal scans scale as O(L d sum b_j^2)
(with d_path ~ d) and the dense one as O(L d^3). A measurement is skipped, with the reason,
when its transitions would need more than --max-gb of memory (with a backward pass autograd
keeps the transitions of every step, in every mode) or when the time measured at the previous
length, scaled linearly in L with a 1.5x margin, exceeds --budget seconds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass, field

MODES = ("recurrence", "scan", "chunked")
PASSES = ("fwd", "fwd+bwd")  # forward only; forward and backward
STRUCTURES = ("diagonal", "block4", "diag+4x4", "dplr", "walsh_hadamard", "dense")
MARGIN = 1.5  # long loops measured up to ~1.5x slower than linear extrapolation (cache effects)


def layer_kwargs(name: str, d: int) -> dict:
    """Constructor arguments of a benchmarked structure at hidden size d."""
    if name == "diagonal":
        return dict(structure="diagonal")
    if name == "block4":
        return dict(structure="block_diagonal", block_size=4)
    if name == "diag+4x4":  # SLiCE's suggested mixed form: 1x1 blocks and one small dense block
        return dict(structure="block_diagonal", block_sizes=[1] * (d - 4) + [4])
    if name == "dplr":
        return dict(structure="dplr", rank=2)
    if name in ("walsh_hadamard", "dense"):
        return dict(structure=name)
    raise ValueError(f"unknown structure {name!r}; choose one of {STRUCTURES}")


def compose_cost(layer) -> int:
    """Multiply-adds of one composition M2 @ M1 in the scan's representation: sum over blocks of s^3."""
    return sum(n * s**3 for s, n in layer._groups)


def transition_bytes(layer, batch: int, steps: int, itemsize: int = 4) -> int:
    """Rough peak memory of the scan over `steps` steps: the transitions, the composed pairs of every
    level (about as many again) and one temporary of the same size."""
    per_step = sum(n * s * s for s, n in layer._groups)
    return 3 * batch * steps * per_step * itemsize


def pass_bytes(layer, batch: int, L: int, mode: str, kind: str, chunk_size: int) -> int | None:
    """The memory a measurement is skipped on: None for the forward recurrence (it holds a chunk of
    transitions at a time); the scan's transitions over its steps for a forward pass; twice those of
    all L steps with the backward pass, which keeps what every step computed."""
    if kind == "fwd":
        if mode == "recurrence":
            return None
        return transition_bytes(layer, batch, L if mode == "scan" else min(L, chunk_size))
    return 2 * transition_bytes(layer, batch, L)


@dataclass
class Row:
    structure: str
    d: int
    L: int
    params: int
    compose: int
    ms: dict = field(default_factory=dict)  # (mode, pass) -> milliseconds
    notes: dict = field(default_factory=dict)  # (mode, pass) -> why skipped


def time_forward(layer, u, mode: str, repeats: int) -> float:
    """Median seconds of layer(u, mode=mode) under no_grad, after one warm-up on a short prefix."""
    import torch

    with torch.no_grad():
        layer(u[..., : min(64, u.shape[-1])], mode=mode)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            layer(u, mode=mode)
            times.append(time.perf_counter() - start)
            if times[-1] > 1.0:  # one slow run is precise enough
                break
    return statistics.median(times)


def time_forward_backward(layer, u, mode: str, repeats: int) -> float:
    """Median seconds of layer(u, mode=mode) and its backward pass for a fixed output gradient (the
    gradients of the parameters and of u), after one warm-up on a short prefix."""
    import torch

    def step(v: torch.Tensor, grad: torch.Tensor) -> None:
        layer(v, mode=mode).backward(grad)

    prefix = u[..., : min(64, u.shape[-1])].clone().requires_grad_(True)
    step(prefix, torch.ones(u.shape[0], layer.d_output, prefix.shape[-1]))
    u = u.clone().requires_grad_(True)
    grad = torch.ones(u.shape[0], layer.d_output, u.shape[-1])
    times = []
    for _ in range(repeats):
        layer.zero_grad(set_to_none=True)
        u.grad = None
        start = time.perf_counter()
        step(u, grad)
        times.append(time.perf_counter() - start)
        if times[-1] > 1.0:
            break
    layer.zero_grad(set_to_none=True)
    return statistics.median(times)


def run(args) -> list[Row]:
    import torch

    from ssmts.nn import LinearCDE

    torch.set_num_threads(args.threads)
    timers = {"fwd": time_forward, "fwd+bwd": time_forward_backward}
    rows: list[Row] = []
    for d in args.hidden:
        for name in args.structures:
            torch.manual_seed(0)
            layer = LinearCDE(
                args.d_model, d, d_path=args.d_path, chunk_length=args.chunk_size, **layer_kwargs(name, d)
            )
            params = sum(p.numel() for p in layer.parameters())
            # (mode, pass) -> (L, seconds) measured, or the skip reason
            last: dict[tuple[str, str], tuple[int, float] | str] = {}
            for L in args.lengths:
                row = Row(name, d, L, params, compose_cost(layer))
                u = torch.randn(args.batch, args.d_model, L)
                for kind in PASSES:
                    for mode in MODES:
                        key, what = (mode, kind), f"{mode} {kind}"
                        previous = last.get(key)
                        if isinstance(previous, str):
                            row.notes[key] = previous
                            continue
                        nbytes = pass_bytes(layer, args.batch, L, mode, kind, args.chunk_size)
                        if nbytes is not None and nbytes / 1e9 > args.max_gb:
                            row.notes[key] = last[key] = f"{what}: memory ~{nbytes / 1e9:.3g} GB > {args.max_gb:g} GB"
                            continue
                        if previous is not None:
                            L0, seconds = previous
                            estimate = MARGIN * seconds * L / L0
                            if estimate > args.budget:
                                row.notes[key] = last[key] = (
                                    f"{what}: time ~{estimate:.0f} s (from L={L0}, linear in L x{MARGIN:g}) "
                                    f"> {args.budget:g} s"
                                )
                                continue
                        seconds = timers[kind](layer, u, mode, args.repeats)
                        row.ms[key] = 1e3 * seconds
                        last[key] = (L, seconds)
                rows.append(row)
                done = " ".join(f"{m} {k}={row.ms[m, k]:.0f}ms" for k in PASSES for m in MODES if (m, k) in row.ms)
                print(f"  done {name:15s} d={d:4d} L={L:6d} {done}", file=sys.stderr, flush=True)
    return rows


COLUMNS = [(mode, kind) for kind in PASSES for mode in MODES]


def format_table(rows: list[Row]) -> str:
    dense_scan = {(r.d, r.L): r.ms.get(("scan", "fwd")) for r in rows if r.structure == "dense"}
    header = [
        "structure",
        "d",
        "params",
        "compose MACs",
        "L",
        "recurrence ms",
        "scan ms",
        "chunked ms",
        "recurrence f+b ms",
        "scan f+b ms",
        "chunked f+b ms",
        "vs dense scan",
        "skipped",
    ]
    lines = []
    for r in rows:
        ratio = ""
        ref = dense_scan.get((r.d, r.L))
        if ref is not None and ("scan", "fwd") in r.ms:
            ratio = f"{ref / r.ms['scan', 'fwd']:.1f}x"
        cells = [r.structure, str(r.d), str(r.params), str(r.compose), str(r.L)]
        cells += [f"{r.ms[c]:.1f}" if c in r.ms else "-" for c in COLUMNS]
        cells += [ratio, "; ".join(r.notes[c] for c in COLUMNS if c in r.notes)]
        lines.append(cells)
    numeric = len(header) - 1
    widths = [max(len(h), *(len(c[i]) for c in lines)) if lines else len(h) for i, h in enumerate(header)]

    def fmt(cells):
        return "  ".join(c.rjust(w) if 0 < i < numeric else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return "\n".join([fmt(header).rstrip()] + [fmt(c).rstrip() for c in lines])


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.replace(",", " ").split()]


def parse_args(argv: list[str] | None):
    p = argparse.ArgumentParser(prog="python -m ssmts.bench lncde", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--lengths",
        type=_ints,
        default=[256, 1024, 4096, 16384],
        help="sequence lengths L (default 256,1024,4096,16384)",
    )
    p.add_argument("--hidden", type=_ints, default=[64, 256], help="hidden sizes d (default 64,256)")
    p.add_argument(
        "--structures", default=",".join(STRUCTURES), help=f"comma-separated subset of {','.join(STRUCTURES)}"
    )
    p.add_argument("--batch", type=int, default=4, help="batch size (default 4)")
    p.add_argument("--d-model", type=int, default=16, help="input channels H (default 16)")
    p.add_argument("--d-path", type=int, default=16, help="path channels besides time (default 16)")
    p.add_argument("--chunk-size", type=int, default=128, help="chunk of the chunked scan (default 128)")
    p.add_argument(
        "--repeats", type=int, default=3, help="timed runs, median reported; 1 once a run exceeds 1 s (default 3)"
    )
    p.add_argument(
        "--budget",
        type=float,
        default=None,
        help="skip a measurement expected to exceed this many seconds (default 20; 5 with --quick)",
    )
    p.add_argument(
        "--max-gb",
        type=float,
        default=4.0,
        help="skip a measurement whose transitions would exceed this memory (default 4)",
    )
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    p.add_argument("--quick", action="store_true", help="tiny shapes for a smoke test (a few seconds)")
    args = p.parse_args(argv)
    if args.quick:
        args.lengths, args.hidden, args.batch, args.d_model, args.d_path = [64, 128], [16], 2, 4, 4
        args.chunk_size, args.repeats = 32, 1
    if args.budget is None:
        args.budget = 5.0 if args.quick else 20.0
    structures = [s.strip() for s in args.structures.split(",") if s.strip()]
    unknown = sorted(set(structures) - set(STRUCTURES))
    if unknown:
        p.error(f"unknown structures {unknown}; choose from {list(STRUCTURES)}")
    args.structures = structures
    if (
        min(
            args.lengths
            + args.hidden
            + [args.batch, args.d_model, args.d_path, args.chunk_size, args.repeats, args.threads]
        )
        < 1
    ):
        p.error("lengths, hidden sizes, batch, d-model, d-path, chunk-size, repeats and threads must be positive")
    if "walsh_hadamard" in structures and any(d & (d - 1) for d in args.hidden):
        p.error("walsh_hadamard needs power-of-two hidden sizes")
    if "diag+4x4" in structures and min(args.hidden) <= 4:
        p.error("diag+4x4 needs hidden sizes > 4")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    print(
        f"ssmts LinearCDE benchmark: forward (no grad) and forward+backward, threads={args.threads} batch={args.batch} "
        f"H={args.d_model} d_path={args.d_path} chunk={args.chunk_size} budget={args.budget:g} s "
        f"max-gb={args.max_gb:g} torch={torch.__version__}"
    )
    start = time.perf_counter()
    rows = run(args)
    sys.stdout.flush()
    print(format_table(rows))
    print(
        "compose MACs: multiply-adds of one composition in the scan (sum over blocks of b^3; d^3 for dense, dplr "
        "(rank 2) and walsh_hadamard); ms: forward only (no grad); f+b ms: forward and backward (gradients of the "
        "parameters and the input); vs dense scan: the dense forward scan's time over this forward scan's at the "
        "same d and L; block4 = 4x4 blocks, diag+4x4 = d-4 diagonal states and one 4x4 block"
    )
    print(f"total {time.perf_counter() - start:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
