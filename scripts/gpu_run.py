"""The measurements that need a GPU, as steps of one short run (scripts/gpu_run.sh calls them in order).

    prepare     (here, before the run) the spoken words of the scale benchmark as one .npz: the training
                pool, validation and test clips at 4 kHz and the held-out clips at 2 kHz, exactly as
                `python -m ssmts.bench scale` resamples them, stored in float16 (a 16 kHz corpus of
                3,800 clips is 120 MB; this is 34 MB, quantization about -66 dB under full scale)
    save-model  fit a small SSMClassifier on the GPU (device "auto" and device "cuda"), save both, and
                write their predictions, for the test that loads them on a CPU machine
    speech      the scale benchmark's network rows (task speech, model ssm) on the GPU, appended to --out
    precision   one short fit per (precision, compile) on the spoken words: seconds per step, and the
                validation accuracy reached in those steps (to see that the arithmetic still learns)
    profile     torch.profiler over a short fit: the operators that take the time, and the host-device
                synchronizations per training step

Every step prints what it measures; rows carry the GPU's name.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

# min_steps=60: a training step costs a GPU about 30 ms whatever the model's size (the H200 run of
# 2026-11-28 spent over 15 s on the default 500 steps of this tiny model)
SAVE_MODEL_PARAMS = dict(d_model=16, d_state=8, n_layers=2, max_epochs=3, min_steps=60, batch_size=16, random_state=0)


def save_model_data() -> tuple[np.ndarray, np.ndarray]:
    """The small two-class problem the saved models learn: noisy sines of two frequencies, (64, 2, 96)."""
    rng = np.random.default_rng(0)
    t = np.arange(96) / 96
    y = np.arange(64) % 2
    freq = np.where(y == 0, 3.0, 7.0)[:, None, None]
    X = np.sin(2 * np.pi * freq * t + rng.uniform(0, 2 * np.pi, (64, 2, 1))) + 0.3 * rng.standard_normal((64, 2, 96))
    return X.astype(np.float32), y


def _device_name(device: str) -> str:
    import torch

    return torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu"


def prepare(args) -> None:
    from ssmts.bench.scale import load_speech

    data = load_speech(args.speech_dir, args.n_max)
    arrays = dict(X_pool=data.X_pool, y_pool=data.y_pool, rate=np.array(data.rate))
    for split, held in data.splits.items():
        half_X, half_y, half_rate = held.conditions["half_rate"]
        arrays.update({f"{split}_X": held.X, f"{split}_y": held.y, f"{split}_half_X": half_X})
        arrays["half_rate"] = np.array(half_rate)
    for key, value in arrays.items():
        if value.dtype == np.float32:
            arrays[key] = value.astype(np.float16)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    np.savez(args.out, **arrays)
    print(f"wrote {args.out}: {len(data.y_pool)} training clips, {Path(args.out).stat().st_size / 1e6:.1f} MB")


def load_prepared(path: str):
    """The ScaleData of `prepare`'s file, in float32."""
    from ssmts.bench.scale import HeldOut, ScaleData

    z = np.load(path)
    f32 = lambda key: z[key].astype(np.float32)  # noqa: E731
    half = int(z["half_rate"])
    splits = {
        split: HeldOut(
            f32(f"{split}_X"), z[f"{split}_y"], {"half_rate": (f32(f"{split}_half_X"), z[f"{split}_y"], half)}
        )
        for split in ("validation", "test")
    }
    return ScaleData(f32("X_pool"), z["y_pool"], splits, int(z["rate"]))


def save_model(args) -> None:
    from ssmts import SSMClassifier

    X, y = save_model_data()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / "inputs.npy", X)
    record = {"device_name": _device_name(args.devices[-1]), "models": {}}
    for device in args.devices:
        clf = SSMClassifier(**SAVE_MODEL_PARAMS, device=device).fit(X, y)
        path = clf.save(out / f"classifier_{device}.safetensors")
        record["models"][device] = dict(
            file=path.name,
            fitted_on=str(next(clf.model_.parameters()).device),
            predict_proba=clf.predict_proba(X).tolist(),
        )
        print(f"saved {path.name} (device={device}), training accuracy {np.mean(clf.predict(X) == y):.3f}")
        (out / "predictions.json").write_text(json.dumps(record))  # after each model: a cut-off run keeps it


def speech(args) -> None:
    import torch

    from ssmts.bench.scale import run_row

    data = load_prepared(args.data)
    for n in args.sizes:
        for seed in args.seeds:
            [row] = run_row("speech", "ssm", data, n, seed, {"device": args.device}, "speech", [args.split])
            row["device_name"] = _device_name(args.device)
            row["torch"] = torch.__version__
            row["data"] = "float16 copy of the 4 kHz clips (scripts/gpu_run.py prepare)"
            with open(args.out, "a") as f:
                f.write(json.dumps(row) + "\n")
            print(
                f"speech ssm n={n} seed={seed} on {row['device_name']}: accuracy {row['accuracy']:.3f}, "
                f"half rate {row[f'{args.split}_half_rate']:.3f}, fit {row['fit_seconds']:.1f} s",
                flush=True,
            )


