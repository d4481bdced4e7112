"""Layer efficiency benchmark (eSSM sec. 5.3 shapes): `python -m ssmts.bench layer [options]`.

For every (length L, width H) it measures, on one batch of random data, the parameter count,
the median forward+backward time and the peak memory of

    ssm              SSM(H)                     (defaults: d_state 64, one head, ZOH, FFT mode)
    ssm_block        SSMBlock(H)                (norm -> SSM -> gated GELU -> residual)
    lstm             nn.LSTM(H, H)              (one layer, batch_first)
    gru              nn.GRU(H, H)
    transformer      nn.TransformerEncoderLayer(H, nhead=8, dim_feedforward=4H, dropout=0)
                     (same width H, the usual 4x feed-forward; nhead = gcd(8, H) for small H)
    ssm_recurrence   SSM(H) with mode="recurrence" (a Python loop: only for L <= --recurrence-max-length)

Memory: on CPU each configuration runs in its own process (forkserver with torch preloaded, or spawn)
and reports its peak resident-set increase over the process's state before building the model; on CUDA
it is torch.cuda.max_memory_allocated above the allocation before. Dropout is 0 everywhere and the loss
is mean(y^2), so every model does the same kind of work per step.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass

MODELS = ("ssm", "ssm_block", "lstm", "gru", "transformer", "ssm_recurrence")
HEADLINE = (16, 4096, 256)  # eSSM 5.3: batch 16, L 4096, H 256


@dataclass
class Result:
    model: str
    L: int
    H: int
    params: int
    time_ms: float | None = None
    peak_mb: float | None = None
    note: str = ""


# ---------------------------------------------------------------- models
def build_model(name: str, H: int):
    from torch import nn

    from ssmts.nn import SSM, SSMBlock

    if name in ("ssm", "ssm_recurrence"):
        return SSM(H)
    if name == "ssm_block":
        return SSMBlock(H)
    if name == "lstm":
        return nn.LSTM(H, H, batch_first=True)
    if name == "gru":
        return nn.GRU(H, H, batch_first=True)
    if name == "transformer":
        return nn.TransformerEncoderLayer(H, nhead=math.gcd(8, H), dim_feedforward=4 * H, dropout=0.0, batch_first=True)
    raise ValueError(f"unknown model {name!r}; choose one of {MODELS}")


def count_parameters(model) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def _forward(name: str, model, x):
    """x: (B, L, H) -> a tensor whose mean square is the loss."""
    if name in ("ssm", "ssm_block"):
        return model(x.transpose(1, 2))
    if name == "ssm_recurrence":
        return model(x.transpose(1, 2), mode="recurrence")
    if name in ("lstm", "gru"):
        return model(x)[0]
    return model(x)


def attention_gb(batch: int, L: int, H: int) -> float:
    """Memory of the L x L attention matrices kept for backward in the plain (math) attention path:
    scores and probabilities, float32, per head. Fused kernels may need less; this is the cap's estimate."""
    return 2 * batch * math.gcd(8, H) * L * L * 4 / 1e9


