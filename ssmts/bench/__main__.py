"""`python -m ssmts.bench NAME [options]`: run one of the registered benchmarks.

Each benchmark is a module with `main(argv: list[str]) -> int`, imported only when asked for.
"""

from __future__ import annotations

import importlib
import sys

BENCHMARKS = {
    "classify": "ssmts.bench.classify",
    "layer": "ssmts.bench.layer",
    "forecast": "ssmts.bench.forecast",
    "lncde": "ssmts.bench.lncde",
    "scaling": "ssmts.bench.scaling",
    "peers": "ssmts.bench.peers",
    "irregular": "ssmts.bench.irregular",
    "pretrain": "ssmts.bench.pretrain",
    "scale": "ssmts.bench.scale",
    "readout": "ssmts.bench.readout",
    "combine": "ssmts.bench.components",
}


def _usage() -> str:
    names = ", ".join(sorted(BENCHMARKS))
    return f"usage: python -m ssmts.bench NAME [options]   (NAME: {names}; NAME --help for its options)"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in BENCHMARKS:
        print(f"unknown benchmark {name!r}; choose one of {sorted(BENCHMARKS)}", file=sys.stderr)
        print(_usage(), file=sys.stderr)
        return 2
    module_name = BENCHMARKS[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name != module_name:  # a dependency of the benchmark is missing: show the real error
            raise
        print(f"benchmark {name!r} is registered but its module {module_name} is not available", file=sys.stderr)
        return 2
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