def _short_fit_params(args, **extra) -> dict:
    from ssmts.bench.scale import PRESETS

    return dict(
        PRESETS["speech"].params,
        min_steps=args.steps,
        max_steps=args.steps,
        max_epochs=10_000,
        device=args.device,
        random_state=0,
        **extra,
    )


def precision(args) -> None:
    from ssmts import SSMClassifier
    from ssmts.bench.scale import subset

    data = load_prepared(args.data)
    index = subset(data.y_pool, args.n, 0)
    X, y = data.X_pool[index], data.y_pool[index]
    val = data.splits["validation"]
    for compile_ in args.compile:
        for arithmetic in args.precisions:
            clf = SSMClassifier(**_short_fit_params(args, precision=arithmetic, compile=compile_))
            started = time.perf_counter()
            try:
                clf.fit(X, y)
            except Exception as error:  # report and go on: one failing arithmetic must not hide the others
                print(f"precision={arithmetic} compile={compile_}: {type(error).__name__}: {error}", flush=True)
                continue
            seconds = time.perf_counter() - started  # fit returns with the weights back on the host
            epochs = [entry["seconds"] for entry in clf.history_]
            row = dict(
                precision=arithmetic,
                compile=compile_,
                n=args.n,
                batch_size=clf.batch_size,
                epochs=len(epochs),
                fit_seconds=round(seconds, 2),
                first_epoch_seconds=round(epochs[0], 2),
                later_epoch_seconds=round(float(np.median(epochs[1:])), 2) if len(epochs) > 1 else None,
                validation_accuracy=float(np.mean(clf.predict(val.X) == val.y)),
                device_name=_device_name(args.device),
            )
            with open(args.out, "a") as f:
                f.write(json.dumps(row) + "\n")
            print(json.dumps(row), flush=True)


def profile(args) -> None:
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from ssmts import SSMClassifier
    from ssmts.bench.scale import subset

    data = load_prepared(args.data)
    index = subset(data.y_pool, args.n, 0)
    clf = SSMClassifier(**_short_fit_params(args))
    warm = index[:: max(1, len(index) // 64)]  # every class (subset's indices come sorted)
    clf.fit(data.X_pool[warm], data.y_pool[warm])  # warm: kernels, FFT plans, allocator
    with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        clf.fit(data.X_pool[index], data.y_pool[index])
    events = prof.key_averages()
    print(events.table(sort_by="self_cuda_time_total", row_limit=20))
    print(events.table(sort_by="self_cpu_time_total", row_limit=20))
    watched = (
        "aten::item",
        "aten::_local_scalar_dense",
        "cudaStreamSynchronize",
        "cudaDeviceSynchronize",
        "cudaMemcpyAsync",
    )
    syncs = {e.key: e.count for e in events if e.key in watched}
    print(f"profile: {args.steps} training steps; host-device synchronizations and copies: {syncs}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/gpu_run.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--speech-dir", required=True)
    p.add_argument("--n-max", type=int, default=3000)
    p.add_argument("--out", required=True)
    p = sub.add_parser("save-model")
    p.add_argument("--out", required=True)
    p.add_argument("--devices", nargs="+", default=["auto", "cuda"], help="the device parameter of each model")
    p = sub.add_parser("speech")
    p.add_argument("--data", required=True)
    p.add_argument("--sizes", nargs="+", type=int, default=[3000])
    p.add_argument("--seeds", nargs="+", type=int, default=[0])
    p.add_argument("--split", default="test", choices=("validation", "test"))
    p.add_argument("--device", default="cuda")
    p.add_argument("--out", required=True)
    for name in ("precision", "profile"):
        p = sub.add_parser(name)
        p.add_argument("--data", required=True)
        p.add_argument("--n", type=int, default=3000)
        p.add_argument("--steps", type=int, default=300 if name == "precision" else 40)
        p.add_argument("--device", default="cuda")
        if name == "precision":
            p.add_argument("--out", required=True)
            p.add_argument("--precisions", nargs="+", default=["32", "bf16-mixed", "16-mixed"])
            p.add_argument(
                "--compile", nargs="+", type=lambda v: v == "true", default=[False, True], help="false, true"
            )
    args = parser.parse_args(argv)
    {"prepare": prepare, "save-model": save_model, "speech": speech, "precision": precision, "profile": profile}[
        args.step
    ](args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
