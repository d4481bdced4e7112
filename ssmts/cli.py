"""The `ssmts` command line.

    ssmts demo [--epochs N] [--rate HZ] [--seed S] [--data-dir DIR] [--quick]
    ssmts tasks list [--data-dir DIR]
    ssmts tasks show NAME
    ssmts tasks run NAME (--data-dir DIR | --synthetic) [--preset paper|small|tiny] [--epochs N]
                    [--device auto|cpu|cuda] [--out results.json] [--resume] [--seed S] [--limit N]
    ssmts tasks run ptd-sinusoids|ptd-robustness|ptd-ablation [--preset paper|small|tiny]
                    [--data-dir DIR] [--epochs N] [--seeds 0,1,2] [--out results.json]

Missing or malformed data, an unknown task, or a bad setting print one line saying what
is wrong and how to fix it, and exit with status 2; a file or directory that cannot be read or
written (an --out under a file, a symlink loop in --data-dir) exits with status 74. Set
SSMTS_DEBUG=1 for the traceback.

`ssmts tasks list` and `ssmts tasks show` read the declarative task registry and import torch
only where a preset is built and checked (`show`); the heavy modules are imported by the
command that needs them.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .tasks.registry import PTD_EXPERIMENTS, TASKS, task_presets

EXIT_USAGE = 2
EXIT_IO = 74  # a file or directory could not be read or written (sysexits' EX_IOERR)


def _run_presets() -> tuple[str, ...]:
    """Every preset some task accepts (`tasks run --preset`); each task's own are task_presets(name)."""
    return tuple(dict.fromkeys(preset for name in [*TASKS, *PTD_EXPERIMENTS] for preset in task_presets(name)))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ssmts",
        description="Deep MIMO diagonal state-space models for time series.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  ssmts demo\n  ssmts tasks list --data-dir ~/data\n"
        "  ssmts tasks run sc10 --synthetic --preset small --out runs/sc10/results.json\n"
        "  ssmts tasks run lra-listops --data-dir ~/data/lra_release --preset paper --device cuda",
    )
    commands = parser.add_subparsers(dest="command", metavar="{demo,tasks}")

    demo = commands.add_parser(
        "demo",
        help="train a spoken-word classifier on raw audio and show zero-shot resampling (offline, CPU)",
        description="Train an SSMClassifier on raw audio of 10 spoken words (the shipped espeak-ng copy, or "
        "Speech Commands with --data-dir) and classify unseen voices at the training rate and, "
        "with no retraining, at half the rate.",
    )
    demo.add_argument(
        "--epochs",
        type=int,
        help="training epochs (default 30, raised to reach the classifier's min_steps; 1 with --quick)",
    )
    demo.add_argument("--rate", type=int, help="training sample rate in Hz, even, at most 16000 (default 4000)")
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    demo.add_argument("--data-dir", type=Path, help="a Speech Commands v0.02 directory instead of the shipped copy")
    demo.add_argument(
        "--max-per-class",
        type=int,
        help="clips per word and split (default: all of the shipped copy; 16 with --data-dir; 0 = all)",
    )
    demo.add_argument("--device", default="cpu", help="cpu (default), cuda or auto")
    demo.add_argument("--quick", action="store_true", help="a seconds-long smoke run (tiny model, 2 clips per word)")
    demo.add_argument("--quiet", action="store_true", help="no progress bar")

    tasks = commands.add_parser(
        "tasks", help="list and run the benchmark tasks (LRA, Speech Commands, pixels, BIDMC, state tracking)"
    )
    task_commands = tasks.add_subparsers(dest="tasks_command", metavar="{list,show,run}")
    listing = task_commands.add_parser("list", help="every task with its description and data status")
    listing.add_argument("--data-dir", type=Path, help="check which tasks' data are present under DIR")

    show = task_commands.add_parser("show", help="a task's data layout, stand-in and presets")
    show.add_argument("name", help="task name (see `ssmts tasks list`)")

    run = task_commands.add_parser(
        "run",
        help="train and evaluate one task",
        description="Train a task with the shared Trainer, checkpointing every epoch next to --out, and write "
        "the results JSON and a per-epoch history CSV.",
    )
    run.add_argument("name", help="task name (see `ssmts tasks list`)")
    source = run.add_mutually_exclusive_group()  # one is required, except by the PTD experiments
    source.add_argument("--data-dir", type=Path, help="directory with the real data set")
    source.add_argument("--synthetic", action="store_true", help="use the offline synthetic stand-in")
    run.add_argument(
        "--preset",
        default="small",
        choices=_run_presets(),
        help="paper: eSSM Table 10 / S4 settings; small: minutes on a CPU (default); tiny: smoke test "
        "(`ssmts tasks show NAME` lists the task's presets)",
    )
    run.add_argument("--epochs", type=int, help="total epochs (default: the preset's)")
    run.add_argument("--device", default="auto", help="auto (default), cpu or cuda")
    run.add_argument(
        "--out", type=Path, help="results JSON (default ssmts-runs/<task>-<preset>[-synthetic]/results.json)"
    )
    run.add_argument("--resume", action="store_true", help="continue from the checkpoint next to --out")
    run.add_argument("--seed", type=int, default=0, help="random seed of the model and training (default 0)")
    run.add_argument("--limit", type=int, help="at most N samples per split (default: the preset's)")
    run.add_argument(
        "--cache-dir",
        type=Path,
        help="where synthetic stand-ins are cached (default $SSMTS_CACHE_DIR or ~/.cache/ssmts)",
    )
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.add_argument("--seeds", help="PTD experiments (ptd-*): comma-separated seeds (default: the preset's)")
    parser.set_defaults(tasks_parser=tasks, run_parser=run)
    return parser


