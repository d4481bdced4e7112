"""The SSM layer against its peers' own code: `python -m ssmts.bench peers [options]`.

Forward+backward time (loss mean(y^2), random input, no input gradient) of the bare layer,
every model in this one process, for each width H, state size N and length L: after a warm-up
pass each, `--repeats` rounds time every model once in turn, and the fastest pass is reported
(interleaving makes a change of machine load hit every model alike):

    ssmts heads=H    SSM(H, N, heads=H): stacked SISO systems (S4D's structure)
    ssmts heads=1    SSM(H, N): one MIMO system (S5's structure)
    ssmts heads=k    k in --heads (2, 4, 8, 32 below H): block-diagonal MIMO
    s4d              the S4D layer of the S4 repository (models/s4/s4d.py of the checkout at --s4d PATH
                     or $SSMTS_S4D; the output names the checkout's git commit)
    s5               s5-pytorch's S5(H, state_width=N/2): N/2 complex modes like ssmts (conj_sym)
    s5 state xk      with --equal-state, for each intermediate k: S5(H, state_width=k N/2), one MIMO
                     system with as many modes as ssmts heads=k (whose block-diagonal B and C are a
                     special case of its dense ones)
    mamba            mambapy's MambaBlock(d_model=H, d_state=N, expand 2): selective, input-dependent
    lstm             torch.nn.LSTM(H, H)
    fft floor        the FFT convolution alone: rfft of u (B, H, 2L) and of a precomputed (H, L)
                     kernel, product, irfft (the kernel gets the gradient)

and the ratios ssmts / fastest peer of the same structure (heads=H: s4d, mamba; heads=1: s5;
other heads: any peer), ssmts / FFT floor and, with --equal-state, ssmts heads=k / S5 with the
same number of modes. A peer that cannot be imported is skipped with
the reason. `--step` adds streaming rows: steps per second of SSM.step against nn.LSTMCell.
What each layer contains: S4D = kernel + FFT convolution + D + GELU + Conv1d(H, 2H) + GLU;
ssmts = kernel + FFT convolution + D (+ a Linear(H, H) mixer when heads > 1); S5 = parallel
scan + C + D; Mamba = in/out projections (H -> 4H -> H), causal conv, selective scan.
`--device cuda` runs every model on the GPU (nn.LSTM through cuDNN), timing each pass from a
synchronized device to a synchronized device, and adds each model's peak memory of one pass alone
(torch.cuda.max_memory_allocated above what was allocated before it); `--autocast bf16` runs every
forward under torch.autocast in bfloat16.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import math
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .layer import AUTOCAST

PEERS = ("s4d", "s5", "mamba")
SISO_PEERS = ("s4d", "mamba")  # one state (or state block) per channel
MIMO_PEERS = ("s5",)
DEFAULT_HEADS = (2, 4, 8, 32)
EQUAL_STATE_S5 = "s5 state x"  # + k: S5 with k N/2 modes, the state of ssmts heads=k


def _peer_of(name: str) -> str:
    """The peer whose code a row runs ("s5 state x8" runs s5), or the name itself."""
    return "s5" if name.startswith(EQUAL_STATE_S5) else name


def _state_factor(name: str) -> int:
    """k of an "s5 state xk" row (its S5 has k N/2 modes); 1 for any other row."""
    return int(name[len(EQUAL_STATE_S5) :]) if name.startswith(EQUAL_STATE_S5) else 1


@dataclass
class Row:
    H: int
    N: int
    L: int
    model: str
    time_ms: float | None = None
    note: str = ""
    peer: str = ""  # the peer this ssmts row is compared with
    vs_peer: float | None = None
    vs_floor: float | None = None
    vs_equal_state: float | None = None  # ssmts heads=k / "s5 state xk"
    peak_mb: float | None = None  # CUDA: memory a fwd+bwd pass allocates above what was allocated before


@dataclass
class StepRow:
    H: int
    N: int
    batch: int
    model: str
    steps_per_s: float
    vs_lstm: float | None = None


@dataclass
class Peers:
    """Peer layer classes, or the reason each one is missing."""

    classes: dict = field(default_factory=dict)
    missing: dict = field(default_factory=dict)


# ---------------------------------------------------------------- peers
def load_s4d(path: str | os.PathLike):
    """The S4D class of an S4 checkout, imported from its file (the repository root goes on sys.path
    for its own `src.models.nn` import)."""
    root = Path(path).expanduser().resolve()
    source = root / "models" / "s4" / "s4d.py"
    if not source.is_file():
        raise ImportError(f"no models/s4/s4d.py under {root}")
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    spec = importlib.util.spec_from_file_location("_ssmts_peer_s4d", source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.S4D


def load_peer(name: str, s4d_path: str | None):
    if name == "s4d":
        if not s4d_path:
            raise ImportError("no S4 checkout given (--s4d PATH)")
        return load_s4d(s4d_path)
    if name == "s5":
        from s5 import S5

        return S5
    if name == "mamba":
        from mambapy.mamba import MambaBlock, MambaConfig

        return lambda H, N: MambaBlock(MambaConfig(d_model=H, n_layers=1, d_state=N))
    raise ValueError(f"unknown peer {name!r}")


def peer_version(name: str, s4d_path: str | None) -> str:
    """What a results row was measured with: the S4 checkout's path and commit, or the package version."""
    if name == "s4d":
        root = Path(s4d_path).expanduser().resolve()
        try:
            # HEAD only where the checkout is itself a repository's root (a copy inside another
            # repository would report that one's commit)
            top, commit = subprocess.run(
                ["git", "-C", str(root), "rev-parse", "--show-toplevel", "HEAD"],
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout.split()[:2] or ("", "")
            commit = commit if Path(top).resolve() == root else ""
        except (OSError, subprocess.SubprocessError, ValueError):
            commit = ""
        return f"{root} @ {commit or 'no git commit'}"
    package = {"s5": "s5-pytorch", "mamba": "mambapy"}[name]
    try:
        return f"{package} {importlib.metadata.version(package)}"
    except importlib.metadata.PackageNotFoundError:
        return f"{package} (version unknown)"


def load_peers(names, s4d_path: str | None) -> Peers:
    peers = Peers()
    for name in names:
        try:
            peers.classes[name] = load_peer(name, s4d_path)
        except Exception as error:  # ImportError, or a checkout that fails to import
            peers.missing[name] = f"{type(error).__name__}: {error}"
    return peers


# ---------------------------------------------------------------- models
def ssmts_heads(H: int, heads: list[int]) -> list[int]:
    """The head counts run at width H: 1, H and the requested ones strictly between that divide H."""
    return [1] + [k for k in heads if 1 < k < H and H % k == 0] + ([H] if H > 1 else [])


def build(name: str, H: int, N: int, peers: Peers):
    """(module, forward(x) -> output, input layout 'BHL' or 'BLH')."""
    from torch import nn

    if name.startswith("ssmts heads="):
        from ssmts.nn import SSM

        layer = SSM(H, N, heads=int(name.split("=")[1]))
        return layer, layer, "BHL"
    if name == "s4d":
        layer = peers.classes["s4d"](H, d_state=N, transposed=True)
        return layer, (lambda x: layer(x)[0]), "BHL"
    if _peer_of(name) == "s5":
        layer = peers.classes["s5"](H, state_width=max(1, _state_factor(name) * N // 2))
        return layer, layer, "BLH"
    if name == "mamba":
        layer = peers.classes["mamba"](H, N)
        return layer, layer, "BLH"
    if name == "lstm":
        layer = nn.LSTM(H, H, batch_first=True)
        return layer, (lambda x: layer(x)[0]), "BLH"
    if name == "fft floor":  # built per L in `measure`
        return None, None, "BHL"
    raise ValueError(f"unknown model {name!r}")


def _floor_forward(kernel, L: int):
    import torch

    def forward(u):
        n = 2 * L
        return torch.fft.irfft(torch.fft.rfft(u, n=n) * torch.fft.rfft(kernel, n=n), n=n)[..., :L]

    return forward


def prepare(
    name: str,
    H: int,
    N: int,
    L: int,
    batch: int,
    peers: Peers,
    seed: int = 0,
    device: str = "cpu",
    autocast: str = "off",
):
    """A function running one forward+backward pass of the model on one random batch on `device` (under
    autocast in bfloat16 for autocast="bf16"); returns seconds."""
    import torch

    from .layer import autocast_context

    torch.manual_seed(seed)
    module, forward, layout = build(name, H, N, peers)
    if module is None:  # the FFT floor
        module = torch.nn.Parameter(torch.randn(H, L, device=device) / math.sqrt(L))
        forward = _floor_forward(module, L)
    else:
        module.to(device)
    params = list(module.parameters()) if isinstance(module, torch.nn.Module) else [module]
    x = torch.randn(batch, H, L).to(device)
    if layout == "BLH":
        x = x.transpose(1, 2).contiguous()
    cuda = torch.device(device).type == "cuda"

    def once() -> float:
        if cuda:
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        with autocast_context(device, autocast):
            y = forward(x)
        y.float().pow(2).mean().backward()
        if cuda:  # the kernels are queued: the pass ends when the device is done
            torch.cuda.synchronize(device)
        elapsed = time.perf_counter() - start
        for p in params:
            p.grad = None
        return elapsed

    return once


def _error_note(error: BaseException) -> str:
    """A row's note for a pass that failed: the error's type and the start of its first line."""
    return f"error: {type(error).__name__}: {str(error).splitlines()[0][:80]}"


def cuda_peak_mb(once, device: str) -> float:
    """MB that one fwd+bwd pass allocates on the device above what was allocated before it (activations,
    gradients, workspaces; the parameters and input are already there)."""
    import torch

    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    base = torch.cuda.memory_allocated(device)
    once()
    return (torch.cuda.max_memory_allocated(device) - base) / 2**20


def measure_interleaved(passes: dict, repeats: int, warmup: int, budget_s: float) -> dict:
    """{name: (ms, note)}: after the warm-up, `repeats` rounds that time every model once in turn (so
    that a change of machine load hits all of them alike); the fastest pass of each is reported. A
    model whose warm-up pass exceeds budget_s is reported from that one pass."""
    results, active = {}, {}
    for name, once in passes.items():
        try:
            seconds = [once() for _ in range(max(warmup, 1))][-1]
        except (RuntimeError, MemoryError) as error:
            results[name] = (None, _error_note(error))
            continue
        if seconds > budget_s or repeats == 0:
            results[name] = (1e3 * seconds, "1 pass (over --max-seconds)" if seconds > budget_s else "")
        else:
            active[name] = []
    for _ in range(repeats):
        for name in active:
            active[name].append(passes[name]())
    for name, seconds in active.items():
        results[name] = (1e3 * min(seconds), "")
    return results


def estimate_seconds(previous, N: int, L: int, name: str) -> float | None:
    """A pass at (N, L) from the model's last timed pass at the same H: linear in L, and in N for the
    peers whose work grows with it (ssmts rows are never skipped)."""
    if previous is None or name.startswith("ssmts"):
        return None
    N0, L0, ms = previous
    scale = L / L0 * (N / N0 if _peer_of(name) in PEERS else 1.0)
    return ms / 1e3 * scale


def estimate_gb(name: str, H: int, N: int, L: int, batch: int) -> float:
    """Rough peak memory of the peers whose intermediate tensors grow with N L."""
    if name == "s4d":  # (H, N/2, L) complex exponentials, kept for backward
        return 3 * H * (N // 2) * L * 8 / 1e9
    if name == "mamba":  # (B, L, 2H, N) scan tensors
        return 6 * batch * L * 2 * H * N * 4 / 1e9
    if name.startswith(EQUAL_STATE_S5):  # (B, L, P) complex states at every level of the parallel scan
        return 2 * math.log2(max(L, 2)) * batch * L * _state_factor(name) * (N // 2) * 8 / 1e9
    return 0.0


# ---------------------------------------------------------------- streaming
def measure_steps(name: str, H: int, N: int, batch: int, steps: int, seed: int = 0, device: str = "cpu") -> float:
    """Steps per second of a streaming recurrence under torch.no_grad (median of 3 runs)."""
    import torch

    torch.manual_seed(seed)
    x = torch.randn(steps, batch, H).to(device)
    cuda = torch.device(device).type == "cuda"
    with torch.no_grad():
        if name == "lstm cell":
            cell = torch.nn.LSTMCell(H, H).to(device)
            state = (torch.zeros(batch, H, device=device), torch.zeros(batch, H, device=device))

            def run():
                s = state
                for t in range(steps):
                    s = cell(x[t], s)
        else:
            from ssmts.nn import SSM

            layer = SSM(H, N, heads=int(name.split("=")[1])).to(device).eval()
            state = layer.initial_state(batch, device=x.device)

            def run():
                s = state
                for t in range(steps):
                    _, s = layer.step(x[t], s)

        run()
        times = []
        for _ in range(3):
            if cuda:
                torch.cuda.synchronize(device)
            start = time.perf_counter()
            run()
            if cuda:
                torch.cuda.synchronize(device)
            times.append(time.perf_counter() - start)
    return steps / statistics.median(times)


# ---------------------------------------------------------------- driver
def _ints(text: str) -> list[int]:
    return [int(v) for v in text.replace(",", " ").split()]


def parse_args(argv: list[str] | None):
    p = argparse.ArgumentParser(prog="python -m ssmts.bench peers", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--s4d",
        default=os.environ.get("SSMTS_S4D"),
        help="path of an S4 repository checkout (or $SSMTS_S4D); without it S4D is skipped",
    )
    p.add_argument("--widths", type=_ints, default=[64, 256], help="H (default 64,256)")
    p.add_argument("--states", type=_ints, default=[16, 64, 256], help="N (default 16,64,256)")
    p.add_argument("--lengths", type=_ints, default=[1024, 4096, 16384], help="L (default 1024,4096,16384)")
    p.add_argument(
        "--heads",
        type=_ints,
        default=list(DEFAULT_HEADS),
        help="intermediate ssmts head counts (default 2,4,8,32; 1 and H always run)",
    )
    p.add_argument(
        "--peers", default=",".join(PEERS), help=f"comma-separated subset of {','.join(PEERS)} ('' for none)"
    )
    p.add_argument(
        "--equal-state",
        action="store_true",
        help="also S5 with k N/2 modes for each intermediate k (the state of ssmts heads=k)",
    )
    p.add_argument("--no-lstm", action="store_true", help="leave out the LSTM row")
    p.add_argument("--batch", type=int, default=16, help="batch size (default 16)")
    p.add_argument(
        "--repeats", type=int, default=3, help="interleaved timed rounds; the fastest pass is reported (default 3)"
    )
    p.add_argument("--warmup", type=int, default=1, help="untimed passes first (default 1)")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: all cores available)")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N (default cpu)")
    p.add_argument(
        "--autocast",
        default="off",
        choices=AUTOCAST,
        help="bf16: every model's forward under torch.autocast in bfloat16 (default off)",
    )
    p.add_argument(
        "--max-seconds",
        type=float,
        default=60.0,
        help="skip a model whose pass is estimated (from its shorter L) above this; a warm-up above it is "
        "reported as the time (default 60)",
    )
    p.add_argument(
        "--max-gb", type=float, default=8.0, help="skip S4D and Mamba shapes estimated above this memory (default 8)"
    )
    p.add_argument(
        "--step",
        action="store_true",
        help="also streaming steps/s of SSM.step (heads 1 and H) and nn.LSTMCell at batch 1 and 64",
    )
    p.add_argument("--step-count", type=int, default=200, help="steps per streaming run (default 200)")
    p.add_argument(
        "--quick",
        action="store_true",
        help="H=64, N=16,64, L=1024, --max-seconds 3, 1 thread unless --threads: a smoke run",
    )
    p.add_argument("--markdown", action="store_true", help="print markdown tables")
    p.add_argument("--csv", default=None, help="append each shape's rows to this CSV file as soon as they are measured")
    args = p.parse_args(argv)
    if args.quick:
        args.widths, args.states, args.lengths = [64], [16, 64], [1024]
        args.max_seconds = min(args.max_seconds, 3.0)
    if args.threads is None:
        args.threads = (
            1
            if args.quick
            else (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
        )
    args.peers = [name.strip() for name in args.peers.split(",") if name.strip()]
    unknown = sorted(set(args.peers) - set(PEERS))
    if unknown:
        p.error(f"unknown peers {unknown}; choose from {list(PEERS)}")
    if (
        min(args.widths + args.states + args.lengths + [args.batch, args.threads, args.step_count]) < 1
        or args.repeats < 0
        or args.warmup < 0
    ):
        p.error("widths, states, lengths, batch, threads and step-count must be positive; repeats and warmup >= 0")
    return args


def run(args, peers: Peers, log=print) -> list[Row]:
    import torch

    torch.set_num_threads(args.threads)
    cuda = torch.device(args.device).type == "cuda"
    rows: list[Row] = []
    last: dict = {}  # (model, H) -> (N, L, ms) of its last measurement, for the time estimate
    for H in args.widths:
        for N in args.states:
            for L in args.lengths:
                models = [f"ssmts heads={k}" for k in ssmts_heads(H, args.heads)]
                models += [name for name in args.peers]
                if args.equal_state and "s5" in args.peers:
                    models += [f"{EQUAL_STATE_S5}{k}" for k in ssmts_heads(H, args.heads)[1:-1]]
                models += ([] if args.no_lstm else ["lstm"]) + ["fft floor"]
                passes, shape_rows = {}, {}
                for name in models:
                    row = Row(H, N, L, name)
                    rows.append(row)
                    shape_rows[name] = row
                    if _peer_of(name) in peers.missing:
                        row.note = f"skipped: {peers.missing[_peer_of(name)]}"
                        continue
                    gb = estimate_gb(name, H, N, L, args.batch)
                    if gb > args.max_gb:
                        row.note = f"skipped: ~{gb:.0f} GB estimated (> --max-gb)"
                        continue
                    estimate = estimate_seconds(last.get((name, H)), N, L, name)
                    if estimate is not None and estimate > args.max_seconds:
                        row.note = f"skipped: ~{estimate:.0f} s per pass estimated (> --max-seconds)"
                        continue
                    passes[name] = prepare(name, H, N, L, args.batch, peers, 0, args.device, args.autocast)
                if cuda:  # one pass each alone, for its memory (on CPU the process's peak is not per model)
                    for name in list(passes):
                        try:
                            shape_rows[name].peak_mb = cuda_peak_mb(passes[name], args.device)
                        except (RuntimeError, MemoryError) as error:  # CUDA out of memory, say
                            shape_rows[name].note = _error_note(error)
                            del passes[name]
                            torch.cuda.empty_cache()
                for name, (ms, note) in measure_interleaved(
                    passes, args.repeats, args.warmup, args.max_seconds
                ).items():
                    row = shape_rows[name]
                    row.time_ms, row.note = ms, note
                    if ms is not None:
                        last[(name, H)] = (N, L, ms)
                    log(f"  H={H} N={N} L={L} {name:15s} {'' if ms is None else f'{ms:.1f} ms'} {note}")
                if args.csv:
                    append_csv(args.csv, list(shape_rows.values()))
                del passes
                if cuda:
                    torch.cuda.empty_cache()
    add_ratios(rows)
    return rows


def append_csv(path: str, rows: list[Row]) -> None:
    """Append rows (times, memory, notes; the ratios are the table's) to a CSV file, as each shape is
    done: a run stopped midway keeps what it measured."""
    import csv

    fields = [name for name in asdict(rows[0]) if not name.startswith("vs_") and name != "peer"]
    new = not Path(path).exists() or Path(path).stat().st_size == 0
    with open(path, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        if new:
            writer.writeheader()
        writer.writerows(asdict(row) for row in rows)


def add_ratios(rows: list[Row]) -> None:
    """vs_peer: ssmts / fastest peer of the same structure; vs_floor: ssmts / FFT floor; vs_equal_state:
    ssmts heads=k / S5 with the same number of modes."""
    by_shape: dict = {}
    for row in rows:
        by_shape.setdefault((row.H, row.N, row.L), {})[row.model] = row
    for (H, _, _), shape in by_shape.items():
        floor = shape.get("fft floor")
        for name, row in shape.items():
            if not name.startswith("ssmts") or row.time_ms is None:
                continue
            heads = int(name.split("=")[1])
            group = SISO_PEERS if heads == H else (MIMO_PEERS if heads == 1 else PEERS)
            timed = [(shape[p].time_ms, p) for p in group if p in shape and shape[p].time_ms is not None]
            if timed:
                best, row.peer = min(timed)
                row.vs_peer = row.time_ms / best
            if floor is not None and floor.time_ms is not None:
                row.vs_floor = row.time_ms / floor.time_ms
            equal = shape.get(f"{EQUAL_STATE_S5}{heads}")
            if equal is not None and equal.time_ms is not None:
                row.vs_equal_state = row.time_ms / equal.time_ms


def run_steps(args, log=print) -> list[StepRow]:
    import torch

    torch.set_num_threads(args.threads)
    rows = []
    for H in args.widths:
        for batch in (1, 64):
            lstm = measure_steps("lstm cell", H, 0, batch, args.step_count, device=args.device)
            for N in args.states:
                for heads in sorted({1, H}):
                    rate = measure_steps(f"ssmts heads={heads}", H, N, batch, args.step_count, device=args.device)
                    rows.append(StepRow(H, N, batch, f"ssmts heads={heads}", rate, rate / lstm))
                    log(f"  step H={H} N={N} batch={batch} heads={heads}: {rate:.0f} steps/s")
            rows.append(StepRow(H, 0, batch, "lstm cell", lstm, 1.0))
    return rows


def _fmt(value, spec: str, suffix: str = "") -> str:
    return "" if value is None else f"{value:{spec}}{suffix}"


def format_table(rows: list[Row], markdown: bool) -> str:
    header = ["H", "N", "L", "model", "fwd+bwd ms", "ssmts/peer", "peer", "ssmts/floor", "note"]
    equal = any(r.model.startswith(EQUAL_STATE_S5) for r in rows)
    memory = any(r.peak_mb is not None for r in rows)
    if equal:
        header.insert(-1, "ssmts/s5 same state")
    body = []
    for r in rows:
        cells = [
            str(r.H),
            str(r.N),
            str(r.L),
            r.model,
            _fmt(r.time_ms, ".1f"),
            _fmt(r.vs_peer, ".2f", "x"),
            r.peer,
            _fmt(r.vs_floor, ".2f", "x"),
            r.note,
        ]
        if equal:
            cells.insert(-1, _fmt(r.vs_equal_state, ".2f", "x"))
        if memory:
            cells.insert(5, _fmt(r.peak_mb, ".0f"))
        body.append(cells)
    if memory:
        header.insert(5, "peak MB")
    text = {"model", "peer", "note"}
    return _table(header, body, markdown, right=tuple(i for i, name in enumerate(header) if name not in text))


def format_steps(rows: list[StepRow], markdown: bool) -> str:
    header = ["H", "N", "batch", "model", "steps/s", "vs LSTMCell"]
    body = [
        [str(r.H), str(r.N) if r.N else "", str(r.batch), r.model, f"{r.steps_per_s:.0f}", _fmt(r.vs_lstm, ".2f", "x")]
        for r in rows
    ]
    return _table(header, body, markdown, right=(0, 1, 2, 4, 5))


def _table(header: list[str], body: list[list[str]], markdown: bool, right=()) -> str:
    if markdown:
        align = ["---:" if i in right else "---" for i in range(len(header))]
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
        lines += ["| " + " | ".join(cells) + " |" for cells in body]
        return "\n".join(lines)
    widths = [max(len(h), *(len(c[i]) for c in body)) if body else len(h) for i, h in enumerate(header)]

    def fmt(cells):
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return "\n".join([fmt(header)] + [fmt(c) for c in body]).rstrip()


def summary(rows: list[Row]) -> str:
    ours = [r for r in rows if r.model.startswith("ssmts") and r.vs_peer is not None]
    if not ours:
        return "no ssmts row has a timed peer of its structure"
    worst = max(ours, key=lambda r: r.vs_peer)
    best = min(ours, key=lambda r: r.vs_peer)
    floors = [r.vs_floor for r in rows if r.model.startswith("ssmts") and r.vs_floor is not None]
    text = (
        f"ssmts / fastest peer of its structure: from {best.vs_peer:.2f}x "
        f"({best.model}, H={best.H} N={best.N} L={best.L}) "
        f"to {worst.vs_peer:.2f}x ({worst.model} vs {worst.peer}, H={worst.H} N={worst.N} L={worst.L})"
    )
    if floors:
        text += f"; ssmts / FFT floor: {min(floors):.2f}x to {max(floors):.2f}x"
    equal = [r.vs_equal_state for r in rows if r.vs_equal_state is not None]
    if equal:
        text += (
            f"; intermediate heads / S5 with as many modes: {min(equal):.2f}x to {max(equal):.2f}x, "
            f"1.5x faster or more in {sum(v <= 1 / 1.5 for v in equal)} of {len(equal)}"
        )
    return text


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    if torch.device(args.device).type == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"--device {args.device} requested but torch.cuda.is_available() is False")
    peers = load_peers(args.peers, args.s4d)
    print(
        f"ssmts peers benchmark: device={args.device} autocast={args.autocast} threads={args.threads} "
        f"batch={args.batch} repeats={args.repeats} "
        f"(fastest of the interleaved fwd+bwd passes after {args.warmup} warm-up) torch={torch.__version__}"
    )
    for name, reason in peers.missing.items():
        print(f"peer {name} skipped: {reason}")
    for name in peers.classes:
        print(f"peer {name}: {peer_version(name, args.s4d)}")
    start = time.perf_counter()
    rows = run(args, peers, log=lambda text: print(text, file=sys.stderr, flush=True))
    print(format_table(rows, args.markdown))
    print(summary(rows))
    if args.step:
        print()
        print(format_steps(run_steps(args, log=lambda text: print(text, file=sys.stderr, flush=True)), args.markdown))
    print(f"total {time.perf_counter() - start:.1f} s")
    return 0