# ---------------------------------------------------------------- memory probes (CPU)
def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        import resource

        scale = 1 if sys.platform == "darwin" else 1024
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def _reset_peak_rss() -> None:
    """Reset the kernel's high-water mark to the current RSS (Linux >= 4.0); harmless elsewhere."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _peak_rss_bytes() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


# ---------------------------------------------------------------- one measurement
AUTOCAST = ("off", "bf16")


def autocast_context(device: str, autocast: str):
    """torch.autocast in bfloat16 for autocast="bf16" (what precision="bf16-mixed" trains under), else
    nothing: weights and the loss stay float32 either way."""
    import contextlib

    import torch

    if autocast == "off":
        return contextlib.nullcontext()
    if autocast == "bf16":
        return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)
    raise ValueError(f"unknown autocast {autocast!r}; choose one of {AUTOCAST}")


def measure(
    name: str,
    batch: int,
    L: int,
    H: int,
    repeats: int,
    device: str,
    threads: int,
    warmup: int = 1,
    seed: int = 0,
    autocast: str = "off",
) -> dict:
    """Median fwd+bwd time (ms) and peak memory increase (MB) of one configuration, in this process."""
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        _reset_peak_rss()
        base = _rss_bytes()

    model = build_model(name, H).to(device)
    x = torch.randn(batch, L, H, device=device)

    def step() -> None:
        with autocast_context(device, autocast):
            y = _forward(name, model, x)
        y.float().pow(2).mean().backward()
        for p in model.parameters():
            p.grad = None

    for _ in range(warmup):  # allocator, FFT plans, kernel selection
        step()
    times = []
    for _ in range(repeats):
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        step()
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    peak = (torch.cuda.max_memory_allocated() if cuda else _peak_rss_bytes()) - base
    return dict(params=count_parameters(model), time_ms=1e3 * statistics.median(times), peak_mb=peak / 2**20)


def _child(conn, *args) -> None:
    try:
        conn.send(("ok", measure(*args)))
    except BaseException as error:  # report anything, including MemoryError, to the parent
        conn.send(("error", f"{type(error).__name__}: {error}"))
    finally:
        conn.close()


def _context():
    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        # Children fork from a server that has torch and ssmts imported, so each costs ~0.1 s, not ~5 s.
        ctx.set_forkserver_preload(["torch", "ssmts.nn", "ssmts.bench.layer"])
        return ctx
    return mp.get_context("spawn")


def measure_isolated(ctx, timeout: float, *args) -> tuple[str, dict | str]:
    """Run `measure(*args)` in a fresh process; ("ok", dict) or ("error"/"timeout", message)."""
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, *args), daemon=True)
    proc.start()
    child.close()
    if not parent.poll(timeout):
        proc.terminate()
        proc.join()
        return "timeout", f"timeout ({timeout:.0f} s)"
    try:
        status, payload = parent.recv()
    except EOFError:
        status, payload = "error", f"process died (exit code {proc.exitcode}; out of memory?)"
    proc.join()
    return status, payload


# ---------------------------------------------------------------- driver
def _ints(text: str) -> list[int]:
    return [int(v) for v in text.replace(",", " ").split()]


def parse_args(argv: list[str] | None):
    p = argparse.ArgumentParser(prog="python -m ssmts.bench layer", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--lengths", type=_ints, default=[256, 1024, 4096], help="sequence lengths L (default 256,1024,4096)"
    )
    p.add_argument("--widths", type=_ints, default=[64, 128, 256], help="model widths H (default 64,128,256)")
    p.add_argument("--batch", type=int, default=16, help="batch size (default 16)")
    p.add_argument(
        "--repeats", type=int, default=5, help="timed repeats after the warm-up; the median is reported (default 5)"
    )
    p.add_argument("--warmup", type=int, default=1, help="untimed fwd+bwd passes before timing (default 1)")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N (default cpu)")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: all cores available)")
    p.add_argument(
        "--autocast",
        default="off",
        choices=AUTOCAST,
        help="bf16: forward under torch.autocast in bfloat16, as precision='bf16-mixed' trains (default off)",
    )
    p.add_argument("--models", default=",".join(MODELS), help=f"comma-separated subset of {','.join(MODELS)}")
    p.add_argument(
        "--max-attention-gb",
        type=float,
        default=4.0,
        help="skip transformer shapes whose attention matrices exceed this (default 4)",
    )
    p.add_argument(
        "--recurrence-max-length",
        type=int,
        default=None,
        help="run ssm_recurrence only up to this L (default: the smallest L)",
    )
    p.add_argument("--timeout", type=float, default=900.0, help="seconds allowed per configuration (default 900)")
    p.add_argument("--in-process", action="store_true", help="CPU: no subprocesses (faster; memory column left empty)")
    p.add_argument(
        "--quick", action="store_true", help="tiny shapes for a smoke test (and 1 thread unless --threads is given)"
    )
    p.add_argument("--csv", default=None, help="also write the table to this CSV file")
    args = p.parse_args(argv)
    if args.quick:
        args.lengths, args.widths, args.batch, args.repeats = [32, 64], [16], 2, 2
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = sorted(set(models) - set(MODELS))
    if unknown:
        p.error(f"unknown models {unknown}; choose from {list(MODELS)}")
    args.models = models
    if args.threads is None and args.quick:
        args.threads = 1  # a smoke test should not fight other jobs for cores
    if args.threads is None:
        args.threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if args.recurrence_max_length is None:
        args.recurrence_max_length = min(args.lengths)
    if min(args.lengths + args.widths + [args.batch, args.repeats, args.threads]) < 1 or args.warmup < 0:
        p.error("lengths, widths, batch, repeats and threads must be positive, warmup >= 0")
    return args


def run(args) -> list[Result]:
    import torch

    cuda = args.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        raise SystemExit("--device cuda requested but torch.cuda.is_available() is False")
    isolated = not cuda and not args.in_process
    ctx = _context() if isolated else None
    results: list[Result] = []
    for L in args.lengths:
        for H in args.widths:
            for name in args.models:
                if name == "ssm_recurrence" and L > args.recurrence_max_length:
                    continue  # a Python loop over L: listed in the notes, not in the table
                params = count_parameters(build_model(name, H))
                row = Result(name, L, H, params)
                if name == "transformer" and attention_gb(args.batch, L, H) > args.max_attention_gb:
                    gb = attention_gb(args.batch, L, H)
                    row.note = f"skipped (memory: ~{gb:.3g} GB attention > {args.max_attention_gb:g} GB)"
                    results.append(row)
                    continue
                call = (name, args.batch, L, H, args.repeats, args.device, args.threads, args.warmup, 0, args.autocast)
                if isolated:
                    status, payload = measure_isolated(ctx, args.timeout, *call)
                else:
                    try:
                        status, payload = "ok", measure(*call)
                    except RuntimeError as error:  # e.g. CUDA out of memory
                        status, payload = "error", f"{type(error).__name__}: {str(error).splitlines()[0]}"
                        if cuda:
                            torch.cuda.empty_cache()
                if status == "ok":
                    row.time_ms = payload["time_ms"]
                    row.peak_mb = payload["peak_mb"] if isolated or cuda else None  # in-process RSS is not per model
                else:
                    row.note = str(payload)
                results.append(row)
                print(
                    f"  done L={L:5d} H={H:4d} {name:15s} {row.time_ms if row.time_ms is not None else row.note}",
                    file=sys.stderr,
                    flush=True,
                )
    return results


def table(results: list[Result]):
    import pandas as pd

    df = pd.DataFrame([asdict(r) for r in results])
    for column in ("time_ms", "peak_mb"):  # None (skipped, in-process) -> NaN, even when every row has None
        df[column] = pd.to_numeric(df[column], errors="coerce").astype(float)
    lstm = df[df.model == "lstm"].set_index(["L", "H"])
    keys = list(zip(df.L, df.H))
    lstm_time = [lstm.time_ms.get(k, float("nan")) for k in keys]
    lstm_params = [lstm.params.get(k, float("nan")) for k in keys]
    df["time_vs_lstm"] = df.time_ms / lstm_time  # < 1: faster than the LSTM
    df["params_vs_lstm"] = df.params / lstm_params
    return df


def format_table(df) -> str:
    out = df.copy()
    out["time_ms"] = out.time_ms.map(lambda v: "" if v != v else f"{v:.1f}")
    out["peak_mb"] = out.peak_mb.map(lambda v: "" if v != v else f"{v:.1f}")
    out["time_vs_lstm"] = out.time_vs_lstm.map(lambda v: "" if v != v else f"{v:.3f}")
    out["params_vs_lstm"] = out.params_vs_lstm.map(lambda v: "" if v != v else f"{100 * v:.1f}%")
    out = out[["model", "L", "H", "params", "time_ms", "peak_mb", "time_vs_lstm", "params_vs_lstm", "note"]]
    out = out.rename(
        columns={
            "time_ms": "fwd+bwd ms",
            "peak_mb": "peak MB",
            "time_vs_lstm": "time/LSTM",
            "params_vs_lstm": "params/LSTM",
        }
    )
    return out.to_string(index=False)


def headline(df, batch: int) -> str:
    """'SSM fwd+bwd is X.XXx faster than LSTM with YY.Y% of its parameters' at B=16, L=4096, H=256,
    else at the largest shape run."""
    pairs = df[(df.model == "ssm") & df.time_ms.notna()].merge(
        df[(df.model == "lstm") & df.time_ms.notna()], on=["L", "H"], suffixes=("", "_lstm")
    )
    if pairs.empty:
        return "headline: no shape with both an SSM and an LSTM timing"
    b0, L0, H0 = HEADLINE
    exact = pairs[(pairs.L == L0) & (pairs.H == H0)] if batch == b0 else pairs.iloc[0:0]
    row = (exact if not exact.empty else pairs.sort_values(["L", "H"])).iloc[-1]
    speedup = row.time_ms_lstm / row.time_ms
    word = "faster" if speedup >= 1 else "slower"
    factor = speedup if speedup >= 1 else 1 / speedup
    shape = f"B={batch}, L={int(row.L)}, H={int(row.H)}"
    suffix = "" if not exact.empty else f" (eSSM's shape B={b0}, L={L0}, H={H0} not run)"
    return (
        f"At {shape}: SSM fwd+bwd is {factor:.2f}x {word} than LSTM with "
        f"{100 * row.params / row.params_lstm:.1f}% of its parameters{suffix}"
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    print(
        f"ssmts layer benchmark: device={args.device} autocast={args.autocast} threads={args.threads} "
        f"batch={args.batch} repeats={args.repeats} (median of fwd+bwd after {args.warmup} warm-up) "
        f"torch={torch.__version__}"
    )
    start = time.perf_counter()
    df = table(run(args))
    print(format_table(df))
    memory = (
        "torch.cuda.max_memory_allocated above the allocation before"
        if args.device.startswith("cuda")
        else (
            "not measured (--in-process)"
            if args.in_process
            else "peak RSS increase of a fresh process per configuration"
        )
    )
    print(f"memory: {memory}")
    print(
        "models: transformer = nn.TransformerEncoderLayer(H, nhead=gcd(8, H), dim_feedforward=4H, dropout=0); "
        f"ssm_recurrence only for L <= {args.recurrence_max_length}"
    )
    print(headline(df, args.batch))
    print(f"total {time.perf_counter() - start:.1f} s")
    if args.csv:
        df.to_csv(args.csv, index=False)
        print(f"wrote {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