def _tasks_list(data_dir: Path | None) -> int:
    from ssmts.tasks.registry import list_tasks

    tasks = list_tasks()
    rows = []
    for task in tasks:
        if data_dir is None:
            status = task.data_status()
        elif task.data_present(data_dir):
            status = "present"
        else:
            status = f"missing; {task.data_status()}"
        rows.append((task.name, task.kind, task.metric, status, task.description))
    widths = [max(len(row[i]) for row in rows + [("TASK", "KIND", "METRIC", "DATA", "")]) for i in range(4)]
    print("  ".join(h.ljust(w) for h, w in zip(("TASK", "KIND", "METRIC", "DATA"), widths)) + "  DESCRIPTION")
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[4])
    if data_dir is None:
        print("\nData status without --data-dir: pass --data-dir DIR to check for the real data sets.")
    elif not data_dir.is_dir():  # every task reads "missing" then: say why
        what = "is a file, not a directory" if data_dir.exists() else "does not exist"
        print(f"\nData directory: {data_dir} {what}, so no real data set was found in it.")
    else:
        print(f"\nData directory: {data_dir}")
    presets = "|".join(dict.fromkeys(p for name in PTD_EXPERIMENTS for p in task_presets(name)))
    print(f"\nPTD robustness experiments (offline; `ssmts tasks run NAME --preset {presets}`):")
    for name, description in PTD_EXPERIMENTS.items():
        print(f"  {name}  {description}")
    print("Run one with `ssmts tasks run NAME --synthetic` or `--data-dir DIR`; `ssmts tasks show NAME` for details.")
    return 0


def _tasks_show(name: str) -> int:
    """The task's description, data and every preset `ssmts tasks run NAME --preset` accepts."""
    from ssmts.tasks.registry import get_task

    if name in PTD_EXPERIMENTS:
        from ssmts.tasks.ptd import get_ptd_preset

        print(f"{name}: {PTD_EXPERIMENTS[name]}")
        for preset_name in task_presets(name):
            p = get_ptd_preset(name, preset_name)
            print(
                f"  preset {preset_name}: depth {p.n_layers}, H {p.d_model}, N {p.d_state}, epochs {p.max_epochs}, "
                f"batch {p.batch_size}, lr {p.lr}, lr SSM {p.lr_ssm}, seeds {list(p.seeds)}, data {p.data}"
            )
            for note in p.notes:
                print(f"      - {note}")
        return 0

    task = get_task(name)
    print(f"{task.name}: {task.description}")
    print(f"  kind: {task.kind}, metric: {task.metric}, inputs: {task.inputs}")
    print(f"  real data (--data-dir DIR): {task.expected}")
    print(f"  obtain from: {task.how_to_get}")
    print(f"  synthetic stand-in (--synthetic): {task.synthetic or 'none. ' + task.no_synthetic_reason}")
    if task.zero_shot:
        print("  zero-shot: also evaluated at half the sample rate (Delta rescaled / not; decimated / resampled)")
    if task.describe_preset is not None:
        for preset_name in task.presets:
            print(f"  {task.describe_preset(preset_name)}")
        return 0
    from ssmts.tasks.presets import get_preset

    for preset_name in task.presets:
        p = get_preset(task.name, preset_name)
        print(
            f"  preset {preset_name}: depth {p.n_layers}, heads {p.heads}, H {p.d_model}, N {p.d_state}, "
            f"lr SSM {p.lr_ssm}, lr others {p.lr}, dropout {p.dropout}, prenorm {p.prenorm}, norm {p.norm}, "
            f"activation {p.activation}, bidirectional {p.bidirectional}, batch {p.batch_size}, "
            f"epochs {p.max_epochs}, scheduler {p.scheduler}"
        )
        for note in p.notes:
            print(f"      - {note}")
    return 0


def _tasks_run(args: argparse.Namespace) -> int:
    if args.name in PTD_EXPERIMENTS:
        from ssmts.tasks.ptd import run_ptd

        seeds = None if args.seeds is None else _seed_list(args.seeds)
        import matplotlib

        matplotlib.use("Agg")
        from ssmts.tasks.ptd import default_ptd_out
        from ssmts.tasks.ptd_figures import save_ptd_figures

        out = args.out or default_ptd_out(args.name, args.preset)
        results = run_ptd(
            args.name,
            preset=args.preset,
            out=out,
            data_dir=args.data_dir,
            epochs=args.epochs,
            seeds=seeds,
            verbose=0 if args.quiet else 1,
        )
        print(f"wrote {out}" + "".join(f", {p}" for p in save_ptd_figures(results, out)))
        return 0
    if args.seeds is not None:
        raise ValueError("--seeds is for the PTD experiments (ptd-*); use --seed S")
    from ssmts.tasks.runner import run_task

    run_task(
        args.name,
        data_dir=args.data_dir,
        synthetic=args.synthetic,
        preset=args.preset,
        epochs=args.epochs,
        device=args.device,
        out=args.out,
        resume=args.resume,
        seed=args.seed,
        limit=args.limit,
        cache_dir=args.cache_dir,
        verbose=0 if args.quiet else 1,
    )
    return 0


def _seed_list(text: str) -> tuple[int, ...]:
    try:
        seeds = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ValueError(f"--seeds must be comma-separated integers, got {text!r}") from None
    if not seeds or min(seeds) < 0:
        raise ValueError(f"--seeds must be comma-separated integers >= 0, got {text!r}")
    return seeds


def _demo(args: argparse.Namespace) -> int:
    from ssmts.tasks.demo import run_demo

    run_demo(
        data_dir=args.data_dir,
        rate=args.rate,
        epochs=args.epochs,
        seed=args.seed,
        quick=args.quick,
        max_per_class=args.max_per_class,
        device=args.device,
        verbose=0 if args.quiet else 1,
    )
    return 0


def _check_input_paths(args: argparse.Namespace) -> None:
    """A --data-dir or --cache-dir in a symlink loop, refused by name before any work (a loader would
    call it missing, pathlib a 'Symlink loop' of no option); $SSMTS_CACHE_DIR, the cache directory
    where no --cache-dir is given, likewise. --out is checked by the runners."""
    from ssmts.tasks.paths import check_input_path

    for attribute, option in (("data_dir", "--data-dir"), ("cache_dir", "--cache-dir")):
        if getattr(args, attribute, None) is not None:
            check_input_path(getattr(args, attribute), option)
    if hasattr(args, "cache_dir") and args.cache_dir is None and os.environ.get("SSMTS_CACHE_DIR"):
        check_input_path(os.environ["SSMTS_CACHE_DIR"], "$SSMTS_CACHE_DIR")


def _user_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean bad input or missing data, reported without a traceback."""
    from ssmts.tasks.registry import SyntheticUnavailableError, UnknownTaskError

    errors = [SyntheticUnavailableError, UnknownTaskError, ValueError]
    # An error can only come from a module that was imported; importing the others just to name their
    # errors would load torch (speech_synth) into `tasks list` and `tasks show`.
    for module, name in (("ssmts.data.base", "DataNotFoundError"), ("ssmts.data.speech_synth", "EspeakNotFoundError")):
        if module in sys.modules:
            errors.append(getattr(sys.modules[module], name))
    return tuple(errors)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `ssmts` console script and `python -m ssmts`; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    if args.command == "tasks" and args.tasks_command is None:
        args.tasks_parser.print_help()
        return EXIT_USAGE
    if (
        args.command == "tasks"
        and args.tasks_command == "run"
        and not args.name.startswith("ptd-")
        and args.data_dir is None
        and not args.synthetic
    ):
        args.run_parser.error(
            "one of the arguments --data-dir --synthetic is required (the ptd-* experiments need neither)"
        )
    try:
        _check_input_paths(args)
        if args.command == "demo":
            return _demo(args)
        if args.tasks_command == "list":
            return _tasks_list(args.data_dir)
        if args.tasks_command == "show":
            return _tasks_show(args.name)
        return _tasks_run(args)
    except _user_errors() as error:
        if os.environ.get("SSMTS_DEBUG"):
            raise
        print(f"ssmts: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except (OSError, RuntimeError) as error:
        # Files and directories that cannot be read or written: the options checked up front
        # (ssmts.tasks.paths, whose message names the option), or a path met later, such as a symlink
        # loop inside --data-dir (pathlib raises RuntimeError for one before Python 3.13).
        if os.environ.get("SSMTS_DEBUG") or (isinstance(error, RuntimeError) and "Symlink loop" not in str(error)):
            raise
        where = f": {error.filename}" if getattr(error, "filename", None) else ""
        print(f"ssmts: error: {getattr(error, 'strerror', None) or error}{where}", file=sys.stderr)
        return EXIT_IO
    except KeyboardInterrupt:
        print("ssmts: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The output went to a program that stopped reading (`ssmts tasks list | head`). Point
        # stdout at devnull so that the interpreter's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
